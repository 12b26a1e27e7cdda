"""OPT (Belady's MIN): on a miss with the cache full, evict the row whose next use is furthest.

It needs the future, so it is a bound, not a policy a backward-looking cache can run: no demand
cache of the same capacity gets more hits. Rules, the same as libCacheSim's `Belady`:
- the missing row is always inserted (demand paging; no bypass), the victim is chosen among the
  rows resident before it;
- rows never used again have the furthest next use of all; which of them goes first does not
  change any hit.
Fetched, written-back and flushed rows are counted as for LRU.

Resident rows sit in a max-heap keyed by next use. A hit changes the row's next use; rather than
find the old entry, a new one is pushed and the old one is skipped when it surfaces (its key no
longer matches the row's current next use).
"""

from __future__ import annotations

import heapq

from scratchkit.sim.checks import as_capacity, as_trace
from scratchkit.sim.lru import demand_result
from scratchkit.sim.record import SimResult
from scratchkit.sim.reuse import next_use


def simulate_opt(trace, capacity: int) -> SimResult:
    trace = as_trace(trace)
    capacity = as_capacity(capacity)
    upcoming = next_use(trace).tolist()  # position of each access's next use
    resident: dict[int, int] = {}  # row -> its next use
    heap: list[tuple[int, int]] = []  # (-next use, row); stale entries skipped
    hits = 0
    for row, later in zip(trace.tolist(), upcoming):
        if row in resident:
            hits += 1
        elif len(resident) == capacity:
            while True:
                key, victim = heapq.heappop(heap)
                if resident.get(victim) == -key:  # a current entry, not a stale one
                    del resident[victim]
                    break
        resident[row] = later
        heapq.heappush(heap, (-later, row))
    return demand_result("opt", capacity, len(trace), hits, resident=len(resident))
