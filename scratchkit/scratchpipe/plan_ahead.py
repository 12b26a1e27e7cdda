"""ScratchPipe's Plan stage for every table, batch after batch, ahead of training.

Plan(b) depends only on the data and on the plans before it, never on how far Train has got
(schedule.py, rule 1): it counts batches b-D..b-1 as in flight (their slots held) and b-D-1 and
earlier as trained (their slots dirty, and free to evict). So the planner needs no message from
the trainer, and may run ahead on a thread or in a process of its own, making the same plans.

    PlanSetup   what a `train()` call starts from: the row stores as they are between calls
    PlanAhead   plans batch after batch: one TablePlanner per table (plan.py), the batches in
                flight, and the batches it has read (each read once, shared by Plan(b) and the
                look-ahead of earlier batches)
    Planned     Plan(b): the batch and one TablePlan per table
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from scratchkit.config import VictimPolicy
from scratchkit.data.checks import check_batch
from scratchkit.scratchpipe.lookahead import NextUses, WorkingSets
from scratchkit.scratchpipe.plan import TablePlan, TablePlanner
from scratchkit.scratchpipe.slot_map import SlotMap


@dataclass(frozen=True)
class PlanSetup:
    """Everything the planner needs, taken when `train()` starts (`from_rows`)."""

    table_sizes: tuple[int, ...]
    capacities: tuple[int, ...]
    depth: int
    policy: VictimPolicy
    holds: bool                        # the hazard lab's switch (invariant 4)
    horizon: int                       # how many batches ahead next uses are looked for
    record_events: bool                # False: leave out what only the event trace reads
    slot_ids: tuple[np.ndarray, ...]   # per table [capacity] id in each slot now, -1 free
    dirty: tuple[np.ndarray, ...]      # per table [capacity] bool, changed since filled
    last_trained: tuple[np.ndarray, ...]  # per table [capacity] batch that last trained it

    @classmethod
    def from_rows(cls, pads, table_sizes, depth: int, policy: VictimPolicy, holds: bool,
                  horizon: int, record_events: bool) -> "PlanSetup":
        """The row stores (scratchpipe/rows.py) as they are now, copied: the planner's start."""
        return cls(tuple(table_sizes), tuple(pad.capacity for pad in pads), depth, policy, holds,
                   horizon, record_events, tuple(pad.slot_ids.copy() for pad in pads),
                   tuple(pad.dirty.copy() for pad in pads),
                   tuple(pad.last_trained.copy() for pad in pads))


class Seen(NamedTuple):
    """A batch the planner has read, with what Plan and the look-ahead need of it."""

    batch: object
    sets: list[tuple[np.ndarray, np.ndarray]]   # per table (unique ids, inverse)
    joined: np.ndarray                          # the working sets as NextUses ids


@dataclass
class Planned:
    """Plan(b): the batch and one TablePlan per table."""

    index: int
    batch: object
    tables: list[TablePlan]


class PlanAhead:
    """Plans batches one after another on a host copy of the map (see the module docstring)."""

    def __init__(self, setup: PlanSetup, source):
        self.setup, self.source = setup, source
        self.planners = []
        for t, (n, capacity) in enumerate(zip(setup.table_sizes, setup.capacities)):
            slot_map = SlotMap(n, capacity)   # the map and its bookkeeping; the rows stay put
            resident = np.flatnonzero(setup.slot_ids[t] >= 0)
            slot_map.insert(setup.slot_ids[t][resident], resident)
            slot_map.mark_dirty(np.flatnonzero(setup.dirty[t]))
            self.planners.append(TablePlanner(t, slot_map, setup.last_trained[t].copy(), setup.policy,
                                              holds=setup.holds, record_held=setup.record_events))
        self._in_flight: deque[tuple[int, list[np.ndarray]]] = deque()   # (b, slots per table)
        self._seen: dict[int, Seen] = {}   # batch index -> the batch and its working sets
        self._working_sets = [WorkingSets(n) for n in setup.table_sizes]
        self._next_uses = NextUses(setup.table_sizes)

    def _look(self, index: int) -> Seen:
        """Batch `index` and its working sets, made once: Plan(b) and the look-ahead share them."""
        if index not in self._seen:
            batch = self.source.batch(index)
            check_batch(batch, self.setup.table_sizes, index)   # an id out of range: never planned
            sets = [working_set(ids) for working_set, ids in zip(self._working_sets, batch.ids)]
            self._seen[index] = Seen(batch, sets, self._next_uses.joined([unique for unique, _ in sets]))
        return self._seen[index]

    def _retire(self, b: int, slots: list[np.ndarray]) -> None:
        """Train(b) has finished by the time the plan being made is used: its slots are dirty."""
        for planner, trained in zip(self.planners, slots):
            planner.slot_map.mark_dirty(trained)
            planner.trained(b, trained)
            if self.setup.holds:
                planner.slot_map.release(trained)

    def plan_bytes(self, b: int) -> int:
        """A generous bound on the bytes of arrays in Planned(b): the plan ring's slot size."""
        batch = self._look(b).batch
        # per lookup: the batch's id and lookup_slots, and at most ten arrays of the working set
        per_table = sum(12 * len(ids) + capacity + len(offsets) + 1 for ids, offsets, capacity in
                        zip(batch.ids, batch.offsets, self.setup.capacities))   # int64 elements
        return 2 * (8 * per_table + batch.dense.nbytes + batch.labels.nbytes)

    def plan(self, b: int) -> Planned:
        """Plan(b). Call for b = start, start+1, ... in order (rule 1)."""
        while self._in_flight and self._in_flight[0][0] < b - self.setup.depth:
            self._retire(*self._in_flight.popleft())          # b-D-1 and older: trained
        batch, sets, _ = self._look(b)
        for k in [k for k in self._seen if k < b]:
            del self._seen[k]
        stop = min(b + 1 + self.setup.horizon, len(self.source))
        urgencies: list[np.ndarray] = []

        def urgency(t: int) -> np.ndarray:
            """Table t's urgencies, from batches b+1 .. b+horizon: read (and made) only when some
            table must evict, so a filling scratchpad plans without looking ahead."""
            if not urgencies:
                urgencies.extend(self._next_uses([self._look(k).joined for k in range(b + 1, stop)]))
            return urgencies[t]

        furthest = self.setup.policy is VictimPolicy.FURTHEST
        tables = []
        for t, planner in enumerate(self.planners):
            unique, inverse = sets[t]
            tables.append(planner.plan(b, batch.ids[t], unique, inverse,
                                       (lambda t=t: urgency(t)) if furthest else None))
        self._in_flight.append((b, [p.decision.slots for p in tables]))
        return Planned(b, batch, tables)
