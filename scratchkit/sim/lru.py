"""LRU: on a miss with the cache full, evict the least recently used row.

A demand cache: a miss fetches the row (fetched_rows = misses) and evicts one victim once the
cache is full; every victim was looked up, so training dirtied it and it is written back. The
rows resident at the end are counted as `flushed_rows`.

This simulator walks the trace one access at a time (an OrderedDict is the LRU stack: the
front is the least recently used). It is the slow, obvious twin of `lru_mrc` in `mrc.py`, which
gets the hits of *every* capacity in one vectorised pass; tests check that they agree.
"""

from __future__ import annotations

from collections import OrderedDict

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
