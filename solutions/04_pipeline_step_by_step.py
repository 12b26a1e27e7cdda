"""Solutions to notebook 04's exercises, as a learner might write them (see 01's file)."""
import math


def choose_victims(slot_ids, held, next_use, count):
    candidates = [s for s in range(len(slot_ids)) if slot_ids[s] >= 0 and not held[s]]
    if len(candidates) < count:
        raise ValueError(f"only {len(candidates)} slots can be evicted, {count} needed")
    furthest_first = sorted(candidates, key=lambda s: (-next_use.get(int(slot_ids[s]), math.inf), s))
    return sorted(furthest_first[:count])


def insert_can_start(b, trained_through, depth):
    return trained_through >= b - depth - 1
