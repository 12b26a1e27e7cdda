"""Solutions to notebook 03's exercises, as a learner might write them (see 01's file)."""


def window_working_set(sets, b, depth):
    return len(set().union(*(set(s.tolist()) for s in sets[b:b + depth + 1])))


def min_scratchpad(sets, depth):
    if len(sets) <= depth:
        return window_working_set(sets, 0, len(sets) - 1)
    return max(window_working_set(sets, b, depth) for b in range(len(sets) - depth))
