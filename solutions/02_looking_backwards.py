"""Solutions to notebook 02's exercises, as a learner might write them (see 01's file)."""
from collections import OrderedDict


def lru_hits(trace, capacity):
    cache, hits = OrderedDict(), 0
    for i in trace:
        if i in cache:
            hits += 1
            cache.move_to_end(i)
        else:
            cache[i] = True
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits


def smallest_capacity(hits, lookups, target):
    for capacity, h in enumerate(hits, start=1):
        if h / lookups >= target:
            return capacity
    return None


def embedding_speedup(hit_rate, hit_speedup):
    return 1 / ((1 - hit_rate) + hit_rate / hit_speedup)
