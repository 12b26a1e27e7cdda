"""SHARDS (Waldspurger et al., FAST'15): an LRU curve from a hashed sample of the ids.

An id is sampled iff fmix64(id) < threshold; every access to a sampled id is simulated, every
other one skipped, so the sample is a spatial one: a sampled id keeps all its reuses. Its stack
distance among sampled ids, divided by the rate R = threshold / 2^64, estimates the distance in
the whole trace, and each sampled reuse stands for 1/R reuses.

- fixed rate (`rate=R`): memory grows with R x distinct ids. The estimate is adjusted as SHARDS_adj
  does: the expected count of sampled accesses (R x lookups) minus the actual count is added to
  distance 0, which removes most of the bias a few very hot ids bring.
- fixed size (`size=S`): at most S ids are kept. The rate starts at `rate` (default 1) and falls
  each time one id too many is sampled: the id with the largest hash leaves and the threshold
  drops to its hash. Each access is weighed by 1/R at the rate of its moment; the weights go into
  bins of scaled distance (`lru_engine.cpp`), and the same adjustment is made. Memory is constant.

The engines (`lru_engine.cpp`, `stack_twin.py`) report counts; this module turns them into a `Curve`
of estimated hits, a step function listed at the capacities where it steps (so its size follows
the sample, not the distinct ids), and measures its error.
"""

from __future__ import annotations

import math

import numpy as np

from scratchkit.sim.checks import as_count, as_share
from scratchkit.sim.curve import Curve

EXACT = (1 << 64) - 1  # threshold of the exact engine: no id is hashed out
MAX_BINS = 1 << 20  # fixed size: at most 1M bins of scaled distance (8 MB)


def threshold_for(rate: float) -> int:
    """The hash threshold of sampling rate `rate` in (0, 1]: ids with fmix64(id) < it are kept."""
    rate = as_share(rate, "sample rate")
    return EXACT if rate == 1.0 else max(int(rate * 2.0**64), 1)


def check_sampling(rate, size) -> tuple[float | None, int | None]:
    """(rate, size) checked: rate in (0, 1] or None, size an integer >= 1 or None."""
    rate = None if rate is None else as_share(rate, "sample rate")
    size = None if size is None else as_count(size, "sample size")
    return rate, size


def exact_curve(lookups: int, cold: int, hist: np.ndarray) -> Curve:
    """Every access simulated: hits(C) = reuses at distance < C, for C = 1 .. distinct ids."""
    hits = np.zeros(cold, dtype=np.int64)
    hits[: hist.size] = np.cumsum(hist, dtype=np.int64)[:cold]
    if hist.size < cold:
        hits[hist.size :] = hits[hist.size - 1] if hist.size else 0
    return Curve("lru", lookups, cold, np.arange(1, cold + 1, dtype=np.int64), hits)


def fixed_rate_curve(lookups: int, sampled: int, cold: int, hist: np.ndarray, rate: float) -> Curve:
    """hits(C) = (sampled reuses at distance < C x R, plus SHARDS_adj) / R.

    That changes only where ceil(C x R) does: at C = floor(k / R) + 1, the step's first
    capacity; the curve lists those (about R x distinct ids of them, not every capacity).
    """
    unique = int(round(cold / rate))
    steps = np.arange(int(math.ceil(unique * rate)) + 1, dtype=np.int64)
    capacities = _distinct(np.floor(steps / rate).astype(np.int64) + 1)
    capacities = capacities[capacities < unique]
    below = np.concatenate([[0], np.cumsum(hist, dtype=np.int64)])  # [k] reuses at d < k
    k = np.minimum(np.ceil(capacities * rate).astype(np.int64), hist.size)
    adjust = lookups * rate - sampled
    return _estimate(lookups, unique, capacities, (below[k] + adjust) / rate, rate)


def fixed_size_curve(lookups: int, bins: np.ndarray, width: float, weight: float, rate: float) -> Curve:
    """hits(C) = weight of reuses in bins wholly below C, plus the adjustment lookups - weight.

    The weights estimate counts: all of them the lookups, those of first accesses the distinct
    ids. As SHARDS_adj does at a fixed rate, the gap between the lookups and their estimate is
    put at distance 0 (on a Zipf trace it cuts a sampled curve's error several-fold, where
    dividing by the weight instead spreads it over all distances; tests/test_sim_profile.py
    checks the sampled curves against the exact one). The curve steps where a bin ends: at C = ceil(j x width).
    """
    unique = max(int(round(weight - float(bins.sum()))), 0)
    if rate == 1.0:  # never sampled down: exact, and listed at every capacity
        capacities = np.arange(1, unique, dtype=np.int64)
    else:
        steps = np.ceil(np.arange(bins.size + 1) * width)
        capacities = _distinct(np.maximum(steps, 1).astype(np.int64))
        capacities = capacities[capacities < unique]
    below = np.concatenate([[0.0], np.cumsum(bins)])  # [j] weight in bins < j
    whole = np.minimum(np.floor(capacities / width).astype(np.int64), bins.size)
    return _estimate(lookups, unique, capacities, below[whole] + (lookups - weight), rate)


def _distinct(ascending: np.ndarray) -> np.ndarray:
    """The distinct values of a nondecreasing array (np.unique sorts: 0.7 s for 1M here)."""
    keep = np.ones(ascending.size, dtype=bool)
    keep[1:] = ascending[1:] != ascending[:-1]
    return ascending[keep]


def _estimate(lookups, unique, capacities, hits, rate) -> Curve:
    """Round and keep within [0, lookups - unique] (clipping keeps the curve nondecreasing)."""
    hits = np.clip(np.rint(hits), 0, max(lookups - unique, 0)).astype(np.int64)
    return Curve("lru", lookups, unique, capacities, hits, rate=rate)


def curve_error(approx: Curve, exact: Curve, from_capacity: int = 1) -> dict:
    """Hit-rate error of `approx` against `exact` at every capacity from `from_capacity` to the
    exact curve's distinct ids: {"mae", "max", "from_capacity", "to_capacity", "capacities"}."""
    start = max(as_count(from_capacity, "from_capacity"), 1)
    stop = max(exact.unique_ids, start)
    capacities = np.arange(start, stop + 1, dtype=np.int64)
    gap = np.abs(approx.rates_at(capacities) - exact.rates_at(capacities))
    return {
        "mae": float(gap.mean()),
        "max": float(gap.max()),
        "from_capacity": int(start),
        "to_capacity": int(stop),
        "capacities": int(capacities.size),
    }


def smallest_trusted_capacity(rate: float) -> int:
    """Below 1/R rows a sampled curve has less than one sampled id per row: not to be trusted."""
    return max(math.ceil(1.0 / rate), 1)
