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


@pytest.fixture(params=["twin", "host", pytest.param("cupy", marks=pytest.mark.gpu)])
def engine(request):
    """A kernel engine: the NumPy twins, the .cu files built for the CPU, or CuPy on a GPU.

    32 threads per block, so small batches still span several blocks and a partial last block.
    (test_scratchpad.py overrides this fixture with the engine's name, which Scratchpad takes.)
    """
    from scratchkit.backend import detect
    from scratchkit.kernels import make_engine

    if request.param == "cupy" and not detect().cupy_gpu:
        pytest.skip("needs an NVIDIA GPU with CuPy")
    return make_engine(request.param, threads_per_block=32)
