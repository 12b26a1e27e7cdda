"""The scratchpad over depth: each depth at its minimum capacity, on LRU's and OPT's axes."""

from __future__ import annotations

import numpy as np
import pytest

from scratchkit.sim import lookahead_depth_curve, lru_mrc, min_capacity, opt_mrc, simulate_lookahead


def zipf(n: int, rows: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).zipf(1.1, n) % rows).astype(np.int64)


def test_each_depth_is_the_simulation_at_its_minimum_capacity():
    trace = zipf(6_000, 900, 0)
    curve = lookahead_depth_curve(trace, batch_size=200, depths=[0, 1, 3])
    for d, need, fetched in zip(curve.depths, curve.min_capacity, curve.fetched_rows):
        assert need == min_capacity(trace, 200, int(d))
        assert fetched == simulate_lookahead(trace, int(need), 200, int(d)).fetched_rows
    assert curve.min_capacity.tolist() == sorted(curve.min_capacity.tolist())
    assert curve.to_rows()[0]["served_without_copy"] == len(trace) - curve.fetched_rows[0]


def test_one_lookup_per_batch_and_no_depth_is_belady_at_one_row():
    trace = zipf(3_000, 200, 1)
    curve = lookahead_depth_curve(trace, batch_size=1, depths=[0])
    assert curve.min_capacity.tolist() == [1]
    assert curve.served_without_copy.tolist() == opt_mrc(trace, [1]).hits.tolist()


def test_as_curve_shares_the_lru_curves_axes():
    trace = zipf(8_000, 1_500, 2)
    depth = lookahead_depth_curve(trace, batch_size=500, depths=[0, 1, 2]).as_curve()
    lru = lru_mrc(trace)
    assert depth.policy == "lookahead" and depth.unique_ids == lru.unique_ids
    assert np.all(np.diff(depth.capacities) > 0)
    for capacity, hits in zip(depth.capacities, depth.hits):  # a look at the future wins
        assert hits >= lru.hits_at(int(capacity))


def test_bad_depths_and_batch_sizes():
    with pytest.raises(ValueError, match="depth must be an integer >= 0, got -1"):
        lookahead_depth_curve([1, 2, 3], batch_size=2, depths=[-1])
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got 0"):
        lookahead_depth_curve([1, 2, 3], batch_size=0)
