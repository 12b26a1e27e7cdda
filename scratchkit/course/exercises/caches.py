"""Notebook 02's exercises: an LRU cache's hit count, the smallest cache for a target, Amdahl.

lru_hits(trace, capacity)                      checked against scratchkit.sim's LRU (which the
                                               tests hold to libCacheSim)
smallest_capacity(hits, lookups, target)       checked against a plain scan of the curve
embedding_speedup(hit_rate, hit_speedup)       checked against scratchkit.course.analysis
"""

from __future__ import annotations

import numpy as np

from scratchkit.course.analysis import amdahl_speedup
from scratchkit.course.exercises.checking import Case, Exercise, register
from scratchkit.course.hit_curves import HitCurves
from scratchkit.profiles import get_profile
from scratchkit.sim import simulate


def sim_lru_hits(trace, capacity: int) -> int:
    return simulate(np.asarray(trace, dtype=np.int64), "lru", int(capacity)).hits


def _small_curves() -> HitCurves:
    return HitCurves(get_profile("small").data, table=0, num_batches=30)


def _lru_cases() -> list[Case]:
    t = lambda *v: np.array(v, dtype=np.int64)
    rng = np.random.default_rng(2)
    spread = rng.integers(0, 50, 400)
    zipf = _small_curves().trace(1.05)[:2000]
    return [
        Case((t(1, 1, 2, 1, 1), 1), "capacity 1", "with room for one row, only an immediate repeat hits"),
        Case(
            (t(1, 2, 1, 3, 1, 2), 2),
            "a hit refreshes a row",
            "LRU evicts the least recently *used* row: a hit moves its row to the most recent end "
            "(OrderedDict.move_to_end), so 1 stays and 2 goes",
        ),
        Case(
            (t(1, 2, 3, 1, 2, 3, 1, 2, 3), 2),
            "a cycle one longer than the cache",
            "each id comes back just after it was evicted: no lookup hits",
        ),
        Case((spread, 50), "room for every id", "a cache that holds every id misses only each id's first use"),
        Case((t(), 4), "an empty trace", "no lookups, no hits: 0"),
        Case(
            (zipf, 200),
            "2,000 lookups of the small profile at zipf 1.05, 200 rows",
            "count a hit when the id is already cached; on a miss insert it, and evict the least "
            "recently used row only when the cache is over capacity",
            shown="curves.trace(1.05)[:2000], 200",
        ),
    ]


def scan_smallest(hits, lookups: int, target: float):
    """The smallest capacity c (1-based) with hits[c-1] / lookups >= target; None when none."""
    reached = np.flatnonzero(np.asarray(hits) / lookups >= target)
    return int(reached[0]) + 1 if reached.size else None


def _smallest_cases() -> list[Case]:
    a = lambda *v: np.array(v, dtype=np.int64)
    curves = _small_curves()
    lru = curves.lru_hits(1.05)
    size = curves.trace(1.05).size
    return [
        Case(
            (a(2, 5, 7, 9, 10), 10, 0.7),
            "reached at capacity 3",
            "hits[0] is the hit count with 1 row: capacity c is hits[c - 1]",
        ),
        Case((a(2, 5, 7, 9, 10), 10, 0.9), "exactly the target counts", "'reaches' means >=, not >"),
        Case((a(6, 8, 9), 10, 0.5), "the very first capacity", "capacities start at 1, not 0"),
        Case((a(2, 5, 7), 10, 0.95), "never reached", "when no capacity reaches the target, return None"),
        Case(
            (lru, size, 0.8),
            "LRU at zipf 1.05 on the small profile, 80%",
            shown=f"curves.lru_hits(1.05), {size:,}, 0.8",
        ),
    ]


def _speedup_cases() -> list[Case]:
    return [
        Case((0.0, 10.0), "no hits", "with no hits nothing gets faster: 1.0"),
        Case((1.0, 10.0), "every lookup hits", "with every lookup a hit, the work is hit_speedup times faster"),
        Case(
            (0.8, 1e12),
            "80% hits, hits almost free",
            "the misses still take their full time: time = (1 - h) + h / s of the all-miss time",
        ),
        Case((0.5, 2.0), "half the lookups twice as fast"),
        Case((0.95, 100.0), "95% hits, 100x faster"),
    ]


register(
    Exercise(
        "lru_hits",
        "lru_hits(trace, capacity)",
        _lru_cases,
        sim_lru_hits,
        "keep the cached ids in an OrderedDict, most recent last",
    ),
    Exercise(
        "smallest_capacity",
        "smallest_capacity(hits, lookups, target)",
        _smallest_cases,
        scan_smallest,
        "walk the capacities from 1 up and return the first whose hit rate reaches the target",
    ),
    Exercise(
        "embedding_speedup",
        "embedding_speedup(hit_rate, hit_speedup)",
        _speedup_cases,
        amdahl_speedup,
        "speed-up = 1 / ((1 - hit_rate) + hit_rate / hit_speedup)",
    ),
)
