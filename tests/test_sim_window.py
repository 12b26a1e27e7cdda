"""The look-ahead window's working set, computed once for the whole kit, against its slow twin."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scratchkit.sim.lookahead import cut_into_batches, window_working_sets
from scratchkit.sim.window import minimum_capacity, window_sizes, window_sizes_obvious


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), max_size=12), max_size=25), st.integers(0, 5))
def test_window_sizes_equal_the_unions_built_by_hand(batches, depth):
    sets = [np.unique(np.array(b, dtype=np.int64)) for b in batches]
    assert window_sizes(sets, depth).tolist() == window_sizes_obvious(sets, depth).tolist()


def test_minimum_capacity_is_the_largest_window():
    rng = np.random.default_rng(0)
    sets = [np.unique(rng.integers(0, 60, 25)) for _ in range(40)]
    for depth in (0, 1, 2, 4):
        brute = max(
            len(set().union(*(set(s.tolist()) for s in sets[max(0, b - depth) : b + 1]))) for b in range(len(sets))
        )
        assert minimum_capacity(sets, depth) == brute
    assert minimum_capacity([], 2) == 0


def test_the_lookahead_simulator_counts_the_same_windows():
    """sim/lookahead.py cuts a trace into batches and counts windows through the same function."""
    rng = np.random.default_rng(1)
    trace = rng.integers(0, 300, 4000)
    batches = cut_into_batches(trace, 100)
    sets = [np.unique(trace[i : i + 100]) for i in range(0, 4000, 100)]
    for depth in (0, 2, 5):
        assert window_working_sets(batches, depth).tolist() == window_sizes(sets, depth).tolist()


@pytest.mark.parametrize("depth", [-1, 1.5, True])
def test_a_bad_depth_is_refused(depth):
    with pytest.raises(ValueError, match="depth must be an integer >= 0"):
        window_sizes([np.arange(3)], depth)
