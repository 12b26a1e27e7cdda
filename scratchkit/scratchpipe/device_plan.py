"""ScratchPipe's Plan on the device: the host planner's decisions, for every table at once, with one
wait for the device a batch.

The host planner (plan.py, and its C++ loop plan_loop.cpp) keeps each table's id -> slot map in a
host array and works id by id on the CPU. On a GPU server that is the bound: the host stages of a
large, low-locality model need ~150 core-ms a step against gpu-only's ~2 ms (docs/costmodel.md).
This planner keeps every per-id and per-slot array on the device and plans a batch as a fixed
number of kernels (kernels/plan.cu), however many tables there are:

    working set   sort every table's ids at once, mark each run's first, scan: U_b, inverse
    hits, misses  one probe of the hash map (kernels/hashmap.cu); the misses compacted
    free slots    one pass over the slots, compacted (while any slot is free)
    bounds        each table's misses, free slots, the victims it needs
    victims       one key per slot, one sort of the keys, each table's first few taken
    the map       erase the victims' ids, insert the misses'                   (hashmap.cu)
    remap         every id in its slot, table-local, every lookup's slot       (gathers)
    read          every table's bounds, in one copy: the batch's one wait

The host never asks the device how long an array is before the end: an array whose length only
the device knows is a buffer as long as it could be, padded (kernels/twin_plan.py says how), and
each table's bounds are computed on the device, into one small array (`_Sizes`) read once. So on
a GPU the planner queues a batch's kernels on its own stream and waits once, for all of them,
while Train's kernels run beside them. What the host must decide before that read, it decides
from what it knows without one: whether the batch may evict (each table's lookups against the
free slots it counted from the last read) and so whether to choose victims at all.

The tables share one id space and one slot space: table t's id i is the global id
i + row_offsets[t], its slot s the global slot s + slot_offsets[t]. Sorted global ids are grouped
by table, so are ascending global slots: every "per table" below is a contiguous range, and no
loop runs over the tables except to cut the result into one TablePlan each (views, no copies).

Its decisions are plan.TablePlanner's exactly (a test holds them array for array): the same free
slots first, ascending; the same victims, least urgent (furthest next use within the horizon),
then least recently trained, then lowest slot. One difference: `wait_for_write_back`
(invariant 3). The host planner names the latest batch that evicted one of b's misses, from an
array over every row of the table; this one keeps nothing per row and names the latest earlier
batch that wrote back any row of the table, no earlier than the host planner's batch: Collect(b)
may wait a little longer, never less.

`xp` is the engine's array module: NumPy on a CPU (the kernels by the host build of the `.cu`, or
their NumPy twins; there the working set is embedding/working_sets.py's, its lengths exact), CuPy
on a GPU. Every call that launches device work is counted (device_work.py): the engine's kernels,
and the sorts, scans and fills through kernels/array_ops.py.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from scratchkit.config import VictimPolicy
from scratchkit.embedding.working_sets import WorkingSets
from scratchkit.kernels.array_ops import ArrayOps
from scratchkit.kernels.engine import OwnStream, SameStream
from scratchkit.kernels.twin_plan import PAD
from scratchkit.scratchpipe.device_map import DeviceSlotMap
from scratchkit.scratchpipe.events import PlanDecision
from scratchkit.scratchpipe.plan import TablePlan

NEVER = -(2**40)  # a slot's last_planned or hit stamp before any batch of this call


class _Seen(NamedTuple):
    """A batch's working set: unique [u] global ids sorted (then padding), inverse [n], its
    length `count` [1] and each table's start `unique_at` [T+1], on the device; lookups per table."""

    unique: object
    inverse: object
    count: object
    unique_at: object
    lookups: list


class _Evicted(NamedTuple):
    victims: object  # [S] slots, ascending (by table), then padding
    victim_ids: object  # [S] the id each held
    written_pos: object  # [S] scan of which were dirty (Write-back's)
    count: object  # [1] how many


class _Sizes:
    """Every number the host needs of Plan(b), in one int64 array, so one copy reads them all.
    Starts per table [T+1] (the last, the total): of the working set, the misses, the free slots,
    the held slots, the victims, the written victims. Counts per table [T]: the victims it needs,
    the free slots its misses take, its candidates, its victims. Then the map's insert counts [2]."""

    STARTS = ("unique_at", "miss_at", "free_at", "held_at", "victim_at", "written_at")
    COUNTS = ("need", "take", "have", "victims")

    def __init__(self, array, tables: int):
        self.array, at = array, 0
        for names, length in ((self.STARTS, tables + 1), (self.COUNTS, tables)):
            for name in names:
                setattr(self, name, array[at : at + length])
                at += length
        self.stats = array[at : at + 2]

    @classmethod
    def length(cls, tables: int) -> int:
        return len(cls.STARTS) * (tables + 1) + len(cls.COUNTS) * tables + 2


class DevicePlans:
    """Every table's planning on the device, with the interface plan_ahead.PlanAhead drives
    (`see`, `shortfall`, `plan`, `retire`), like TwinPlans and NativePlans."""

    def __init__(self, setup, engine):
        if setup.stripes != 1:
            raise ValueError(
                "the device planner plans each table whole: plan_stripes must be 1 "
                f"(got {setup.stripes}); stripes spread the host planner over cores"
            )
        if setup.policy not in (VictimPolicy.FURTHEST, VictimPolicy.LRU):
            raise ValueError(
                f"ScratchPipe's planner chooses victims by furthest next use or LRU, not {setup.policy.value!r}"
            )
        xp = self.xp = engine.xp
        self.engine, self.ops = engine, ArrayOps(xp)  # the kernels; the sorts, scans and the one read
        ops = self.ops
        # on a GPU the planner's kernels run beside Train's; an on-demand step's, in order before them
        self.stream = SameStream() if setup.on_step else OwnStream(xp)
        self.stream.follow()  # the row stores' copies in `setup`, queued by this thread, come first
        self.depth, self.policy, self.holds, self.record = setup.depth, setup.policy, setup.holds, setup.record_events
        self.row_offsets = np.concatenate([[0], np.cumsum(setup.table_sizes)]).astype(np.int64)  # [T+1]
        self.slot_offsets = np.concatenate([[0], np.cumsum(setup.capacities)]).astype(np.int64)  # [T+1]
        self.tables, slots = len(setup.table_sizes), int(self.slot_offsets[-1])
        self.free = None  # [T] free slots per table, on the host: from each batch's read
        self.beyond = np.asarray(setup.table_sizes) - np.asarray(setup.capacities)  # [T] rows no slot can hold
        self._bitmap = WorkingSets(int(self.row_offsets[-1])) if xp is np else None
        self._seen: dict[int, _Seen] = {}
        self._planned: dict[int, object] = {}  # batch -> its global slots, until retired
        self._last_write_back = np.full(self.tables, -1, dtype=np.int64)  # per table (module note)
        table_of_slot = np.repeat(np.arange(self.tables), setup.capacities)
        with self.stream:
            self.row_starts, self.slot_starts = ops.upload(self.row_offsets), ops.upload(self.slot_offsets)
            self.table_of_slot = ops.upload(table_of_slot)  # [S]
            self.slot_numbers = ops.upload(np.arange(slots))  # [S]
            self.local_slot_numbers = ops.upload(np.arange(slots) - self.slot_offsets[table_of_slot])  # [S]
            # what the slots will hold once the plans so far are inserted (the row stores lag behind)
            local_ids = ops.join(setup.slot_ids, np.int64)
            self.slot_ids = engine.to_global(local_ids, self.table_of_slot, self.row_starts)  # [S] -1 free
            self.dirty = ops.join(setup.dirty, bool)  # [S]
            self.last_trained = ops.join(setup.last_trained, np.int64)  # [S]
            self.last_planned, self.hit_stamp = ops.full(slots, NEVER), ops.full(slots, NEVER)  # [S]
            self.zeros = ops.zeros(slots)  # [S] the scan of no flags; LRU's urgency of every slot
            self.none = xp.empty(0, dtype=xp.int64)
            self.map = DeviceSlotMap(slots, engine, ops)
            self.map.fill(self.slot_ids, self.slot_numbers)

    # --- the interface PlanAhead drives -------------------------------------------------------------
    def see(self, k: int, batch) -> None:
        """Batch k's ids, every table's as one array of global ids: its working set."""
        ids = np.concatenate([i + o for i, o in zip(batch.ids, self.row_offsets)])  # [N] host
        with self.stream:
            self._seen[k] = self._working_set(ids, [len(i) for i in batch.ids])

    def shortfall(self, b: int) -> int:
        """At most how many victims Plan(b) needs in one table, known without waiting (<= 0:
        none): a table misses no more ids than its lookups, nor than its rows not in its slots,
        and its misses beyond the free slots it had at the last read are its victims."""
        free = self.free if self.free is not None else np.zeros(self.tables, np.int64)
        lookups = np.asarray(self._seen[b].lookups)
        return int(np.max(np.minimum(lookups - free, self.beyond)))

    def plan(self, b: int, stop: int) -> list[TablePlan]:
        """Plan batch b (seen); batches b+1 .. stop-1 (seen when it may evict) are the look-ahead.
        Its arrays are computed when it returns (the host waited for them): other threads read them."""
        with self.stream:
            return self._plan(b, stop)

    def retire(self, k: int) -> None:
        """Train(k) has finished by the time the plan being made is used: its slots are dirty and
        clocked (their holds end by themselves: a slot is held while last_planned >= b - depth)."""
        with self.stream:
            self.engine.mark_trained(self._planned.pop(k), k, self.dirty, self.last_trained)

    # --- the steps of Plan ------------------------------------------------------------------------
    def _working_set(self, ids: np.ndarray, lookups: list[int]) -> _Seen:
        engine, ops = self.engine, self.ops
        if self._bitmap is not None:  # a CPU's: exact lengths, known on the host
            unique, inverse = self._bitmap(ids)
            count = np.array([len(unique)], dtype=np.int64)
        else:
            device_ids = ops.upload(ids)
            order = ops.argsort(device_ids)
            pos = ops.scan(engine.first_of_runs(device_ids, order))
            unique, inverse = engine.working_set(device_ids, order, pos)
            count = self._count(pos)
        unique_at = self.xp.empty(self.tables + 1, dtype=self.xp.int64)
        engine.lower_bounds(unique, self.row_starts, unique_at)
        return _Seen(unique, inverse, count, unique_at, lookups)

    def _plan(self, b: int, stop: int) -> list[TablePlan]:
        engine, ops = self.engine, self.ops
        seen = self._seen[b]
        for k in [k for k in self._seen if k < b]:
            del self._seen[k]
        sizes = _Sizes(ops.zeros(_Sizes.length(self.tables)), self.tables)
        slots = self.map.query(seen.unique)  # [u] global, -1 = miss
        miss_pos = ops.scan(engine.split_hits(slots, seen.count, b, self.hit_stamp))
        miss_ids = engine.compact(miss_pos, seen.unique)  # [u] by table, then padding
        free_pos, free = self._free_slots()
        held_pos = self._held(b)
        engine.table_bounds(
            seen.unique_at, miss_pos, free_pos, held_pos, self.slot_starts, *(getattr(sizes, n) for n in _BOUNDS)
        )
        evicted = self._evict(b, stop, sizes) if self.shortfall(b) > 0 else None
        miss_slots = engine.assign_miss_slots(
            sizes.miss_at,
            sizes.take,
            sizes.free_at,
            sizes.victim_at,
            free,
            evicted.victims if evicted else self.none,
            len(slots),
        )
        self.map.insert(miss_ids, miss_slots, sizes.stats.view(np.uint64))
        hit = engine.place(
            seen.unique, seen.count, miss_pos, miss_slots, b, slots, self.slot_ids, self.dirty, self.last_planned
        )
        self._planned[b] = slots  # held until Train(b)
        # every array in table-local ids and slots, then each table's part is a view
        local = lambda ids, where, count: engine.to_local(
            ids, where, count, self.table_of_slot, self.row_starts, self.slot_starts
        )
        unique_local, slots_local = local(seen.unique, slots, seen.count)
        arrays = [unique_local, slots_local, hit, *local(miss_ids, miss_slots, self._count(miss_pos))]
        arrays.append(engine.gather_ids(slots_local, seen.inverse))  # every lookup's slot
        arrays.append(engine.compact(held_pos, self.local_slot_numbers) if self.record and self.holds else self.none)
        if evicted is not None:
            victim_ids, victim_slots = local(evicted.victim_ids, evicted.victims, evicted.count)
            written = [engine.compact(evicted.written_pos, a) for a in (victim_ids, victim_slots)]
            engine.counts_at(evicted.written_pos, sizes.victim_at, sizes.written_at)
            arrays += [victim_ids, victim_slots, *written]
        else:
            arrays += [self.none] * 4
        counts = _Sizes(ops.read(sizes.array, "plan sizes"), self.tables)  # the batch's one wait
        self._settle(counts)
        return self._cut(b, counts, seen.lookups, *arrays)

    def _count(self, pos):
        """[1] how many items a scan counted (its last item), on the device."""
        return pos[-1:] if len(pos) else self.ops.zeros(1)

    def _free_slots(self):
        """(scan of the free slots' flags [S], the free slots ascending [S] then padding); while no
        slot is free (the last read said so), none looked for."""
        if self.free is not None and not self.free.any():
            return self.zeros, self.none
        pos = self.ops.scan(self.engine.in_range(self.slot_ids, -1, 0))
        return pos, self.engine.compact(pos, self.slot_numbers)

    def _held(self, b: int):
        """Scan of the held slots' flags [S] (a batch in flight, b-D .. b-1, planned them), for the
        event trace: only it reads them."""
        if not (self.record and self.holds):
            return self.zeros
        return self.ops.scan(self.engine.in_range(self.last_planned, b - self.depth, b))

    def _evict(self, b: int, stop: int, sizes: _Sizes) -> _Evicted:
        """Per table t the victims[t] unheld slots first in the order (urgency, last trained, slot),
        all tables' in ascending slot order, out of the slots and the map. One int64 key per slot
        orders the table and all three at once (table < T, urgency <= horizon, last trained in
        [-1, b), slot < S: far below 2^63), so one sort serves every table."""
        engine, ops, slots = self.engine, self.ops, len(self.slot_ids)
        urgency = self._urgency(b, stop) if self.policy is VictimPolicy.FURTHEST else self.zeros
        levels = stop - b + 1  # urgency in [0, stop-1-b]
        held_since = b - self.depth if self.holds else PAD  # planned since then: in flight
        keys = engine.victim_keys(
            self.slot_ids,
            self.last_planned,
            self.hit_stamp,
            self.table_of_slot,
            sizes.need,
            urgency,
            self.last_trained,
            b,
            held_since,
            levels,
        )
        keys = ops.sort(keys)  # [S] by table, then as evicted, then padding
        first = self.xp.empty(self.tables, dtype=self.xp.int64)
        engine.victims_per_table(keys, sizes.need, levels * (b + 2) * slots, first, sizes.have, sizes.victims)
        ops.scan(sizes.victims, out=sizes.victim_at[1:])
        chosen = ops.zeros(slots)
        engine.pick_victims(keys, self.table_of_slot, first, sizes.victims, chosen)
        victims = engine.compact(ops.scan(chosen), self.slot_numbers)  # ascending: by table
        count = sizes.victim_at[self.tables :]
        victim_ids, written = engine.evict(victims, count, self.slot_ids, self.dirty)
        self.map.erase(victim_ids)
        return _Evicted(victims, victim_ids, ops.scan(written), count)

    def _urgency(self, b: int, stop: int):
        """[S] how soon each slot's id is needed in b+1 .. stop-1: H+1-k for batch b+k (H batches
        seen), 0 when none needs it (lookahead.NextUses, by slot through the map)."""
        urgency = self.ops.zeros(len(self.slot_ids))
        seen = stop - 1 - b
        for k in range(seen, 0, -1):  # nearest last, so it wins
            self.map.stamp(self._seen[b + k].unique, seen + 1 - k, urgency)
        return urgency

    def _settle(self, counts: _Sizes) -> None:
        """The batch's counts, read: a table short of victims is an error; the free slots left and
        the map's books kept."""
        short = np.flatnonzero(counts.victims < counts.need)
        if short.size:
            t = int(short[0])
            raise RuntimeError(
                f"table {t}: need {counts.need[t]} victims but only {counts.have[t]} slots are "
                "unheld (the capacity check should have refused this)"
            )
        self.free = np.diff(counts.free_at) - counts.take
        reused, failed = (int(c) for c in counts.stats)
        live = len(self.slot_ids) - int(self.free.sum())
        self.map.settle(live, int(counts.victim_at[-1]), reused, failed, self.slot_ids, self.slot_numbers)

    def _cut(self, b, counts, lookups, unique, slots, hit, miss_ids, miss_slots, lookup_slots, held, *victims):
        """One TablePlan per table: views of the batch's arrays, cut at the bounds read."""
        victim_ids, victim_slots, written_ids, written_slots = victims
        lookup_at = np.concatenate([[0], np.cumsum(lookups)])  # [T+1] each table's lookups
        plans = []
        for t in range(self.tables):
            cut = lambda starts: slice(int(starts[t]), int(starts[t + 1]))
            rows, misses, vs, written = (
                cut(counts.unique_at),
                cut(counts.miss_at),
                cut(counts.victim_at),
                cut(counts.written_at),
            )
            wait = int(self._last_write_back[t])
            if written.stop > written.start:
                self._last_write_back[t] = b
            decision = PlanDecision(
                b, t, unique[rows], slots[rows], hit[rows], victim_ids[vs], victim_slots[vs], held[cut(counts.held_at)]
            )
            plans.append(
                TablePlan(
                    decision,
                    lookup_slots[cut(lookup_at)],
                    miss_ids[misses],
                    miss_slots[misses],
                    written_ids[written],
                    written_slots[written],
                    wait,
                )
            )
        return plans


_BOUNDS = ("unique_at", "miss_at", "free_at", "held_at", "need", "take")  # table_bounds' outputs

__all__ = ["DevicePlans"]
