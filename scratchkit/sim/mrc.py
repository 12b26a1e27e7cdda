"""Miss-ratio curves: hits of a cache at every capacity, without one simulation per capacity.

- `lru_mrc(trace)`: LRU at every capacity 1 .. unique ids, from one histogram of stack
  distances (`stackdist.py`): hits(C) = accesses whose distance is below C.
- `opt_mrc(trace, capacities)`: Belady's OPT at the given capacities. OPT is a stack algorithm
  too, but its stack is costly to maintain; instead each capacity runs a tight loop over
  next-use positions: an access is a hit iff its position is the pending next use of a resident
  row, so rows never need names, only positions.
Both must equal the per-capacity simulators (`lru.py`, `opt.py`) exactly; tests check it.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from scratchkit.sim.checks import as_capacity, as_trace
from scratchkit.sim.reuse import next_use
from scratchkit.sim.stackdist import stack_distance_histogram


@dataclass(frozen=True)
class Curve:
    """Hits of one policy at several capacities, on one trace."""

    policy: str
    lookups: int
    unique_ids: int              # from this capacity on, every reuse hits
    capacities: np.ndarray       # int64 [k]
    hits: np.ndarray             # int64 [k], hits at capacities[i]

    def hits_at(self, capacity: int) -> int:
        """Hits at `capacity`: one on the curve, or any >= unique ids (all reuses hit there)."""
        capacity = as_capacity(capacity)
        if capacity >= self.unique_ids:
            return self.lookups - self.unique_ids
        where = np.flatnonzero(self.capacities == capacity)
        if where.size == 0:
            raise ValueError(f"capacity {capacity} is not on this {self.policy} curve")
        return int(self.hits[where[0]])

    @property
    def hit_rate(self) -> np.ndarray:
        return self.hits / self.lookups if self.lookups else np.zeros(self.hits.shape)

    @property
    def miss_ratio(self) -> np.ndarray:
        return 1.0 - self.hit_rate if self.lookups else np.zeros(self.hits.shape)

    def to_rows(self) -> list[dict]:
        """[{capacity, hits, hit_rate}, ...] for JSON."""
        rate = self.hit_rate
        return [{"capacity": int(c), "hits": int(h), "hit_rate": float(r)}
                for c, h, r in zip(self.capacities, self.hits, rate)]


def lru_mrc(trace) -> Curve:
    """LRU hits at every capacity 1 .. (unique ids); larger capacities hit as much as the last."""
    trace = as_trace(trace)
    hist = stack_distance_histogram(trace)              # [unique ids]
    capacities = np.arange(1, hist.size + 1, dtype=np.int64)
    return Curve("lru", int(trace.size), int(hist.size), capacities,
                 np.cumsum(hist, dtype=np.int64))


def opt_mrc(trace, capacities) -> Curve:
    """OPT hits at each of `capacities` (kept in the given order)."""
    trace = as_trace(trace)
    capacities = [as_capacity(c) for c in np.atleast_1d(np.asarray(capacities)).tolist()]
    n = trace.size
    nxt = next_use(trace)
    unique = n - int(np.count_nonzero(nxt < n))
    # Never-again rows get distinct keys past the end, so every key names one access.
    keys = np.where(nxt < n, nxt, n + np.arange(n)).tolist()
    hits = [n - unique if c >= unique else _opt_hits(keys, c) for c in capacities]
    return Curve("opt", n, unique, np.array(capacities, dtype=np.int64),
                 np.array(hits, dtype=np.int64))


def _opt_hits(keys: list[int], capacity: int) -> int:
    """Belady on positions: `keys[t]` = the next use of access t's row (unique per access)."""
    pending = bytearray(2 * len(keys))                   # pending[k]: a resident row is next used at k
    heap: list[int] = []                                 # -key; entries of hit rows go stale
    push, pop = heapq.heappush, heapq.heappop
    resident = hits = 0
    for t, key in enumerate(keys):
        if pending[t]:                                   # this access was some row's next use
            hits += 1
            pending[t] = 0
        elif resident == capacity:
            while True:                                  # furthest pending next use; skip stale
                victim = -pop(heap)
                if pending[victim]:
                    pending[victim] = 0
                    break
        else:
            resident += 1
        pending[key] = 1
        push(heap, -key)
    return hits
