"""Solutions to notebook 09's exercises, as a learner might write them (see 01's file).

`plan_batch` is a whole ScratchPipe planner: the trainer runs it for every table of every batch
(`make_trainer("scratchpipe", config, own_planner=plan_batch)`).
"""
import numpy as np
from scratchkit.scratchpipe.own_planner import Plan


def working_set(ids, slot_ids):
    unique = np.unique(ids)
    slot_of = np.full(max(int(unique.max(initial=0)), int(slot_ids.max(initial=0))) + 1, -1)
    resident = np.flatnonzero(slot_ids >= 0)
    slot_of[slot_ids[resident]] = resident
    return unique, slot_of[unique]


def misses_and_free(unique, found, slot_ids):
    return unique[found < 0], np.flatnonzero(slot_ids < 0)


def unheld_victims(slot_ids, held, keep, count):
    candidates = np.setdiff1d(np.flatnonzero((slot_ids >= 0) & ~held), keep)
    if len(candidates) < count:
        raise ValueError(f"only {len(candidates)} slots can be evicted, {count} needed")
    return candidates[:count]


def furthest_victims(slot_ids, held, keep, window, count):
    candidates = np.setdiff1d(np.flatnonzero((slot_ids >= 0) & ~held), keep)
    if len(candidates) < count:
        raise ValueError(f"only {len(candidates)} slots can be evicted, {count} needed")
    next_use = np.full(len(candidates), len(window) + 1)      # never used again: past the window
    for k in range(len(window), 0, -1):                       # the nearest batch last, so it wins
        next_use[np.isin(slot_ids[candidates], window[k - 1])] = k
    furthest_first = np.lexsort((candidates, -next_use))      # by next use, furthest first; then slot
    return np.sort(candidates[furthest_first[:count]])


def plan_batch(b, ids, slot_ids, held, window):
    unique, found = working_set(ids, slot_ids)
    misses, free = misses_and_free(unique, found, slot_ids)
    shortfall = max(0, len(misses) - len(free))
    victims = furthest_victims(slot_ids, held, found[found >= 0], window, shortfall)
    slots = found.copy()
    slots[found < 0] = np.concatenate([free[:len(misses) - len(victims)], victims])
    return Plan(batch=b, slots=slots[np.searchsorted(unique, ids)], misses=misses, victims=victims)
