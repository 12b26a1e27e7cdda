"""ScratchPipe's Plan stage for every table, batch after batch, ahead of training.

Plan(b) depends only on the data and on the plans before it, never on how far Train has got
(schedule.py, rule 1): it counts batches b-D..b-1 as in flight (their slots held) and b-D-1 and
earlier as trained (their slots dirty, and free to evict). So the planner needs no message from
the trainer, and may run ahead on a thread or in a process of its own, making the same plans.

    PlanSetup   what a `train()` call starts from: the row stores as they are between calls
    PlanAhead   reads each batch once, from a loader that makes them ahead on a thread of its
                own (data/loader.py; `read_seconds`: the wait for them, the data's time, not
                Plan's), shows it to every table's planners, and plans batch after batch; the tables (and
                a table's stripes, stripes.py) are independent, so they are planned on
                `setup.threads` threads at once
    Planned     Plan(b): the batch and one TablePlan per table

A table's planner is the C++ loop (plan_native.py) where it builds, else its NumPy twin
(plan.py); `setup.native` chooses. With `setup.own`, it is a planner of your own (own_planner.py). With `setup.device`, it is the device planner (device_plan.py),
the same decisions in the device's arrays. The look-ahead (batches b+1 .. b+horizon) is read only when
some table must evict: a filling scratchpad plans without looking ahead.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from scratchkit.config import VictimPolicy
from scratchkit.data.loader import BatchLoader
from scratchkit.device_work import DeviceWork, Path, on_path, snapshot_here
from scratchkit.kernels.engine import EngineKind, make_engine, resolve
from scratchkit.scratchpipe.device_plan import DevicePlans
from scratchkit.scratchpipe.own_planner import OwnPlans
from scratchkit.scratchpipe.plan import TablePlan, TablePlanner
from scratchkit.scratchpipe.plan_native import NativePlans, native_planner_available
from scratchkit.scratchpipe.stripes import StripeOf, TwinStripe, merge_plans, stripe_slots
from scratchkit.scratchpipe.slot_map import SlotMap


@dataclass(frozen=True)
class PlanSetup:
    """Everything the planner needs, taken when `train()` starts (`from_rows`)."""

    table_sizes: tuple[int, ...]
    capacities: tuple[int, ...]
    depth: int
    policy: VictimPolicy
    holds: bool  # the hazard lab's switch (invariant 4)
    horizon: int  # how many batches ahead next uses are looked for
    record_events: bool  # False: leave out what only the event trace reads
    slot_ids: tuple[np.ndarray, ...]  # per table [capacity] id in each slot now, -1 free
    dirty: tuple[np.ndarray, ...]  # per table [capacity] bool, changed since filled
    last_trained: tuple[np.ndarray, ...]  # per table [capacity] batch that last trained it
    threads: int = 1  # planners run at once (the C++ loop releases the GIL)
    native: bool | None = None  # the C++ planner (True), the NumPy twin (False), or where it builds
    stripes: int = 1  # planners per table, each owning ids id % stripes (stripes.py)
    device: str | None = None  # plan on this torch device's engine (device_plan.py), else the host
    own: object = None  # a planner of your own (own_planner.py), else the kit's
    on_step: bool = False  # Plan is part of the step (a cache filled on demand, lru-device's): the
    # device planner queues on its caller's stream and counts on Train's path, else on its own

    @classmethod
    def from_rows(
        cls,
        pads,
        table_sizes,
        depth: int,
        policy: VictimPolicy,
        holds: bool,
        horizon: int,
        record_events: bool,
        threads: int = 1,
        native: bool | None = None,
        stripes: int = 1,
        device: str | None = None,
        own=None,
    ) -> "PlanSetup":
        """The row stores (scratchpipe/rows.py) as they are now, copied: the planner's start."""
        return cls(
            tuple(table_sizes),
            tuple(pad.capacity for pad in pads),
            depth,
            policy,
            holds,
            horizon,
            record_events,
            tuple(pad.slot_ids.copy() for pad in pads),
            tuple(pad.dirty.copy() for pad in pads),
            tuple(pad.last_trained.copy() for pad in pads),
            threads,
            native,
            stripes,
            device,
            own,
        )


@dataclass
class Planned:
    """Plan(b): the batch and one TablePlan per table."""

    index: int
    batch: object
    tables: list[TablePlan]
    read_seconds: float = 0.0  # of the planning time, spent reading batches from their source
    work: DeviceWork = field(default_factory=DeviceWork)  # the device work Plan(b) counted (its waits, launches)


class TwinPlans:
    """Every table's planners in NumPy (plan.py; `TwinStripe`s when a table has stripes), one after
    another: the specification `NativePlans` (plan_native.py) is held to, with its interface."""

    def __init__(self, setup: PlanSetup):
        self.planners = [
            [
                self._planner(setup, t, StripeOf(s, setup.stripes, offset), size)
                for s, (offset, size) in enumerate(stripe_slots(setup.capacities[t], setup.stripes))
            ]
            for t in range(len(setup.table_sizes))
        ]  # [tables][stripes]
        self._lookups: dict[int, list[int]] = {}  # batch -> lookups per table

    @staticmethod
    def _planner(setup: PlanSetup, t: int, stripe: StripeOf, size: int):
        """Table t's planner for `stripe` (its slots: [stripe.offset, stripe.offset + size))."""
        mine = slice(stripe.offset, stripe.offset + size)
        slot_ids, dirty, clock = setup.slot_ids[t][mine], setup.dirty[t][mine], setup.last_trained[t][mine]
        if ((slot_ids >= 0) & (slot_ids % stripe.stripes != stripe.stripe)).any():
            raise ValueError(
                f"table {t}: slots {stripe.offset}.. hold ids of another stripe "
                f"(the scratchpad was filled with a different number of plan stripes)"
            )
        slot_map = SlotMap(stripe.local_rows(setup.table_sizes[t]), size)  # the map; rows stay put
        resident = np.flatnonzero(slot_ids >= 0)
        slot_map.insert(slot_ids[resident] // stripe.stripes, resident)
        slot_map.mark_dirty(np.flatnonzero(dirty))
        twin = TablePlanner(t, slot_map, clock.copy(), setup.policy, holds=setup.holds, record_held=setup.record_events)
        return twin if stripe.stripes == 1 else TwinStripe(twin, stripe)

    def see(self, k: int, batch) -> None:
        self._lookups[k] = [len(ids) for ids in batch.ids]
        for ids, stripes in zip(batch.ids, self.planners):
            for planner in stripes:
                planner.see(k, ids)

    def shortfall(self, b: int) -> int:
        return max(p.shortfall(b) for stripes in self.planners for p in stripes)

    def plan(self, b: int, stop: int) -> list[TablePlan]:
        plans = []
        for n, stripes in zip(self._lookups.pop(b), self.planners):
            lookup_slots = np.empty(n, np.int64)  # [n] each stripe fills its lookups' slots
            plans.append(merge_plans([planner.plan(b, stop, lookup_slots) for planner in stripes]))
        return plans

    def retire(self, k: int) -> None:
        for stripes in self.planners:
            for planner in stripes:
                planner.retire(k)


def _planners(setup: PlanSetup):
    """Every table's planners: yours, or on the device's engine, or the C++ loop, or its NumPy twin."""
    if setup.own is not None:
        return OwnPlans(setup)
    if setup.device is not None:
        return DevicePlans(setup, make_engine(resolve(EngineKind.AUTO, setup.device)))
    native = native_planner_available() if setup.native is None else setup.native
    return NativePlans(setup) if native else TwinPlans(setup)


class PlanAhead:
    """Plans batches one after another on a host copy of the map (see the module docstring)."""

    def __init__(self, setup: PlanSetup, source, start: int = 0, ahead: int = 0, pin=None, workers: int = 1):
        """Plans batches start, start+1, ... of `source`, read through a loader that makes
        `ahead` batches ahead of Plan on `workers` threads (data/loader.py; `pin`: its pinning,
        None on a CPU or where Plan runs in a forked process)."""
        self.setup, self.source = setup, source
        with on_path(Path.PLAN):  # a device planner's set-up is Plan's work, whichever thread makes it
            self.plans = _planners(setup)
        self._in_flight: deque[int] = deque()  # batches planned, not yet retired
        self._batches: dict[int, object] = {}  # batch index -> the batch, while Plan needs it
        self._seen_upto = start - 1  # the last batch shown to the planners
        self._read = 0.0  # seconds spent reading, since the last plan
        self._end = len(source)  # the look-ahead reads up to the source's end, past the call's
        self._ahead, self._pin, self._workers = ahead, pin, workers
        # made when taken until Plan's first batch: `plan_bytes` reads before a fork, where no
        # thread may run yet; `plan` then starts the loader's thread in the process that plans
        self._loader = BatchLoader(source, setup.table_sizes, start, self._end, 0, pin)
        self._loading = False

    @classmethod
    def fresh(
        cls, config, source, threads: int = 1, device: str | None = None, depth: int | None = None
    ) -> "PlanAhead":
        """The planner as a `train()` call starts it on empty scratchpads (the measurements' and
        the projection's): `config`'s depth (or `depth`: 0 for a cache filled on demand, which
        CacheParams cannot say), victim policy, horizon (4 x (depth + 1)) and plan stripes,
        `threads` planners at once; `device`: the device planner's (scratchpipe-device), on that
        torch device's engine."""
        sizes = tuple(config.data.table_sizes)
        capacities = tuple(config.cache.capacity_for(n) for n in sizes)
        depth = config.cache.depth if depth is None else depth
        setup = PlanSetup(
            sizes,
            capacities,
            depth,
            config.cache.victim_policy,
            holds=True,
            horizon=4 * (depth + 1),
            record_events=False,
            slot_ids=tuple(np.full(c, -1, np.int64) for c in capacities),
            dirty=tuple(np.zeros(c, bool) for c in capacities),
            last_trained=tuple(np.full(c, -1, np.int64) for c in capacities),
            threads=threads,
            stripes=config.cache.plan_stripes,
            device=device,
        )
        return cls(setup, source, 0)

    def _see_upto(self, k: int) -> None:
        """Read batches up to k (once each, in order) and show each to every table's planner.
        Each was checked at the door as it was made (an id out of range: never planned)."""
        while self._seen_upto < k:
            index = self._seen_upto + 1
            start = time.perf_counter()
            batch = self._loader.take(index)
            self._read += time.perf_counter() - start
            self._batches[index] = batch
            self.plans.see(index, batch)
            self._seen_upto = index

    def plan_bytes(self, b: int) -> int:
        """A generous bound on the bytes of arrays in Planned(b): the plan ring's slot size. Its
        reading is the call's start-up (like the fork), no stage's: were it counted, Plan(b) would
        subtract reading it did not do, and read less than nothing when reading is slow."""
        read = self._read
        self._see_upto(b)
        self._read = read
        batch = self._batches[b]
        # per lookup: its lookup_slots, and at most ten arrays of the working set; and the batch
        # itself (with any batch it carries: a routed batch's global one, scratchkit/distributed)
        per_table = sum(11 * len(ids) + capacity + 1 for ids, capacity in zip(batch.ids, self.setup.capacities))
        return 2 * (8 * per_table + batch.nbytes())  # int64 elements, then bytes

    def plan(self, b: int) -> Planned:
        """Plan(b). Call for b = start, start+1, ... in order (rule 1). Its device work counts on
        Plan's path (device_work.py; Train's where Plan is part of the step: `on_step`), on
        whichever thread it runs: `Planned.work`, this thread's alone (the row moves' threads
        count on Plan's path beside it)."""
        with on_path(Path.TRAIN if self.setup.on_step else Path.PLAN):
            before = snapshot_here()
            planned = self._plan(b)
            planned.work = snapshot_here() - before
        return planned

    def _plan(self, b: int) -> Planned:
        if not self._loading:  # the first plan: from here the batches are made ahead
            self._loading = True
            start = self._seen_upto + 1
            sizes = self.setup.table_sizes
            self._loader = BatchLoader(self.source, sizes, start, self._end, self._ahead, self._pin, self._workers)
        while self._in_flight and self._in_flight[0] < b - self.setup.depth:
            k = self._in_flight.popleft()  # b-D-1 and older: trained
            self.plans.retire(k)
        self._see_upto(b)
        stop = min(b + 1 + self.setup.horizon, self._end)
        if self.setup.policy is VictimPolicy.FURTHEST and self.plans.shortfall(b) > 0:
            self._see_upto(stop - 1)  # the look-ahead, only to evict
        tables = self.plans.plan(b, stop)
        self._in_flight.append(b)
        batch = self._batches.pop(b)
        read, self._read = self._read, 0.0
        return Planned(b, batch, tables, read_seconds=read)

    def close(self) -> None:
        """Stop the loader's thread, if this process started one. Safe twice."""
        self._loader.close()
