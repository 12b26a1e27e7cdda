"""One-pass curves against per-capacity simulation, and stack distances against their definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchkit.sim import (
    lru_mrc,
    next_use,
    opt_mrc,
    simulate_lru,
    simulate_opt,
    stack_distance_histogram,
    stack_distances,
)

traces = st.lists(st.integers(0, 12), max_size=60).map(lambda ids: np.array(ids, dtype=np.int64))


def mattson_distances(trace) -> list[int]:
    """The definition: keep ids in a list, most recent first; the distance is the position."""
    stack, out = [], []
    for row in trace.tolist():
        if row in stack:
            out.append(stack.index(row))
            stack.remove(row)
        else:
            out.append(-1)
        stack.insert(0, row)
    return out


def naive_next_use(trace) -> list[int]:
    return [next((u for u in range(t + 1, len(trace)) if trace[u] == trace[t]), len(trace)) for t in range(len(trace))]


@settings(max_examples=150, deadline=None)
@given(traces)
def test_stack_distances_match_the_definition(trace):
    assert stack_distances(trace).tolist() == mattson_distances(trace)
    assert next_use(trace).tolist() == naive_next_use(trace)


@settings(max_examples=80, deadline=None)
@given(traces)
def test_lru_curve_equals_simulation_at_every_capacity(trace):
    curve = lru_mrc(trace)
    unique = len(set(trace.tolist()))
    assert curve.capacities.tolist() == list(range(1, unique + 1))
    for capacity in range(1, unique + 3):
        assert curve.hits_at(capacity) == simulate_lru(trace, capacity).hits


@settings(max_examples=60, deadline=None)
@given(traces)
def test_opt_curve_equals_simulation_and_beats_lru(trace):
    capacities = list(range(1, len(set(trace.tolist())) + 3))
    opt = opt_mrc(trace, capacities)
    lru = lru_mrc(trace)
    for capacity, hits in zip(capacities, opt.hits.tolist()):
        assert hits == simulate_opt(trace, capacity).hits
        assert hits >= lru.hits_at(capacity)


def test_large_ids_and_long_trace_need_several_radix_passes():
    """Ids beyond 2**32 take three 16-bit passes; the distances must not care."""
    rng = np.random.default_rng(7)
    rows = rng.integers(0, 2**50, size=300)
    trace = rows[rng.integers(0, 300, size=5_000)]
    assert stack_distances(trace).tolist() == mattson_distances(trace)
    assert lru_mrc(trace).hits_at(40) == simulate_lru(trace, 40).hits


def test_histogram_counts_every_reuse_once():
    trace = np.random.default_rng(3).integers(0, 50, size=2_000)
    hist = stack_distance_histogram(trace)
    distances = np.array(mattson_distances(trace))
    assert hist.tolist() == np.bincount(distances[distances >= 0], minlength=50).tolist()


def test_edge_cases_empty_single_and_repeats():
    empty = np.zeros(0, dtype=np.int64)
    assert lru_mrc(empty).capacities.size == 0
    assert lru_mrc(empty).hits_at(5) == 0
    assert opt_mrc(empty, [1, 3]).hits.tolist() == [0, 0]
    assert stack_distances(empty).size == 0
    assert lru_mrc([9]).hits.tolist() == [0]
    same = np.full(10, 4)
    assert lru_mrc(same).hits.tolist() == [9]
    assert opt_mrc(same, [1]).hits.tolist() == [9]
    cycle = np.tile(np.arange(5), 4)  # LRU's worst case: a loop one row too big
    assert lru_mrc(cycle).hits_at(4) == 0
    assert lru_mrc(cycle).hits_at(5) == 15
    assert opt_mrc(cycle, [4]).hits[0] == simulate_opt(cycle, 4).hits > 0


def test_curve_rows_for_json():
    rows = lru_mrc([1, 2, 1, 2]).to_rows()
    assert rows == [{"capacity": 1, "hits": 0, "hit_rate": 0.0}, {"capacity": 2, "hits": 2, "hit_rate": 0.5}]
    with pytest.raises(ValueError, match="not on this opt curve"):
        opt_mrc([1, 2, 3, 1], [2]).hits_at(1)


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.array([[1, 2]]), "1-D"),
        (np.array([1.5, 2.0]), "integer ids"),
        (np.array([3, -1]), r"trace\[1\] = -1"),
        (np.array([True, False]), "integer ids"),
    ],
)
def test_curves_refuse_bad_traces(bad, message):
    with pytest.raises(ValueError, match=message):
        lru_mrc(bad)
    with pytest.raises(ValueError, match=message):
        opt_mrc(bad, [1])


def test_opt_curve_refuses_bad_capacities():
    with pytest.raises(ValueError, match="capacity must be an integer >= 1, got 0"):
        opt_mrc([1, 2], [3, 0])
