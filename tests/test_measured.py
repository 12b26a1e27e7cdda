"""Measured constants live in scratchkit/measured.json with their provenance, and the code reads
them from there (scratchkit/measured.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

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


def test_the_servers_host_core_is_read_from_its_data_file_with_its_provenance():
    """One host core's speeds (the GPU servers' host side) come from costmodel/host_core.json, which
    says what, how, when and on which machine; every server carries them and cites the file."""
    from scratchkit.costmodel.servers import HOST_CORE_FILE, SERVERS, server

    data = json.loads(HOST_CORE_FILE.read_text())
    for key in PROVENANCE:
        assert data.get(key), f"{HOST_CORE_FILE}: no {key!r}"
    h100 = server("h100-pcie5").to_json()
    for name, value in data["fields"].items():
        assert all(server(s).to_json()[name] == value for s in SERVERS), name  # JSON form: the file's
        assert HOST_CORE_FILE.name in server("h100-pcie5").sources[name], name
    assert h100["host_op_latency"] == data["fields"]["host_op_latency"] > 0


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


def test_the_criteo_skew_profile_reads_the_fitted_exponents():
    from scratchkit.profiles import CRITEO_KAGGLE_CARDINALITIES, CRITEO_KAGGLE_EXPONENTS

    assert CRITEO_KAGGLE_EXPONENTS == tuple(measured("criteo_kaggle_exponents"))
    assert len(CRITEO_KAGGLE_EXPONENTS) == len(CRITEO_KAGGLE_CARDINALITIES)


def test_the_small_features_exponents_fit_again_from_the_sample():
    """The fit of every feature of under 20,000 rows, from the sample the entry names (the large
    ones take minutes: scripts/measure_constants.py criteo_kaggle_exponents refits them all)."""
    scripts = Path(__file__).resolve().parents[1] / "scripts"
    sys.path.insert(0, str(scripts))
    try:
        from fit_criteo_locality import DEFAULT, fit_exponent
    finally:
        sys.path.remove(str(scripts))
    if not DEFAULT.exists():
        pytest.skip(f"no Criteo Kaggle sample at {DEFAULT}")
    from scratchkit.data.criteo import load_criteo
    from scratchkit.profiles import CRITEO_KAGGLE_CARDINALITIES as sizes

    data = load_criteo(DEFAULT, list(sizes), batch_size=1)
    small = [t for t, size in enumerate(sizes) if size < 20_000]
    assert len(small) >= 10
    exponents = measured("criteo_kaggle_exponents")
    for t in small:
        counts = np.unique(data.ids[t], return_counts=True)[1]
        assert fit_exponent(counts, sizes[t]) == exponents[t], f"feature C{t + 1}"
