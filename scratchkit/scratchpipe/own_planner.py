"""A planner of your own: Plan(b) written in plain Python, run by the real ScratchPipe trainer.

The kit's planner (plan.py, plan_loop.cpp) decides, for each table and batch, where every id of the
batch lives, which ids to collect and which slots to evict. Those three decisions are all a
planner of your own makes; the kit keeps everything else as it does for its own planner: the
holds, the dirty bits, which write-back each Collect waits for (rule 2), and the schedule.

    def my_planner(b, ids, slot_ids, held, window) -> Plan:
        b         the batch to plan (batches come in order: 0, 1, 2, ...)
        ids       [n] the batch's ids in this table, one per lookup, repeats included
        slot_ids  [capacity] the slot map: the id each slot holds once the batches planned so far
                  are inserted, -1 where the slot is free (read only)
        held      [capacity] bool: the slots a batch in flight (b-D .. b-1) still needs (read only)
        window    [H] the ids of the batches after b, nearest first (b+1, b+2, ...), as far as Plan
                  has read: the look-ahead (read when some table must evict, as the kit's planner does)
        returns   Plan(batch=b, slots=[n] each lookup's slot, misses=[m] ids to collect,
                  victims=[v] slots whose ids leave to make room)

    trainer = make_trainer("scratchpipe", config, own_planner=my_planner)

Each plan is checked before any stage uses it (`check_plan`): a plan that breaks a rule stops the
run with a `PlanMistake` that names the rule, the batch and the table, at Plan(b), not as a wrong
loss later. The stages of the batches planned before it finish or stop as for any failing stage,
and the trainer flushes: the host tables hold every row trained so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from scratchkit.scratchpipe.invariants import Invariant
from scratchkit.embedding.working_sets import WorkingSets
from scratchkit.scratchpipe.events import PlanDecision
from scratchkit.scratchpipe.plan import TablePlan
from scratchkit.scratchpipe.slot_map import SlotMap


@dataclass
class Plan:
    """What a planner of your own returns for one table of batch `batch`."""

    batch: int
    slots: np.ndarray  # [n] the slot of each lookup, in the order of `ids`
    misses: np.ndarray  # [m] the ids of the batch in no slot before the plan: Collect reads them
    victims: np.ndarray  # [v] slots whose ids leave, each given to a miss (Write-back if dirty)


# (b, ids, slot_ids, held, window) -> Plan: the interface above
Planner = Callable[[int, np.ndarray, np.ndarray, np.ndarray, list], Plan]


class PlanMistake(ValueError):
    """A plan that breaks one of ScratchPipe's rules; the message names the rule and the batch."""

    def __init__(self, b: int, table: int, rule: str, what: str):
        super().__init__(f"Plan({b}), table {table}: {rule}: {what}")
        self.batch, self.table, self.rule = b, table, rule


# The rules a plan is held to, in the words every PlanMistake starts with.
INTERFACE = "the interface (a Plan with one slot per lookup of `ids`)"
IN_ORDER = "rule 1 (batches are planned in order, each once)"
ONE_SLOT_EACH = "one slot per id (a slot given to two ids, or an id given two slots)"
COLLECT_EVERY_MISS = "every miss is collected (an id in no slot must be read from the host table)"
ONLY_MISSES = "only misses are collected (a hit keeps its slot and its newer row)"
HOLDS = f"{Invariant.HOLDS.cited}: a slot that a batch in flight holds is never a victim"
VICTIMS = "a victim is a resident slot, given to a miss, holding no id of the batch itself"


@dataclass
class Holders:
    """Which batches in flight hold which slots, to name the batch a wrong victim belongs to."""

    planned: dict[int, np.ndarray]  # batch -> its working set's slots, until retired

    def of(self, slot: int) -> list[int]:
        return [k for k, slots in sorted(self.planned.items()) if slot in slots]


def check_plan(
    plan, b: int, table: int, ids: np.ndarray, slot_map: SlotMap, holders: Holders
) -> tuple[np.ndarray, np.ndarray]:
    """Raise PlanMistake unless `plan` is a correct Plan(b) of `ids` against `slot_map` (the map
    and its holds before the plan). -> (unique [u] ascending, the slot of each [u])."""
    fail = lambda rule, what: PlanMistake(b, table, rule, what)
    if not isinstance(plan, Plan):
        raise fail(INTERFACE, f"the planner returned {type(plan).__name__}, not a Plan")
    if plan.batch != b:
        raise fail(IN_ORDER, f"asked for batch {b}, the planner returned a plan for batch {plan.batch}")
    slots, misses, victims = (
        np.asarray(a, dtype=np.int64).reshape(-1) for a in (plan.slots, plan.misses, plan.victims)
    )
    if len(slots) != len(ids):
        raise fail(INTERFACE, f"{len(slots)} slots for the batch's {len(ids)} lookups")
    unique, given = _slot_of_each_id(fail, ids, slots, slot_map.capacity)
    _check_misses(fail, unique, given, misses, slot_map)
    _check_victims(fail, b, unique, given, misses, victims, slot_map, holders)
    return unique, given


def _slot_of_each_id(fail, ids, slots, capacity) -> tuple[np.ndarray, np.ndarray]:
    """(U_b [u], the one slot of each [u]): every lookup of an id in the same slot, no slot twice."""
    outside = slots[(slots < 0) | (slots >= capacity)]
    if len(outside):
        raise fail(ONE_SLOT_EACH, f"slot {int(outside[0])} is not one of the {capacity} slots")
    unique, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    given = slots[first]  # [u] the slot of each id's first lookup
    moved = np.flatnonzero(given[inverse.reshape(-1)] != slots)
    if len(moved):
        i = int(moved[0])
        raise fail(
            ONE_SLOT_EACH,
            f"id {int(ids[i])} is given slot {int(given[inverse.reshape(-1)[i]])} and slot {int(slots[i])}",
        )
    order = np.argsort(given, kind="stable")
    twice = np.flatnonzero(given[order][1:] == given[order][:-1])
    if len(twice):
        first_id, second_id = unique[order[twice[0]]], unique[order[twice[0] + 1]]
        raise fail(
            ONE_SLOT_EACH, f"slot {int(given[order[twice[0]]])} is given to id {int(first_id)} and id {int(second_id)}"
        )
    return unique, given


def _check_misses(fail, unique, given, misses, slot_map: SlotMap) -> None:
    """The misses are exactly the batch's ids in no slot; a hit keeps its slot."""
    now = slot_map.query(unique)  # [u] -1: a miss
    absent = unique[now < 0]
    left_out = np.setdiff1d(absent, misses)
    if len(left_out):
        raise fail(
            COLLECT_EVERY_MISS,
            f"id {int(left_out[0])} is in no slot, and not among the misses: its row would never reach the scratchpad",
        )
    extra = np.setdiff1d(misses, absent)
    if len(extra) or len(np.unique(misses)) != len(misses):
        i = int(extra[0]) if len(extra) else int(misses[0])
        where = (
            f"in slot {int(slot_map.slot_of[i])}"
            if 0 <= i < slot_map.num_rows and slot_map.slot_of[i] >= 0
            else "not in the batch, or listed twice"
        )
        raise fail(ONLY_MISSES, f"id {i} is listed as a miss but is {where}")
    hit = now >= 0
    moved = np.flatnonzero(given[hit] != now[hit])
    if len(moved):
        i = int(moved[0])
        raise fail(
            ONLY_MISSES,
            f"id {int(unique[hit][i])} is in slot {int(now[hit][i])}, the plan moves it to slot {int(given[hit][i])}",
        )


def _check_victims(fail, b, unique, given, misses, victims, slot_map: SlotMap, holders: Holders) -> None:
    """Each victim resident, unheld, none of the batch's own; each miss takes a free slot or a victim."""
    if len(np.unique(victims)) != len(victims):
        raise fail(VICTIMS, "a slot is listed twice among the victims")
    outside = victims[(victims < 0) | (victims >= slot_map.capacity)]
    if len(outside):
        raise fail(VICTIMS, f"slot {int(outside[0])} is not one of the {slot_map.capacity} slots")
    old = slot_map.slot_ids[victims]  # [v] the ids they hold now
    free = victims[old < 0]
    if len(free):
        raise fail(VICTIMS, f"slot {int(free[0])} holds no id: a miss takes a free slot without evicting")
    held = victims[slot_map.held_mask()[victims]]
    if len(held):
        s = int(held[0])
        raise fail(
            HOLDS,
            f"victim slot {s} (id {int(slot_map.slot_ids[s])}) is held by batch "
            f"{', '.join(map(str, holders.of(s)))}, still in flight",
        )
    own = np.flatnonzero(np.isin(old, unique))
    if len(own):
        raise fail(VICTIMS, f"victim slot {int(victims[own[0]])} holds id {int(old[own[0]])}, which batch {b} looks up")
    miss_slots = given[np.searchsorted(unique, misses)]
    taken = miss_slots[(slot_map.slot_ids[miss_slots] >= 0) & ~np.isin(miss_slots, victims)]
    if len(taken):
        s = int(taken[0])
        raise fail(
            ONE_SLOT_EACH, f"slot {s} is given to a miss but still holds id {int(slot_map.slot_ids[s])} (not a victim)"
        )
    unused = np.setdiff1d(victims, miss_slots)
    if len(unused):
        raise fail(VICTIMS, f"victim slot {int(unused[0])} is given to no miss")


class OwnTablePlanner:
    """One table's Plan with your decisions and the kit's bookkeeping (holds, dirty bits, the
    write-back each Collect waits for), as `plan.TablePlanner` keeps them for its own."""

    def __init__(self, table: int, planner: Planner, slot_map: SlotMap, holds: bool, record_held: bool):
        self.table, self.planner, self.slot_map = table, planner, slot_map
        self.holds, self.record_held = holds, record_held
        self._evicted_by = np.full(slot_map.num_rows, -1, dtype=np.int64)  # as TablePlanner's
        self._working_sets = WorkingSets(slot_map.num_rows)
        self._ids: dict[int, np.ndarray] = {}  # batch -> its ids [n], seen, not yet planned
        self._unique: dict[int, np.ndarray] = {}  # batch -> U_b, for the shortfall
        self._planned: dict[int, np.ndarray] = {}  # batch -> its slots, until retired

    def see(self, k: int, ids: np.ndarray) -> None:
        self._ids[k] = ids
        self._unique[k] = self._working_sets(ids)[0]

    def shortfall(self, b: int) -> int:
        misses = int(np.count_nonzero(self.slot_map.query(self._unique[b]) < 0))
        return misses - len(self.slot_map.free_slots())

    def plan(self, b: int, stop: int) -> TablePlan:
        pad, ids = self.slot_map, self._ids.pop(b)
        del self._unique[b]
        window = [self._ids[k] for k in range(b + 1, stop) if k in self._ids]
        held = pad.held_mask()
        # copies: whatever the planner does to its arguments, the kit's map stays as it was
        plan = self.planner(b, ids.copy(), pad.slot_ids.copy(), held.copy(), [w.copy() for w in window])
        unique, slots = check_plan(plan, b, self.table, ids, pad, Holders(self._planned))
        hit = pad.query(unique) >= 0
        # your victims and misses are what Write-back and Collect move (checked: the right ones)
        victim_slots = np.sort(np.asarray(plan.victims, dtype=np.int64).reshape(-1))
        victim_ids, dirty = pad.evict(victim_slots)
        miss_ids = np.sort(np.asarray(plan.misses, dtype=np.int64).reshape(-1))
        miss_slots = slots[np.searchsorted(unique, miss_ids)]
        pad.insert(miss_ids, miss_slots)
        if self.holds:
            pad.hold(slots)
        wait = int(self._evicted_by[miss_ids].max(initial=-1))  # rule 2, as TablePlanner decides it
        self._evicted_by[miss_ids] = -1
        self._evicted_by[victim_ids[dirty]] = b
        self._planned[b] = slots
        held_before = np.flatnonzero(held) if self.record_held else np.empty(0, np.int64)
        decision = PlanDecision(b, self.table, unique, slots, hit, victim_ids, victim_slots, held_before)
        lookup_slots = np.asarray(plan.slots, dtype=np.int64).reshape(-1).copy()
        return TablePlan(decision, lookup_slots, miss_ids, miss_slots, victim_ids[dirty], victim_slots[dirty], wait)

    def retire(self, k: int) -> None:
        trained = self._planned.pop(k)
        self.slot_map.mark_dirty(trained)
        if self.holds:
            self.slot_map.release(trained)


class OwnPlans:
    """Every table's `OwnTablePlanner`, with the interface PlanAhead gives each kind of planner
    (see, shortfall, plan, retire: plan_ahead.TwinPlans)."""

    def __init__(self, setup):
        if setup.stripes != 1:
            raise ValueError("a planner of your own plans each table whole: use plan_stripes=1")
        self.planners = []
        for t, (rows, capacity) in enumerate(zip(setup.table_sizes, setup.capacities)):
            slot_map = SlotMap(rows, capacity)
            resident = np.flatnonzero(setup.slot_ids[t] >= 0)
            slot_map.insert(setup.slot_ids[t][resident], resident)
            slot_map.mark_dirty(np.flatnonzero(setup.dirty[t]))
            self.planners.append(OwnTablePlanner(t, setup.own, slot_map, setup.holds, setup.record_events))

    def see(self, k: int, batch) -> None:
        for ids, planner in zip(batch.ids, self.planners):
            planner.see(k, ids)

    def shortfall(self, b: int) -> int:
        return max(p.shortfall(b) for p in self.planners)

    def plan(self, b: int, stop: int) -> list[TablePlan]:
        return [p.plan(b, stop) for p in self.planners]

    def retire(self, k: int) -> None:
        for p in self.planners:
            p.retire(k)
