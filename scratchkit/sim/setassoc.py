"""Set-associative LRU, the layout of production GPU embedding caches.

The `capacity` rows are cut into `sets = capacity // ways` sets of `ways` rows. An id may live
only in the set its hash picks, and each set is a small LRU of its own. Checking a set is cheap on
a GPU (one warp reads `ways` tags: FBGEMM's GPU LRU cache uses 32 ways), but a hot set evicts
rows while other sets sit idle. Ids are spread over sets by a 64-bit integer mix (murmur3's
finalizer here), so neighbouring ids do not crowd one set.

Conflict misses are those the layout causes: accesses that miss here but hit in a fully
associative LRU of the same capacity (per access, so the count is never negative; the rare access
that hits here and misses there is not netted against it). Fills, victims and the flush are
counted as for LRU (`lru.py`).

Simulated without a loop: ordering the trace by set (stably) puts each set's accesses together, in
time order, and reuse never crosses sets; the stack distance of each access within that order is
its distance inside its own set, and it hits iff that distance is below `ways` (see `stackdist.py`).
"""

from __future__ import annotations

import numpy as np

from scratchkit.sim.checks import as_capacity, as_count, as_trace
from scratchkit.sim.record import SimResult
from scratchkit.sim.reuse import group_by_id
from scratchkit.sim.stackdist import stack_distances

# FBGEMM's GPU LRU cache uses 32 ways: one warp lane checks each way of a set at once.
DEFAULT_WAYS = 32


def set_of(ids: np.ndarray, sets: int) -> np.ndarray:
    """The set of each id: murmur3's 64-bit finalizer (fmix64) of the id, modulo `sets`. [n] int64"""
    h = np.asarray(ids, dtype=np.int64).astype(np.uint64)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)  # uint64 products wrap, as in C
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC4CEB9FE1A85EC53)
    h = h ^ (h >> np.uint64(33))
    return (h % np.uint64(sets)).astype(np.int64)


def simulate_setassoc(trace, capacity: int, ways: int = DEFAULT_WAYS) -> SimResult:
    trace = as_trace(trace)
    capacity = as_capacity(capacity)
    ways = as_count(ways, "ways")
    if capacity % ways:
        lower, upper = capacity - capacity % ways, capacity - capacity % ways + ways
        hint = f"{lower} or {upper}" if lower else f"{upper}"
        raise ValueError(f"capacity {capacity} is not a multiple of ways {ways}; use {hint} (or fewer ways)")
    sets = capacity // ways
    set_index = set_of(trace, sets)
    by_set = group_by_id(set_index)  # positions, grouped by set, time order
    in_set = stack_distances(trace[by_set])  # distance inside the id's own set
    hit = (in_set >= 0) & (in_set < ways)
    full = stack_distances(trace)[by_set]  # fully associative, same order
    full_hit = (full >= 0) & (full < capacity)
    hits = int(np.count_nonzero(hit))
    conflicts = int(np.count_nonzero(full_hit & ~hit))
    # A set fills up and stays full: it ends holding min(its distinct ids, ways) rows.
    rows = np.unique(trace)
    resident = int(np.minimum(np.bincount(set_of(rows, sets), minlength=sets), ways).sum())
    misses = trace.size - hits
    return SimResult(
        policy="setassoc",
        capacity=capacity,
        lookups=int(trace.size),
        hits=hits,
        misses=misses,
        fetched_rows=misses,
        written_back_rows=misses - resident,
        flushed_rows=resident,
        extra={"ways": ways, "sets": sets, "conflict_misses": conflicts},
    )
