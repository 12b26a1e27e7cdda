"""ScratchPipe's Plan stage for every table, batch after batch, ahead of training.

Plan(b) depends only on the data and on the plans before it, never on how far Train has got
(schedule.py, rule 1): it counts batches b-D..b-1 as in flight (their slots held) and b-D-1 and
earlier as trained (their slots dirty, and free to evict). So the planner needs no message from
the trainer, and may run ahead on a thread or in a process of its own, making the same plans.

    PlanSetup   what a `train()` call starts from: the row stores as they are between calls
    PlanAhead   reads each batch once (`read_seconds`: the time that is the data's, not Plan's),
                shows it to every table's planner, and plans batch after batch; the tables are
                independent, so they are planned on `setup.threads` threads at once
    Planned     Plan(b): the batch and one TablePlan per table

A table's planner is the C++ loop (plan_native.py) where it builds, else its NumPy twin
(plan.py); `setup.native` chooses. The look-ahead (batches b+1 .. b+horizon) is read only when
some table must evict: a filling scratchpad plans without looking ahead.
"""
from __future__ import annotations

import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from scratchkit.config import VictimPolicy
from scratchkit.data.checks import check_batch
from scratchkit.scratchpipe.plan import TablePlan, TablePlanner
from scratchkit.scratchpipe.plan_native import NativeTablePlanner, native_planner_available
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
    threads: int = 1                   # tables planned at once (the C++ loop releases the GIL)
    native: bool | None = None         # the C++ planner (True), the NumPy twin (False), or where it builds

    @classmethod
    def from_rows(cls, pads, table_sizes, depth: int, policy: VictimPolicy, holds: bool,
                  horizon: int, record_events: bool, threads: int = 1,
                  native: bool | None = None) -> "PlanSetup":
        """The row stores (scratchpipe/rows.py) as they are now, copied: the planner's start."""
        return cls(tuple(table_sizes), tuple(pad.capacity for pad in pads), depth, policy, holds,
                   horizon, record_events, tuple(pad.slot_ids.copy() for pad in pads),
                   tuple(pad.dirty.copy() for pad in pads),
                   tuple(pad.last_trained.copy() for pad in pads), threads, native)


@dataclass
class Planned:
    """Plan(b): the batch and one TablePlan per table."""

    index: int
    batch: object
    tables: list[TablePlan]
    read_seconds: float = 0.0    # of the planning time, spent reading batches from their source


class PlanAhead:
    """Plans batches one after another on a host copy of the map (see the module docstring)."""

    def __init__(self, setup: PlanSetup, source, start: int = 0):
        """Plans batches start, start+1, ... of `source`."""
        self.setup, self.source = setup, source
        native = native_planner_available() if setup.native is None else setup.native
        self.planners = [self._planner(t, native) for t in range(len(setup.table_sizes))]
        self._in_flight: deque[int] = deque()     # batches planned, not yet retired
        self._batches: dict[int, object] = {}     # batch index -> the batch, while Plan needs it
        self._seen_upto = start - 1                # the last batch shown to the planners
        self._read = 0.0                           # seconds spent reading, since the last plan
        self._pool = ThreadPoolExecutor(setup.threads) if setup.threads > 1 else None

    def _planner(self, t: int, native: bool):
        setup = self.setup
        if native:   # the ring must hold every batch from the oldest in flight to the furthest seen
            return NativeTablePlanner(t, setup.table_sizes[t], setup.slot_ids[t], setup.dirty[t],
                                      setup.last_trained[t], setup.policy, setup.holds,
                                      setup.record_events, ring=setup.depth + setup.horizon + 3)
        slot_map = SlotMap(setup.table_sizes[t], setup.capacities[t])   # the map; the rows stay put
        resident = np.flatnonzero(setup.slot_ids[t] >= 0)
        slot_map.insert(setup.slot_ids[t][resident], resident)
        slot_map.mark_dirty(np.flatnonzero(setup.dirty[t]))
        return TablePlanner(t, slot_map, setup.last_trained[t].copy(), setup.policy,
                            holds=setup.holds, record_held=setup.record_events)

    def _each_table(self, call) -> list:
        """call(t, planner) for every table: on the pool's threads, or one after another."""
        if self._pool is None:
            return [call(t, p) for t, p in enumerate(self.planners)]
        return list(self._pool.map(lambda tp: call(*tp), enumerate(self.planners)))

    def _see_upto(self, k: int) -> None:
        """Read batches up to k (once each, in order) and show each to every table's planner."""
        while self._seen_upto < k:
            index = self._seen_upto + 1
            start = time.perf_counter()
            batch = self.source.batch(index)
            check_batch(batch, self.setup.table_sizes, index)   # an id out of range: never planned
            self._read += time.perf_counter() - start
            self._batches[index] = batch
            self._each_table(lambda t, p: p.see(index, batch.ids[t]))
            self._seen_upto = index

    def plan_bytes(self, b: int) -> int:
        """A generous bound on the bytes of arrays in Planned(b): the plan ring's slot size."""
        self._see_upto(b)
        batch = self._batches[b]
        # per lookup: the batch's id and lookup_slots, and at most ten arrays of the working set
        per_table = sum(12 * len(ids) + capacity + len(offsets) + 1 for ids, offsets, capacity in
                        zip(batch.ids, batch.offsets, self.setup.capacities))   # int64 elements
        return 2 * (8 * per_table + batch.dense.nbytes + batch.labels.nbytes)

    def plan(self, b: int) -> Planned:
        """Plan(b). Call for b = start, start+1, ... in order (rule 1)."""
        while self._in_flight and self._in_flight[0] < b - self.setup.depth:
            k = self._in_flight.popleft()                      # b-D-1 and older: trained
            self._each_table(lambda t, p: p.retire(k))
        self._see_upto(b)
        stop = min(b + 1 + self.setup.horizon, len(self.source))
        if self.setup.policy is VictimPolicy.FURTHEST and max(self._each_table(lambda t, p: p.shortfall(b))) > 0:
            self._see_upto(stop - 1)                           # the look-ahead, only to evict
        tables = self._each_table(lambda t, p: p.plan(b, stop))
        self._in_flight.append(b)
        batch = self._batches.pop(b)
        read, self._read = self._read, 0.0
        return Planned(b, batch, tables, read_seconds=read)
