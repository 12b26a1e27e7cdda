"""Miss-ratio curves: hits of a cache at every capacity, without one simulation per capacity.

- `lru_mrc(trace)`: LRU at every capacity 1 .. unique ids, from one histogram of stack
  distances (`profile.py`; `stackdist.py` is its vectorised twin): hits(C) = accesses whose
  distance is below C.
- `opt_mrc(trace, capacities)`: Belady's OPT at the given capacities. OPT is a stack algorithm
  too, but its stack is costly to maintain (Mattson's update carries rows down the stack: work
  proportional to the depth); instead each capacity runs a tight loop over next-use positions
  (`belady.cpp`, twin `_opt_hits`): an access is a hit iff its position is the pending next use of
  a resident row, so rows never need names, only positions. Capacities run on all cores at once.
  Why a few capacities suffice: the curve is smooth in log capacity, so 8-16 points draw it to a
  line's width (`benchmarks/bench_sim.py --opt-grid` measures how far OPT at many log-spaced
  capacities strays from a line through fewer of them).
Both must equal the per-capacity simulators (`lru.py`, `opt.py`) exactly; tests check it.
"""

from __future__ import annotations

import heapq
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from scratchkit.sim import native
from scratchkit.sim.checks import as_capacity, as_trace
from scratchkit.sim.curve import Curve
from scratchkit.sim.profile import profile_lru
from scratchkit.sim.reuse import next_use

__all__ = ["Curve", "lru_mrc", "opt_mrc"]


def lru_mrc(trace) -> Curve:
    """LRU hits at every capacity 1 .. (unique ids); larger capacities hit as much as the last.

    The C loop of `lru_engine.cpp` where it builds, else the vectorised `stackdist.py`; both exact.
    """
    return profile_lru(as_trace(trace))


def opt_mrc(trace, capacities) -> Curve:
    """OPT hits at each of `capacities` (kept in the given order)."""
    trace = as_trace(trace)
    capacities = [as_capacity(c) for c in np.atleast_1d(np.asarray(capacities)).tolist()]
    n = trace.size
    nxt = next_use(trace)
    unique = n - int(np.count_nonzero(nxt < n))
    # Never-again rows get distinct keys past the end, so every key names one access.
    keys = np.where(nxt < n, nxt, n + np.arange(n))
    todo = sorted({c for c in capacities if c < unique}, reverse=True)  # the slowest first
    if native.available():
        # The C loop runs without the GIL: one thread per core, one capacity each.
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            done = dict(zip(todo, pool.map(lambda c: native.belady_hits(keys, c), todo)))
    else:
        listed = keys.tolist()
        done = {c: _opt_hits(listed, c) for c in todo}
    hits = [done.get(c, n - unique) for c in capacities]
    return Curve("opt", n, unique, np.array(capacities, dtype=np.int64), np.array(hits, dtype=np.int64))


def _opt_hits(keys: list[int], capacity: int) -> int:
    """Belady on positions: `keys[t]` = the next use of access t's row (unique per access)."""
    pending = bytearray(2 * len(keys))  # pending[k]: a resident row is next used at k
    heap: list[int] = []  # -key; entries of hit rows go stale
    push, pop = heapq.heappush, heapq.heappop
    resident = hits = 0
    for t, key in enumerate(keys):
        if pending[t]:  # this access was some row's next use
            hits += 1
            pending[t] = 0
        elif resident == capacity:
            while True:  # furthest pending next use; skip stale
                victim = -pop(heap)
                if pending[victim]:
                    pending[victim] = 0
                    break
        else:
            resident += 1
        pending[key] = 1
        push(heap, -key)
    return hits
