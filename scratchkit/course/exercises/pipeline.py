"""Notebook 04's exercises: a victim choice that respects holds, and when Insert may start.

choose_victims(slot_ids, held, next_use, count)   checked against the planner's own order
                                                  (scratchkit.scratchpipe.plan.least_urgent)
insert_can_start(b, trained_through, depth)       checked against the schedule's rule 3
                                                  (scratchkit.scratchpipe.schedule)
"""

from __future__ import annotations

import numpy as np

from scratchkit.scratchpipe.invariants import Invariant
from scratchkit.course.exercises.checking import Case, Exercise, register, same_array
from scratchkit.scratchpipe.plan import least_urgent
from scratchkit.scratchpipe.schedule import Schedule

NEVER = np.iinfo(np.int64).max  # the next use of an id that never comes back


def planner_victims(slot_ids, held, next_use: dict, count: int) -> np.ndarray:
    """The planner's choice: among resident, unheld slots, furthest next use first, then the
    lowest slot (every row trained at the same time here), as ascending slots."""
    slot_ids, held = np.asarray(slot_ids, dtype=np.int64), np.asarray(held, dtype=bool)
    candidates = np.flatnonzero((slot_ids >= 0) & ~held)
    if candidates.size < count:
        raise ValueError(f"need {count} victims but only {candidates.size} slots are resident and unheld")
    nxt = np.array([next_use.get(int(i), NEVER) for i in slot_ids[candidates]], dtype=np.int64)
    # urgency: 0 for the furthest next use, 1 for the next furthest, ... (least_urgent's levels)
    urgency = np.unique(-nxt, return_inverse=True)[1].astype(np.int64).reshape(-1)
    chosen = least_urgent(count, candidates, np.zeros(candidates.size, dtype=np.int64), urgency)
    return np.sort(candidates[chosen])


def _victim_cases() -> list[Case]:
    ids = lambda *v: np.array(v, dtype=np.int64)
    none = lambda n: np.zeros(n, dtype=bool)
    held = np.array([False, True, False, False])
    rng = np.random.default_rng(4)
    slot_ids = rng.permutation(200)[:40].astype(np.int64)
    slot_ids[rng.choice(40, 5, replace=False)] = -1
    busy = rng.random(40) < 0.3
    upcoming = {int(i): int(rng.integers(1, 30)) for i in slot_ids if i >= 0 and rng.random() < 0.8}
    return [
        Case(
            (ids(5, 6, 7, 8), none(4), {5: 3, 6: 9, 7: 4}, 2),
            "nothing held",
            "an id that is never used again (not in next_use) is the best victim of all; then the furthest next use",
        ),
        Case(
            (ids(5, 6, 7, 8), held, {5: 3, 6: 9, 7: 4, 8: 5}, 2),
            "the furthest slot is held",
            f"a held slot belongs to a batch in flight ({Invariant.HOLDS.cited}): never a victim, "
            "however far its next use",
        ),
        Case(
            (ids(-1, 6, -1, 8), none(4), {6: 2}, 1),
            "free slots are not victims",
            "a free slot (id -1) holds no row: a miss takes it without evicting anything",
        ),
        Case(
            (ids(3, 4, 5, 6), none(4), {3: 7, 4: 7, 5: 7, 6: 7}, 2),
            "a tie",
            "between equally far next uses, take the lowest slots first",
        ),
        Case(
            (ids(3, 4, -1), np.array([False, True, False]), {}, 2),
            "not enough candidates",
            "when fewer than `count` slots are resident and unheld, raise ValueError",
        ),
        Case((slot_ids, busy, upcoming, 12), "40 slots, some free, some held"),
    ]


def schedule_allows(b: int, trained_through: int, depth: int) -> bool:
    """Rule 3: Insert(b) waits for Train(b - depth - 1)."""
    return Schedule(depth).evict_waits_for(b) <= trained_through


def _insert_cases() -> list[Case]:
    return [
        Case(
            (3, -1, 2),
            "batch 3 at depth 2, nothing trained yet",
            "Insert(b) reuses slots that batch b - depth - 1 trained with: it waits for Train(b - depth - 1)",
        ),
        Case(
            (3, 0, 2),
            "batch 3 at depth 2, Train(0) done",
            "Train(0) is exactly the batch Insert(3) waits for at depth 2: 3 - 2 - 1 = 0",
        ),
        Case(
            (1, -1, 2),
            "an early batch",
            "the first depth + 1 batches wait for no Train at all (b - depth - 1 < 0): trained_through = -1 is enough",
        ),
        Case((10, 8, 0), "depth 0", "at depth 0 Insert(b) waits for Train(b - 1)"),
        Case((10, 9, 0), "depth 0, the batch before trained"),
        Case((20, 15, 4), "depth 4, exactly the batch it needs", "'waits for Train(k)' means trained_through >= k"),
    ]


register(
    Exercise(
        "choose_victims",
        "choose_victims(slot_ids, held, next_use, count)",
        _victim_cases,
        planner_victims,
        "candidates: slot_ids >= 0 and not held; sort them by next use "
        "(furthest first, never = furthest of all), then by slot; take `count`",
        compare=lambda got, expected: same_array(np.sort(np.asarray(got)), expected),
    ),
    Exercise(
        "insert_can_start",
        "insert_can_start(b, trained_through, depth)",
        _insert_cases,
        schedule_allows,
        "return trained_through >= b - depth - 1",
    ),
)
