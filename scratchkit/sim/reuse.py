"""Reuse: where each access's id is used next.

`next_use(trace)[t]` is the position of the next access to the same id as access `t`, or
`len(trace)` if the id is never used again. Belady's OPT evicts by it, LRU stack distances are
counted from it (see `stackdist.py`), and the look-forward planner picks victims with it.

It is found by grouping equal ids together while keeping positions in order (a *stable* sort by
id): inside a group, each position's successor is its next use. NumPy sorts 16-bit keys stably
with a radix sort in linear time, so ids are sorted one 16-bit digit at a time, lowest digit first
(an LSD radix sort): two passes cover every id below 2**32.
"""

from __future__ import annotations

import numpy as np

from scratchkit.sim.checks import as_trace


def group_by_id(trace: np.ndarray) -> np.ndarray:
    """Positions of `trace` ordered by id, ties in position order (a stable argsort). [n] intp"""
    return sort_by_id(trace)[0]


def sort_by_id(trace: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions ordered by id, ties in position order; the ids in that order). [n], [n]"""
    trace = as_trace(trace)
    order, keys = None, trace
    top = int(trace.max()).bit_length() if trace.size else 0
    for shift in range(0, max(top, 1), 16):
        digit = (keys >> shift).astype(np.uint16)  # this pass's 16-bit digit
        step = np.argsort(digit, kind="stable")  # radix sort: linear, keeps ties in order
        order = step if order is None else order[step]
        keys = keys[step]
    return order, keys


def next_use(trace: np.ndarray) -> np.ndarray:
    """For each access, the position of the next access to the same id; `len(trace)` if none. [n]"""
    trace = as_trace(trace)
    n = trace.size
    nxt = np.full(n, n, dtype=np.int64)
    if n < 2:
        return nxt
    order, grouped = sort_by_id(trace)  # positions grouped by id; their ids
    same_id = grouped[1:] == grouped[:-1]  # [n-1] successor has the same id
    nxt[order[:-1]] = np.where(same_id, order[1:], n)
    return nxt
