"""Shared test fixtures: small configs and the path to ../shared/data (skipped when absent)."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def tiny_config():
    from scratchkit.profiles import get_profile

    return get_profile("tiny")


@pytest.fixture
def criteo_sample() -> Path:
    path = SHARED_DATA / "criteo-kaggle-sample" / "train.tsv"
    if not path.exists():
        pytest.skip(f"the Criteo sample is not at {path} (it lives in ../shared beside the project)")
    return path
