"""Measured constants live in scratchkit/measured.json with their provenance, and the code reads
them from there (scratchkit/measured.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from scratchkit.data.synthetic import SyntheticSource
from scratchkit.distributed import sharded_cost
from scratchkit.embedding.working_sets import WorkingSets
from scratchkit.measure.bench import run_bench
from scratchkit.measured import DATA, PROVENANCE, measured, provenance
from scratchkit.profiles import get_profile


def test_every_measured_constant_says_where_it_came_from():
    entries = json.loads(DATA.read_text())
    assert entries
    for name, entry in entries.items():
        assert "value" in entry, name
        for key in PROVENANCE:
            assert entry.get(key), f"{DATA}: {name} has no {key!r}"
        assert entry["command"].startswith("scripts/measure_constants.py"), name
        assert set(provenance(name)) == set(entry) - {"value"}


def test_the_code_uses_the_measured_values():
    assert sharded_cost.MISS_SHARE == measured("miss_share")
    assert WorkingSets.BITMAP_ROWS_PER_LOOKUP == measured("bitmap_rows_per_lookup")


def test_an_unknown_name_says_what_the_file_holds():
    with pytest.raises(KeyError, match="no measured constant 'nope'.*miss_share"):
        measured("nope")


def test_the_miss_share_is_what_a_run_fetches_today():
    """Data, not speed: the synthetic batches are seeded, so a run now fetches the same share."""
    config = get_profile("small")
    fetched = run_bench(config, ["scratchpipe"], 60, warmup=5)[0].fetched_rows_per_step
    source = SyntheticSource(config.data)
    distinct = np.mean([sum(len(np.unique(ids)) for ids in source.batch(b).ids) for b in range(5, 65)])
    assert round(fetched / distinct, 2) == measured("miss_share")
