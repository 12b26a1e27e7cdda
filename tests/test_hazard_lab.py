"""The hazard lab: correct switches give the baseline exactly; a hazard's verdict matches its counts."""

from dataclasses import replace

import numpy as np
import pytest

from scratchkit.config import CacheParams
from scratchkit.course.hazard_lab import HazardLab
from scratchkit.sim.window import minimum_capacity
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.trainers.scratchpipe import Hazards


@pytest.fixture(scope="module")
def lab():
    from scratchkit.profiles import get_profile

    config = get_profile("tiny")
    config = config.replace(
        data=replace(config.data, table_sizes=(200, 100), batch_size=8, pooling=2), cache=CacheParams(depth=2)
    )
    return HazardLab(config, steps=12, slow_write_back=0.005)


def test_scratchpad_is_sized_at_the_minimum(lab):
    source = SyntheticSource(lab.config.data)
    sets = [[np.unique(i) for i in source.batch(b).ids] for b in range(12)]
    expected = max(minimum_capacity([s[t] for s in sets], 2) for t in range(len(source.table_sizes)))
    assert lab.config.cache.capacity == expected


def test_safe_switches_equal_the_baseline(lab):
    result = lab.run(Hazards())
    assert result.max_abs_diff == 0.0 and result.stale_reads == 0
    assert np.all(result.loss_gap == 0) and np.all(result.train_hit_rate == 1.0)
    assert result.first_divergence is None
    assert result.verdict() == ["Every invariant held: the run equals the baseline bit for bit."]
    assert len(result.events.stages) == 6 * 12


def test_holds_off_breaks_and_says_which_invariant(lab):
    for _ in range(3):  # the race needs Plan to run ahead of Train; it nearly always does
        result = lab.run(Hazards(holds=False))
        wrong = sum(r.lookups - r.hits for r in result.records)
        if wrong or result.max_abs_diff > 0:
            break
    verdict = " ".join(result.verdict())
    assert wrong > 0 or result.max_abs_diff > 0
    assert ("Invariant 1 (every lookup in Train hits) broke" in verdict) == (wrong > 0)
    assert ("Invariant 2 (exactness) broke" in verdict) == (result.max_abs_diff > 0)
    if wrong:
        assert f"{wrong} lookups" in verdict and "invariant 4 (no eviction of a held slot)" in verdict


def test_refusals(lab):
    with pytest.raises(ValueError, match="steps"):
        HazardLab(lab.config, steps=0)
    with pytest.raises(ValueError, match="slow_write_back"):
        HazardLab(lab.config, slow_write_back=-1)
