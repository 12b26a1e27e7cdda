"""Notebook 03's exercises: the working set of a look-ahead window, the smallest scratchpad.

window_working_set(sets, b, depth)    |U_b u ... u U_b+depth|, checked against
                                      scratchkit.sim.window (the kit's one count of it)
min_scratchpad(sets, depth)           the largest window: checked against the minimum
                                      capacity the ScratchPipe trainer enforces
"""

from __future__ import annotations

import numpy as np

from scratchkit.course.analysis import working_sets
from scratchkit.course.exercises.checking import Case, Exercise, register
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.profiles import get_profile
from scratchkit.sim.window import minimum_capacity, window_sizes


def kit_window(sets, b: int, depth: int) -> int:
    """The window of batches b..b+depth: the kit counts trailing windows, so it is entry b+depth."""
    if b < 0 or b + depth >= len(sets):
        raise ValueError(f"batches {b}..{b + depth} are not all among the {len(sets)} given")
    return int(window_sizes(sets, depth)[b + depth])


def _sets(*batches) -> list[np.ndarray]:
    return [np.array(sorted(s), dtype=np.int64) for s in batches]


def _small_sets() -> list[np.ndarray]:
    return working_sets(SyntheticSource(get_profile("small").data), table=0, num_batches=12)


def _window_cases() -> list[Case]:
    three = _sets({1, 2, 3}, {3, 4}, {1, 5}, {6})
    real = _small_sets()
    return [
        Case((three, 0, 0), "depth 0: one batch alone", "at depth 0 the window is batch b by itself: |U_b|"),
        Case(
            (three, 0, 1),
            "two batches sharing id 3",
            "an id in two batches of the window is one row: count distinct ids (a set union), not the sum of the sizes",
        ),
        Case(
            (three, 1, 2),
            "a window that starts at b, not at 0",
            "the window of batch b is batches b, b+1, ..., b+depth",
        ),
        Case((_sets({1}, {2}, {3}), 0, 2), "disjoint batches", "with no shared id the window is the sum of the sizes"),
        Case((real, 5, 3), "batches 5..8 of the small profile's table 0", shown="working_sets(source, 0, 12), 5, 3"),
    ]


def _minimum_cases() -> list[Case]:
    real = _small_sets()
    return [
        Case(
            (_sets({1}, {2}, {3, 4, 5}, {6}), 1),
            "the largest window is not the first",
            "try every window b = 0 .. len(sets) - depth - 1 and keep the largest",
        ),
        Case((_sets({1, 2}, {1, 2, 3}, {4}), 0), "depth 0: the largest batch", "at depth 0 a window is one batch"),
        Case(
            (_sets({1, 2}, {2, 3}), 4),
            "fewer batches than a window",
            "with fewer than depth + 1 batches, the one window is all the batches there are",
        ),
        Case((_sets({7}, {7}, {7}), 2), "one id in every batch", "one row serves every batch of the window"),
        Case((real, 2), "12 batches of the small profile's table 0, depth 2", shown="working_sets(source, 0, 12), 2"),
    ]


register(
    Exercise(
        "window_working_set",
        "window_working_set(sets, b, depth)",
        _window_cases,
        kit_window,
        "len(set().union(*sets[b:b + depth + 1])), with each set's ids as Python ints",
    ),
    Exercise(
        "min_scratchpad",
        "min_scratchpad(sets, depth)",
        _minimum_cases,
        minimum_capacity,
        "the scratchpad must hold every window at once: the largest window is the minimum",
    ),
)
