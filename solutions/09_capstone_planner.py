"""Solutions to notebook 09's exercises, as a learner might write them (see 01's file).

`plan_batch` is a whole ScratchPipe planner: the trainer runs it for every table of every batch
(`make_trainer("scratchpipe", config, planner=plan_batch)`).
"""
import math

import numpy as np
from scratchkit.scratchpipe.own_planner import Plan


def working_set(ids, slot_ids):
    unique = np.unique(ids)
    slot_of = {int(i): s for s, i in enumerate(slot_ids.tolist()) if i >= 0}
    found = np.array([slot_of.get(i, -1) for i in unique.tolist()], dtype=np.int64)
    return unique, found


def misses_and_free(unique, found, slot_ids):
    return unique[found < 0], np.flatnonzero(slot_ids < 0)


def unheld_victims(slot_ids, held, keep, count):
    keep = set(np.asarray(keep).tolist())
    candidates = [s for s in range(len(slot_ids)) if slot_ids[s] >= 0 and not held[s] and s not in keep]
    if len(candidates) < count:
        raise ValueError(f"only {len(candidates)} slots can be evicted, {count} needed")
    return np.array(candidates[:count], dtype=np.int64)


def furthest_victims(slot_ids, held, keep, window, count):
    next_use = {}
    for k in range(len(window), 0, -1):            # the nearest batch last, so it wins
        next_use.update(dict.fromkeys(np.unique(window[k - 1]).tolist(), k))
    keep = set(np.asarray(keep).tolist())
    candidates = [s for s in range(len(slot_ids)) if slot_ids[s] >= 0 and not held[s] and s not in keep]
    if len(candidates) < count:
        raise ValueError(f"only {len(candidates)} slots can be evicted, {count} needed")
    furthest_first = sorted(candidates, key=lambda s: (-next_use.get(int(slot_ids[s]), math.inf), s))
    return np.array(sorted(furthest_first[:count]), dtype=np.int64)


def plan_batch(b, ids, slot_ids, held, window):
    unique, found = working_set(ids, slot_ids)
    misses, free = misses_and_free(unique, found, slot_ids)
    shortfall = max(0, len(misses) - len(free))
    victims = furthest_victims(slot_ids, held, found[found >= 0], window, shortfall)
    slots = found.copy()
    slots[found < 0] = np.concatenate([free[:len(misses) - len(victims)], victims])
    return Plan(batch=b, slots=slots[np.searchsorted(unique, ids)], misses=misses, victims=victims)
