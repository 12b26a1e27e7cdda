"""Notebook 09's exercises: ScratchPipe's planner, step by step, then whole.

working_set(ids, slot_ids)                   U_b and where each id is now: the kit's working
                                             sets and slot map (slot_map.SlotMap.query)
misses_and_free(unique, found, slot_ids)     the ids to collect and the free slots
unheld_victims(slot_ids, held, keep, count)  victims that respect the holds, lowest slot first
furthest_victims(slot_ids, held, keep, window, count)
                                             the same, furthest next use first: the planner's
                                             order (pipeline.planner_victims, next uses
                                             counted by lookahead.NextUses)
plan_batch(b, ids, slot_ids, held, window)   the whole Plan(b) of one table: held to every
                                             rule by own_planner.check_plan, the check the
                                             trainer runs on each plan
"""

from __future__ import annotations

import numpy as np

from scratchkit.scratchpipe.invariants import Invariant
from scratchkit.course.exercises.checking import Case, Exercise, register, same_array, short
from scratchkit.course.exercises.pipeline import planner_victims
from scratchkit.scratchpipe.lookahead import NextUses
from scratchkit.scratchpipe.own_planner import Holders, Plan, PlanMistake, check_plan
from scratchkit.scratchpipe.slot_map import SlotMap


def slot_map_of(slot_ids, held, rows: int) -> SlotMap:
    """The kit's map of `rows` ids holding `slot_ids` [capacity] (-1 free), `held` slots held."""
    slot_ids = np.asarray(slot_ids, dtype=np.int64)
    slot_map = SlotMap(rows, len(slot_ids))
    resident = np.flatnonzero(slot_ids >= 0)
    slot_map.insert(slot_ids[resident], resident)
    slot_map.hold(np.flatnonzero(np.asarray(held, dtype=bool)))
    return slot_map


def _rows(*arrays) -> int:
    """Enough ids for every id in `arrays`."""
    return 1 + max((int(np.max(a, initial=-1)) for a in arrays), default=0)


def kit_working_set(ids, slot_ids):
    unique = np.unique(np.asarray(ids, dtype=np.int64))
    slot_map = slot_map_of(slot_ids, np.zeros(len(slot_ids), bool), _rows(ids, slot_ids))
    return unique, slot_map.query(unique)


def kit_misses_and_free(unique, found, slot_ids):
    free = slot_map_of(slot_ids, np.zeros(len(slot_ids), bool), _rows(unique, slot_ids)).free_slots()
    return np.asarray(unique)[np.asarray(found) < 0], free


def _never_again(slot_ids, held, keep, count):
    """The planner's order when no id comes back: only holds and this batch's own slots matter."""
    return kit_furthest_victims(slot_ids, held, keep, [], count)


def kit_furthest_victims(slot_ids, held, keep, window, count):
    """planner_victims with the next uses NextUses counts in the window and `keep` held too."""
    slot_ids = np.asarray(slot_ids, dtype=np.int64)
    protected = np.asarray(held, dtype=bool).copy()
    protected[np.asarray(keep, dtype=np.int64)] = True
    (urgency,) = NextUses([_rows(slot_ids, *window)])([np.unique(w) for w in window])
    seen = len(window)
    next_use = {int(i): seen + 1 - int(urgency[i]) for i in slot_ids[slot_ids >= 0] if urgency[i] > 0}
    return planner_victims(slot_ids, protected, next_use, count)


def stand_in_plan_batch(b, ids, slot_ids, held, window) -> Plan:
    """plan_batch made of the references above: what notebook 09 trains with until yours passes."""
    unique, found = kit_working_set(ids, slot_ids)
    misses, free = kit_misses_and_free(unique, found, slot_ids)
    shortfall = max(0, len(misses) - len(free))
    victims = (
        kit_furthest_victims(slot_ids, held, found[found >= 0], window, shortfall)
        if shortfall
        else np.empty(0, dtype=np.int64)
    )
    slots = found.copy()  # [u] hits keep their slots
    slots[found < 0] = np.concatenate([free[: len(misses) - len(victims)], victims])
    return Plan(b, slots[np.searchsorted(unique, ids)], misses, victims)


class PlanCase:
    """What plan_batch must return for one input: any plan that keeps every rule (check_plan)."""

    def __init__(self, b, ids, slot_ids, held, window):
        self.b, self.ids = b, np.asarray(ids, dtype=np.int64)
        self.slot_map = slot_map_of(slot_ids, held, _rows(ids, slot_ids, *window))
        self.holders = Holders({b - 1: np.flatnonzero(np.asarray(held, dtype=bool))})

    def __repr__(self) -> str:
        return f"a Plan(batch={self.b}, ...) that keeps every rule"

    def mistake(self, got) -> str | None:
        try:
            check_plan(got, self.b, 0, self.ids, self.slot_map, self.holders)
        except PlanMistake as error:
            return str(error)
        return None


def _both(first: str, second: str):
    """Compare a pair of arrays, naming the one that differs."""

    def compare(got, expected):
        if not isinstance(got, tuple) or len(got) != 2:
            return f"returned {short(got)}, expected a pair ({first}, {second})"
        for name, g, e in ((first, got[0], expected[0]), (second, got[1], expected[1])):
            problem = same_array(np.sort(np.asarray(g)) if name == "free" else g, e)
            if problem:
                return f"{name}: {problem}"
        return None

    return compare


ints = lambda *v: np.array(v, dtype=np.int64)  # a case's small arrays
none = lambda n: np.zeros(n, dtype=bool)


def _working_set_cases() -> list[Case]:
    rng = np.random.default_rng(9)
    slot_ids = rng.permutation(300)[:64].astype(np.int64)
    slot_ids[rng.choice(64, 10, replace=False)] = -1
    return [
        Case(
            (ints(4, 2, 4, 9), ints(-1, -1, -1)),
            "an empty scratchpad",
            "unique: the distinct ids, ascending (np.unique); found: -1 for each, nothing is resident",
        ),
        Case(
            (ints(7, 3, 7, 7), ints(3, -1, 7)),
            "repeats, every id resident",
            "an id looked up three times is one id of the working set, with one slot",
        ),
        Case(
            (ints(5, 1, 8), ints(-1, 8, 1, -1)),
            "some hits, some misses",
            "found[i] is the slot s with slot_ids[s] == unique[i], else -1",
        ),
        Case((rng.integers(0, 300, 200), slot_ids), "200 lookups against 64 slots"),
    ]


def _misses_cases() -> list[Case]:
    return [
        Case(
            (ints(2, 4, 9), ints(-1, 0, -1), ints(4, -1, -1, 7)),
            "two misses, two free slots",
            "misses: the ids whose found is -1; free: the slots whose slot_ids is -1, ascending",
        ),
        Case(
            (ints(3, 7), ints(0, 2), ints(3, 5, 7)),
            "every id a hit, no free slot",
            "no misses and no free slots: two empty arrays",
        ),
        Case(
            (ints(1, 6), ints(-1, -1), ints(-1, 9, -1, 8, -1)),
            "free slots between resident ones",
            "a free slot may sit anywhere: test every slot for -1",
        ),
    ]


def _unheld_cases() -> list[Case]:
    return [
        Case(
            (ints(5, 6, 7, 8), none(4), ints(), 2),
            "nothing held, nothing kept",
            "candidates: slots holding a row (slot_ids >= 0); take the lowest `count`",
        ),
        Case(
            (ints(5, 6, 7, 8), np.array([True, False, True, False]), ints(), 2),
            "held slots",
            f"a held slot belongs to a batch in flight ({Invariant.HOLDS.cited}): never a victim",
        ),
        Case(
            (ints(5, 6, 7, 8), none(4), ints(0, 1), 2),
            "this batch's own hits",
            "`keep` are the slots of this batch's hits: it looks them up, so they stay",
        ),
        Case(
            (ints(-1, 6, -1, 8), none(4), ints(), 1),
            "free slots are not victims",
            "a free slot (id -1) holds no row: misses take free slots without evicting",
        ),
        Case(
            (ints(3, 4, -1), np.array([False, True, False]), ints(0), 1),
            "not enough candidates",
            "when fewer than `count` slots can be evicted, raise ValueError",
        ),
    ]


def _furthest_cases() -> list[Case]:
    rng = np.random.default_rng(5)
    slot_ids = rng.permutation(120)[:40].astype(np.int64)
    slot_ids[rng.choice(40, 4, replace=False)] = -1
    busy = rng.random(40) < 0.3
    window = [rng.integers(0, 120, 30) for _ in range(4)]
    return [
        Case(
            (ints(5, 6, 7, 8), none(4), ints(), [ints(5), ints(7, 6)], 2),
            "id 8 never comes back",
            "an id no batch of the window uses is the best victim; then the furthest next use",
        ),
        Case(
            (ints(5, 6, 7, 8), none(4), ints(), [ints(5, 8), ints(6, 5)], 2),
            "the first use counts",
            "an id's next use is the first batch of the window that has it (id 5: batch b+1)",
        ),
        Case(
            (ints(5, 6, 7, 8), np.array([False, False, True, False]), ints(3), [ints(5, 6)], 1),
            "the furthest ones are held or kept",
            "held and kept slots are never victims, however far",
        ),
        Case((ints(3, 4, 5, 6), none(4), ints(), [ints(9)], 2), "a tie", "equally far: the lowest slots first"),
        Case((slot_ids, busy, ints(0, 1, 2), window, 10), "40 slots, some free, some held, 4 batches ahead"),
    ]


def _plan_cases() -> list[Case]:
    rng = np.random.default_rng(11)
    slot_ids = rng.permutation(90)[:48].astype(np.int64)
    slot_ids[rng.choice(48, 6, replace=False)] = -1
    busy = np.zeros(48, dtype=bool)
    busy[rng.choice(np.flatnonzero(~np.isin(slot_ids, np.arange(30))), 8, replace=False)] = True
    return [
        Case(
            (0, ints(4, 2, 4), ints(-1, -1, -1, -1), none(4), []),
            "batch 0, an empty scratchpad",
            "every id is a miss and takes a free slot; no victims; slots: one per lookup",
        ),
        Case(
            (3, ints(8, 5, 8), ints(5, -1, 9, 7), none(4), [ints(7)]),
            "a hit and a miss, a free slot",
            "a hit keeps its slot; the miss takes the free slot; return Plan(batch=b, ...)",
        ),
        Case(
            (5, ints(1, 2, 3), ints(5, 6, 7, 8), np.array([True, False, False, False]), [ints(6)]),
            "a full scratchpad, one slot held",
            "misses beyond the free slots need victims: unheld, "
            "furthest next use first; each victim's slot goes to a miss",
        ),
        Case(
            (7, rng.integers(0, 30, 60), slot_ids, busy, [rng.integers(0, 90, 20) for _ in range(3)]),
            "60 lookups, 48 slots, 8 of them held",
        ),
    ]


register(
    Exercise(
        "working_set",
        "working_set(ids, slot_ids)",
        _working_set_cases,
        kit_working_set,
        "unique = np.unique(ids); a dict {id: slot} of the resident slots gives each its slot",
        compare=_both("unique", "found"),
    ),
    Exercise(
        "misses_and_free",
        "misses_and_free(unique, found, slot_ids)",
        _misses_cases,
        kit_misses_and_free,
        "misses = unique[found < 0]; free = the slots s with slot_ids[s] == -1",
        compare=_both("misses", "free"),
    ),
    Exercise(
        "unheld_victims",
        "unheld_victims(slot_ids, held, keep, count)",
        _unheld_cases,
        _never_again,
        "candidates: slot_ids >= 0, not held, not in keep; the lowest `count`, ascending",
        compare=lambda got, expected: same_array(np.sort(np.asarray(got)), expected),
    ),
    Exercise(
        "furthest_victims",
        "furthest_victims(slot_ids, held, keep, window, count)",
        _furthest_cases,
        kit_furthest_victims,
        "next use of an id: the first k (1-based) with the id in window[k-1], "
        "never = furthest; sort the candidates by (furthest first, slot) and take `count`",
        compare=lambda got, expected: same_array(np.sort(np.asarray(got)), expected),
    ),
    Exercise(
        "plan_batch",
        "plan_batch(b, ids, slot_ids, held, window)",
        _plan_cases,
        PlanCase,
        "working_set, misses_and_free, then furthest_victims for the misses beyond the free "
        "slots (keep = the hits' slots); misses take free slots first, then the victims",
        compare=lambda got, expected: expected.mistake(got),
    ),
)
