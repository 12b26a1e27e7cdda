"""HitCurves: every curve equals the per-capacity simulators; traces and curves are made once."""

import numpy as np
import pytest

from scratchkit.course.analysis import window_working_set
from scratchkit.config import DataConfig
from scratchkit.course.hit_curves import HitCurves
from scratchkit.sim import simulate


@pytest.fixture(scope="module")
def curves():
    return HitCurves(
        DataConfig(table_sizes=(600, 50), pooling=2, batch_size=16, num_batches=100), num_batches=12, points=8
    )


@pytest.mark.parametrize("policy", ["lru", "static", "lfu", "opt"])
def test_curves_equal_the_simulators(curves, policy):
    trace = curves.trace(0.9)
    rates = curves.curve(0.9, policy)
    expected = [simulate(trace, policy, int(c)).hit_rate for c in curves.capacities]
    np.testing.assert_allclose(rates, expected)
    c = int(curves.capacities[3]) + 1
    assert curves.hit_rate(0.9, policy, c) == pytest.approx(simulate(trace, policy, c).hit_rate)


def test_lookahead_needs_the_window_working_set(curves):
    trace = curves.trace(0.9)
    batches = np.split(trace, 12)
    need = int(window_working_set([np.unique(b) for b in batches], 2).max())
    assert curves.needed(0.9, 2) == need
    rates = curves.curve(0.9, "lookahead", depth=2)
    assert np.all(rates[curves.capacities >= need] == 1.0)
    assert np.isnan(rates[curves.capacities < need]).all()
    assert simulate(trace, "lookahead", need, batch_size=32, depth=2).hit_rate == 1.0
    assert np.isnan(curves.hit_rate(0.9, "lookahead", need - 1, depth=2))


def test_traces_are_made_once_per_locality(curves):
    assert curves.trace(0.5) is curves.trace(0.5)
    assert curves.curve(0.5, "lru") is curves.curve(0.5, "lru")
    assert not np.array_equal(curves.trace(0.5), curves.trace(1.2))
    assert curves.trace(0.5).size == 12 * 32
    assert curves.capacities[-1] == 600 and curves.capacities[0] >= 1


def test_refusals(curves):
    with pytest.raises(ValueError, match="unknown policy 'fifo'"):
        curves.curve(1.0, "fifo")
    with pytest.raises(ValueError, match="capacity must be in 1..600"):
        curves.hit_rate(1.0, "lru", 0)
    with pytest.raises(ValueError, match="table 2 out of range"):
        HitCurves(DataConfig(table_sizes=(10,)), table=2)
    with pytest.raises(ValueError, match="num_batches"):
        HitCurves(DataConfig(table_sizes=(10,), num_batches=5), num_batches=6)
