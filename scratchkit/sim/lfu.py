"""LFU: on a miss with the cache full, evict the row used least often.

Counting rules (chosen, not universal; other LFUs differ):
- a row's count is its lookups *since it was last inserted*: eviction forgets it, so a row that
  returns starts again at 1 (the in-cache LFU of textbooks and of libCacheSim's `LFU`);
- ties between rows of the lowest count go to the least recently used of them.

Like LRU it fills on demand, writes every victim back (it was looked up, hence dirty) and leaves
its resident rows to the final flush.

O(1) per access: rows are kept in buckets by count; each bucket is an OrderedDict in the order
rows entered it, which is the order of their last use (a row enters bucket `c` when used for the
c-th time), so the front of the lowest bucket is the victim.
"""

from __future__ import annotations

from collections import OrderedDict

from scratchkit.sim.checks import as_capacity, as_trace
from scratchkit.sim.lru import demand_result
from scratchkit.sim.record import SimResult


def simulate_lfu(trace, capacity: int) -> SimResult:
    trace = as_trace(trace)
    capacity = as_capacity(capacity)
    count: dict[int, int] = {}  # resident row -> lookups since insert
    buckets: dict[int, OrderedDict] = {}  # count -> rows, least recent first
    lowest = 0  # smallest count with a non-empty bucket
    hits = 0
    for row in trace.tolist():
        c = count.get(row)
        if c is not None:
            hits += 1
            bucket = buckets[c]
            del bucket[row]
            if not bucket:
                del buckets[c]
                if lowest == c:
                    lowest = c + 1
            count[row] = c + 1
            buckets.setdefault(c + 1, OrderedDict())[row] = None
            continue
        if len(count) == capacity:
            bucket = buckets[lowest]
            victim, _ = bucket.popitem(last=False)
            if not bucket:
                del buckets[lowest]
            del count[victim]
        count[row] = 1
        buckets.setdefault(1, OrderedDict())[row] = None
        lowest = 1
    return demand_result("lfu", capacity, len(trace), hits, resident=len(count))
