"""LRU: on a miss with the cache full, evict the least recently used row.

A demand cache: a miss fetches the row (fetched_rows = misses) and evicts one victim once the
cache is full; every victim was looked up, so training dirtied it and it is written back. The
rows resident at the end are counted as `flushed_rows`.

This simulator walks the trace one access at a time (an OrderedDict is the LRU stack: the
front is the least recently used). It is the slow, obvious twin of `lru_mrc` in `mrc.py`, which
gets the hits of *every* capacity in one vectorised pass; tests check that they agree.
`lru_by_batch` is the same cache served a whole batch at a time, as the kit's trainers serve it.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from scratchkit.sim.checks import as_capacity, as_trace
from scratchkit.sim.record import SimResult


def simulate_lru(trace, capacity: int) -> SimResult:
    trace = as_trace(trace)
    capacity = as_capacity(capacity)
    stack: OrderedDict[int, None] = OrderedDict()  # least recently used first
    hits = 0
    for row in trace.tolist():
        if row in stack:
            hits += 1
            stack.move_to_end(row)
        else:
            if len(stack) == capacity:
                stack.popitem(last=False)  # the victim
            stack[row] = None
    return demand_result("lru", capacity, len(trace), hits, resident=len(stack))


def demand_result(policy: str, capacity: int, lookups: int, hits: int, resident: int, **extra) -> SimResult:
    """The record of a demand cache: every miss fills one row, every fill past `capacity`
    evicts one dirty victim, so victims = misses - rows resident at the end."""
    misses = lookups - hits
    return SimResult(
        policy=policy,
        capacity=capacity,
        lookups=lookups,
        hits=hits,
        misses=misses,
        fetched_rows=misses,
        written_back_rows=misses - resident,
        flushed_rows=resident,
        extra=extra,
    )


def lru_by_batch(sets: list[np.ndarray], rows: int, capacity: int) -> np.ndarray:
    """The same cache served a batch at a time, as the kit's demand caches serve one
    (trainers/cached.py): `sets[b]`, batch b's distinct ids, all touched at once; the ids not
    resident are fetched; past `capacity` the least recently used rows the batch does not use
    are evicted (among rows last used in the same batch, as NumPy's partition finds them).
    -> [batches, 2] int64: per batch, rows fetched and rows evicted. With one id a batch it is
    `simulate_lru` (tests/test_sim_policies.py holds them to each other)."""
    capacity = as_capacity(capacity)
    last = np.full(rows, -1, dtype=np.int64)  # batch that last used each resident id, -1 = not
    resident = 0
    moved = np.zeros((len(sets), 2), dtype=np.int64)
    for b, unique in enumerate(sets):
        missed = unique[last[unique] < 0]
        resident += len(missed)
        evicted = 0
        if resident > capacity:  # the least recent rows this batch does not use
            others = np.flatnonzero(last >= 0)
            others = others[~np.isin(others, unique, assume_unique=True)]
            evicted = resident - capacity
            victims = others[np.argpartition(last[others], evicted - 1)[:evicted]]
            last[victims] = -1
            resident = capacity
        last[unique] = b
        moved[b] = len(missed), evicted
    return moved
