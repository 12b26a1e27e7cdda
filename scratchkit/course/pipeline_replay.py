"""Replay a ScratchPipe event trace, one stage event at a time, into what a learner should see.

The trainer records an `EventLog` (scratchkit/scratchpipe/events.py): when each stage of each batch ran, and
what Plan decided per table. `replay(log, table, capacity)` walks the stage events in the order
they started and returns one `Moment` per event: which batch each stage is working on, the
scratchpad's slots at that moment, and the event described in words.

Slots are rebuilt from the plan decisions alone, starting from an empty scratchpad:
- Plan(b) moves its victims' ids out, puts its misses into their slots, and holds every slot of U_b;
- Train(b) releases b's holds when it ends.
Other events are in effect once they have ended by the moment's time; the moment's own event is
shown as it happens (a Plan's victims, an Insert's new rows, a Write-back's outgoing rows). A
victim that a batch in flight still holds is a CONFLICT: invariant 4 broken (the hazard lab).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from scratchkit.scratchpipe.invariants import Invariant
from scratchkit.scratchpipe.events import EventLog, PlanDecision, Stage, StageEvent

STAGE_ORDER = list(Stage)


class SlotState(IntEnum):
    FREE = 0  # no row yet
    RESIDENT = 1  # holds a row that no batch in flight needs: a candidate victim
    HELD = 2  # used by a planned batch that has not trained yet (see `holders`)
    VICTIM = 3  # this moment's Plan evicts it / this Write-back sends its old row home
    INSERTED = 4  # this moment's Insert wrote a fetched row here
    CONFLICT = 5  # a victim that a batch in flight still holds: a hazard


@dataclass(frozen=True)
class Moment:
    index: int  # position among the stage events, in start order
    event: StageEvent  # the event this moment shows
    time: float  # its start, seconds since the log's origin
    stage_batches: dict  # Stage -> (batch, running: bool) of the latest event started
    slot_ids: np.ndarray  # [capacity] id in each slot, -1 = free
    holders: np.ndarray  # [capacity] newest batch holding each slot, -1 = none
    states: np.ndarray  # [capacity] SlotState values
    decision: PlanDecision | None  # Plan's decision for the event's batch and this table
    words: str  # the event in a sentence

    def count(self, state: SlotState) -> int:
        return int((self.states == state).sum())


def _ids_text(ids: np.ndarray, most: int = 6) -> str:
    shown = ", ".join(str(int(i)) for i in ids[:most])
    return shown + (f", ... ({ids.size} in all)" if ids.size > most else "")


class _Pad:
    """The replayed scratchpad of one table: which id is in each slot and who holds it."""

    def __init__(self, capacity: int):
        self.slot_ids = np.full(capacity, -1, dtype=np.int64)
        self.holds = np.zeros(capacity, dtype=np.int64)
        self.holders = np.full(capacity, -1, dtype=np.int64)

    def check(self, d: PlanDecision) -> None:
        cap = self.slot_ids.size
        for name in ("slots", "victim_slots"):
            s = getattr(d, name)
            if s.size and (s.min() < 0 or s.max() >= cap):
                raise ValueError(
                    f"plan of batch {d.batch}, table {d.table}: {name} hold slot "
                    f"{int(s.max() if s.max() >= cap else s.min())}, outside the "
                    f"capacity {cap}; pass the scratchpad's real capacity"
                )

    def plan(self, d: PlanDecision) -> None:
        self.check(d)
        self.slot_ids[d.victim_slots] = -1
        self.slot_ids[d.slots] = d.unique_ids
        self.holds[d.slots] += 1
        self.holders[d.slots] = d.batch

    def release(self, d: PlanDecision) -> None:
        self.holds[d.slots] -= 1
        self.holders[d.slots[self.holds[d.slots] <= 0]] = -1
        self.holds[d.slots] = np.maximum(self.holds[d.slots], 0)


def _words(event: StageEvent, d: PlanDecision | None, table: int, conflicts: np.ndarray) -> str:
    b, stage = event.batch, event.stage
    if d is None:
        return f"{stage.value.replace('_', '-').title()}({b}): no plan recorded for table {table}."
    free = d.misses - d.victim_ids.size
    if stage is Stage.PLAN:
        text = (
            f"Plan({b}), table {table}: {d.unique_ids.size} unique ids, {d.hits} hits, "
            f"{d.misses} misses. {free} misses take free slots"
        )
        if d.victim_ids.size:
            text += f", {d.victim_ids.size} evict victims (ids {_ids_text(d.victim_ids)})"
        text += f". All {d.unique_ids.size} slots are now held by batch {b}."
        if conflicts.size:
            text += (
                f" HAZARD: victim slots {_ids_text(conflicts)} are still held by a batch in "
                f"flight ({Invariant.HOLDS.cited})."
            )
        return text
    if stage is Stage.COLLECT:
        return f"Collect({b}): gather the {d.misses} missed rows from the host tables into a staging buffer."
    if stage is Stage.TRANSFER:
        return f"Transfer({b}): the {d.misses} collected rows host -> device."
    if stage is Stage.INSERT:
        gone = f" (their {d.victim_ids.size} victims' rows went home in Write-back({b}))" if d.victim_ids.size else ""
        return f"Insert({b}): write the {d.misses} fetched rows into their slots{gone}."
    if stage is Stage.WRITE_BACK:
        if not d.victim_ids.size:
            return f"Write-back({b}): no victims, nothing to write back."
        return f"Write-back({b}): scatter {d.victim_ids.size} victim rows (ids {_ids_text(d.victim_ids)}) into the host tables."
    return (
        f"Train({b}): forward, backward and update through {d.unique_ids.size} slots, "
        f"every lookup a hit; then batch {b}'s holds are released."
    )


def replay(log: EventLog, table: int = 0, capacity: int | None = None) -> list[Moment]:
    """One `Moment` per stage event of `log`, in start order, for one table's scratchpad.

    `capacity`: the scratchpad's slots; None = one more than the largest slot any plan used.
    """
    decisions = {d.batch: d for d in log.plans if d.table == table}
    if log.plans and not decisions:
        tables = sorted({d.table for d in log.plans})
        raise ValueError(f"no plan decisions for table {table}; the log has tables {tables}")
    if capacity is None:
        used = [int(np.max(d.slots)) for d in decisions.values() if d.slots.size]
        capacity = max(used, default=-1) + 1
    if capacity < 1:
        raise ValueError(f"capacity must be positive, got {capacity}")
    order = {s: i for i, s in enumerate(STAGE_ORDER)}
    events = sorted(log.stages, key=lambda e: (e.start, e.batch, order[e.stage]))
    # effects: a Plan's decision and a Train's release, each in force once the event has ended and
    # never before the event itself (zero-length events in a hand-made log keep their order)
    position = {id(e): i for i, e in enumerate(events)}
    pending = sorted(
        (e for e in events if e.stage in (Stage.PLAN, Stage.TRAIN) and e.batch in decisions),
        key=lambda e: (e.end, position[id(e)]),
    )
    pad, moments = _Pad(capacity), []
    for index, event in enumerate(events):
        ready = [e for e in pending if e.end <= event.start and position[id(e)] < index]
        for e in ready:
            (pad.plan if e.stage is Stage.PLAN else pad.release)(decisions[e.batch])
        applied = {id(e) for e in ready}
        pending = [e for e in pending if id(e) not in applied]
        d = decisions.get(event.batch)
        slot_ids, holders = pad.slot_ids.copy(), pad.holders.copy()
        conflicts = np.empty(0, dtype=np.int64)
        marks: dict[SlotState, np.ndarray] = {}
        if d is not None and event.stage is Stage.PLAN:
            pad.check(d)
            held_now = np.union1d(np.flatnonzero(pad.holds > 0), d.held_before)
            conflicts = np.intersect1d(d.victim_slots, held_now)
            slot_ids[d.victim_slots] = -1
            slot_ids[d.slots] = d.unique_ids
            holders[d.slots] = event.batch
            marks[SlotState.VICTIM] = d.victim_slots
            marks[SlotState.CONFLICT] = conflicts
        elif d is not None and event.stage is Stage.INSERT:
            marks[SlotState.INSERTED] = d.slots[~d.hit]
        elif d is not None and event.stage is Stage.WRITE_BACK:
            marks[SlotState.VICTIM] = d.victim_slots
        states = np.where(slot_ids < 0, SlotState.FREE, SlotState.RESIDENT).astype(np.int64)
        states[holders >= 0] = SlotState.HELD
        for state, slots in marks.items():
            states[slots] = state
        moments.append(
            Moment(
                index,
                event,
                event.start,
                _stage_batches(events[: index + 1], event.start),
                slot_ids,
                holders,
                states,
                d,
                _words(event, d, table, conflicts),
            )
        )
    return moments


def _stage_batches(started: list[StageEvent], time: float) -> dict:
    """Stage -> (batch, running) of the latest event of each stage that started by `time`."""
    latest: dict = {}
    for e in started:
        latest[e.stage] = (e.batch, e.start <= time < e.end or e.start == time)
    return {s: latest[s] for s in STAGE_ORDER if s in latest}


def describe_stages(moment: Moment) -> str:
    """'plan: batch 4 (running) | collect: batch 3 (done) | ...' for the stages seen so far."""
    return " | ".join(
        f"{s.value}: batch {b} ({'running' if running else 'done'})" for s, (b, running) in moment.stage_batches.items()
    )
