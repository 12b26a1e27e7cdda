"""ScratchPipe's Plan on the device: the host planner's decisions, for every table at once.

The host planner (plan.py, and its C++ loop plan_loop.cpp) keeps each table's id -> slot map in a
host array and works id by id on the CPU. On a GPU server that is the bound: the host stages of a
large, low-locality model need ~150 core-ms a step against gpu-only's ~2 ms (docs/costmodel.md).
This planner keeps every per-id and per-slot array on the device and plans a batch as a fixed
number of whole-array operations, however many tables there are (on a GPU each is a kernel, and
a kernel's launch costs about what a small one runs for, so the count matters):

    working set   unique of every table's ids at once -> U_b [U] sorted, inverse [N]   (a sort)
    hits, misses  one probe of the hash map (kernels/hashmap.cu) for U_b
    free slots    one pass over the slots; each table's share found by a binary search
    victims       one key per candidate slot, one sort of the keys, each table's first few taken
    the map       erase the victims' ids, insert the misses'                   (hashmap.cu)
    remap         slots[inverse]                                                (a gather)

The tables share one id space and one slot space: table t's id i is the global id
i + row_offsets[t], its slot s the global slot s + slot_offsets[t]. Sorted global ids are grouped
by table, so are ascending global slots: every "per table" below is a contiguous range, found by
`searchsorted` on the offsets, and no loop runs over the tables except to cut the result into
one TablePlan each (views, no copies).

Its decisions are plan.TablePlanner's exactly (a test holds them array for array): the same free
slots first, ascending; the same victims, least urgent (furthest next use within the horizon),
then least recently trained, then lowest slot. One difference: `wait_for_write_back`
(invariant 3). The host planner names the latest batch that evicted one of b's misses, from an
array over every row of the table; this one keeps nothing per row and names the latest earlier
batch that wrote back any row of the table, no earlier than the host planner's batch: Collect(b)
may wait a little longer, never less.

`xp` is the engine's array module: NumPy on a CPU (the hash map by the host build of the `.cu`, or
its NumPy twin), CuPy on a GPU. Holds are a batch number per slot, not a count: a slot is held
while the last batch that planned it is in flight (b-D .. b-1), which is what the host planner's
hold and release amount to, without a release pass.
"""

from __future__ import annotations

import numpy as np

from scratchkit.config import VictimPolicy
from scratchkit.kernels.engine import OwnStream
from scratchkit.scratchpipe.device_map import DeviceSlotMap
from scratchkit.scratchpipe.events import PlanDecision
from scratchkit.embedding.working_sets import WorkingSets
from scratchkit.scratchpipe.plan import TablePlan

NEVER = -(2**40)  # last_planned of a slot no batch of this call has planned


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
        self.engine = engine  # the hash map's kernels and plan.cu's fused steps
        self.stream = OwnStream(xp)  # on a GPU the planner's kernels run beside Train's
        self.depth, self.policy, self.holds, self.record = setup.depth, setup.policy, setup.holds, setup.record_events
        self.row_offsets = np.concatenate([[0], np.cumsum(setup.table_sizes)]).astype(np.int64)  # [T+1]
        self.slot_offsets = np.concatenate([[0], np.cumsum(setup.capacities)]).astype(np.int64)  # [T+1]
        self.row_starts, self.slot_starts = xp.asarray(self.row_offsets), xp.asarray(self.slot_offsets)
        tables = len(setup.table_sizes)
        # the row stores as the call starts (on a GPU their device arrays: one copy, once a call)
        joined = lambda arrays, dtype: np.concatenate([_host(xp, a) for a in arrays] + [np.empty(0, dtype)])
        ids = [np.where(s >= 0, s + o, -1) for s, o in zip([_host(xp, a) for a in setup.slot_ids], self.row_offsets)]
        # what the slots will hold once the plans so far are inserted (the row stores lag behind)
        self.slot_ids = xp.asarray(joined(ids, np.int64))  # [S] global id
        self.dirty = xp.asarray(joined(setup.dirty, bool))  # [S]
        self.last_trained = xp.asarray(joined(setup.last_trained, np.int64))  # [S]
        self.last_planned = xp.full(len(self.slot_ids), NEVER, dtype=xp.int64)  # [S]
        self.table_of_slot = xp.asarray(np.repeat(np.arange(tables), setup.capacities))  # [S]
        self.map = DeviceSlotMap(len(self.slot_ids), engine)
        resident = xp.flatnonzero(self.slot_ids >= 0)
        self.map.insert(xp.ascontiguousarray(self.slot_ids[resident]), resident)
        self._unique = WorkingSets(int(self.row_offsets[-1])) if xp is np else None
        self._seen: dict[int, tuple] = {}  # batch -> (unique [U], inverse [N], lookups per table)
        self._planned: dict[int, object] = {}  # batch -> its global slots [U], until retired
        self._last_write_back = np.full(tables, -1, dtype=np.int64)  # per table (module note)

    # --- the interface PlanAhead drives -------------------------------------------------------------
    def see(self, k: int, batch) -> None:
        """Batch k's ids, every table's as one array of global ids: its working set."""
        ids = np.concatenate([i + o for i, o in zip(batch.ids, self.row_offsets)])  # [N] host
        with self.stream:
            unique, inverse = (
                self._unique(ids)
                if self._unique is not None
                else self.xp.unique(self.xp.asarray(ids), return_inverse=True)
            )
        self._seen[k] = (unique, inverse, [len(i) for i in batch.ids])

    def shortfall(self, b: int) -> int:
        """The most victims Plan(b) needs in one table (<= 0: none)."""
        with self.stream:
            misses = self._seen[b][0][self.map.query(self._seen[b][0]) < 0]
            return int(self._short(misses, self.xp.flatnonzero(self.slot_ids < 0))[2].max())

    def plan(self, b: int, stop: int) -> list[TablePlan]:
        """Plan batch b (seen); batches b+1 .. stop-1 (seen when it must evict) are the look-ahead.
        Its arrays are computed when it returns (the stream finished): other threads read them."""
        with self.stream:
            plans = self._plan(b, stop)
        self.stream.finish()
        return plans

    def _plan(self, b: int, stop: int) -> list[TablePlan]:
        xp = self.xp
        unique, inverse, lookups = self._seen[b]
        for k in [k for k in self._seen if k < b]:
            del self._seen[k]
        slots = self.map.query(unique)  # [U] global, -1 = miss
        hit = slots >= 0
        miss_ids = xp.ascontiguousarray(unique[~hit])  # [M] sorted: by table
        held = self._held_mask(b)
        free = xp.flatnonzero(self.slot_ids < 0)  # [F] ascending: by table
        miss_at, free_at, short = self._short(miss_ids, free)
        victims = xp.empty(0, dtype=xp.int64)  # [V] ascending: by table
        if short.max(initial=0) > 0:
            victims = self._choose_victims(np.maximum(short, 0), slots[hit], held, b, stop)
        victim_ids, dirty_victims = self.slot_ids[victims], self.dirty[victims]
        self.slot_ids[victims] = -1
        self.map.erase(victim_ids, self.slot_ids)
        miss_slots = self._miss_slots(miss_at, free, free_at, victims, np.maximum(short, 0))
        self.map.insert(miss_ids, miss_slots)
        self.slot_ids[miss_slots] = miss_ids
        self.dirty[miss_slots] = False  # they arrive clean
        slots[~hit] = miss_slots
        self.last_planned[slots] = b  # held until Train(b)
        self._planned[b] = slots
        held_before = xp.flatnonzero(held) if self.record else xp.empty(0, xp.int64)
        written = xp.flatnonzero(dirty_victims)  # [W] of the victims: Write-back's
        # every array in table-local ids and slots (one kernel each), then each table's part is a view
        local_ids = lambda ids, where: self.engine.to_local(ids, where, self.table_of_slot, self.row_starts)
        local = lambda where: self.engine.to_local(where, where, self.table_of_slot, self.slot_starts)
        unique_local, slots_local = local_ids(unique, slots), local(slots)
        victim_ids_local, victims_local = local_ids(victim_ids, victims), local(victims)
        miss_ids_local, miss_slots_local = local_ids(miss_ids, miss_slots), local(miss_slots)
        lookup_slots, held_local = slots_local[inverse], local(held_before)
        written_ids, written_slots = victim_ids_local[written], victims_local[written]
        cut = _Cut(self, unique, victims, held_before, victims[written])
        lookup_at = np.concatenate([[0], np.cumsum(lookups)])  # [T+1] each table's lookups
        plans = []
        for t in range(len(lookups)):
            rows, vs, hs, ws = cut.range(t)
            misses = slice(int(miss_at[t]), int(miss_at[t + 1]))
            wait = int(self._last_write_back[t])
            if ws.stop > ws.start:
                self._last_write_back[t] = b
            decision = PlanDecision(
                b,
                t,
                unique_local[rows],
                slots_local[rows],
                hit[rows],
                victim_ids_local[vs],
                victims_local[vs],
                held_local[hs],
            )
            plans.append(
                TablePlan(
                    decision,
                    lookup_slots[lookup_at[t] : lookup_at[t + 1]],
                    miss_ids_local[misses],
                    miss_slots_local[misses],
                    written_ids[ws],
                    written_slots[ws],
                    wait,
                )
            )
        return plans

    def retire(self, k: int) -> None:
        """Train(k) has finished by the time the plan being made is used: its slots are dirty and
        clocked (their holds end by themselves: `_held_mask`)."""
        trained = self._planned.pop(k)
        with self.stream:
            self.dirty[trained] = True
            self.last_trained[trained] = k

    # --- the steps of Plan ------------------------------------------------------------------------
    def _short(self, miss_ids, free) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(where each table's misses start [T+1], where its free slots start [T+1], its
        shortfall [T]), host arrays: one small copy from the device."""
        xp = self.xp
        bounds = _host(
            xp, xp.concatenate([xp.searchsorted(miss_ids, self.row_starts), xp.searchsorted(free, self.slot_starts)])
        )
        miss_at, free_at = bounds[: len(self.row_offsets)], bounds[len(self.row_offsets) :]
        return miss_at, free_at, np.diff(miss_at) - np.diff(free_at)

    def _held_mask(self, b: int):
        """[S] bool: slots a batch in flight (b-D .. b-1) planned. All False without holds."""
        if not self.holds:
            return self.xp.zeros(len(self.slot_ids), dtype=bool)
        return self.last_planned >= b - self.depth

    def _miss_slots(self, miss_at, free, free_at, victims, short):
        """[M] each miss's slot: per table, its free slots first, ascending, then its victims
        (plan.cu's assign_miss_slots; the tables' bounds cross to the device in one copy)."""
        take = np.append(np.diff(miss_at) - short, 0)  # [T+1] free slots each table takes
        victim_at = np.concatenate([[0], np.cumsum(short)])  # [T+1] short: victims per table
        bounds = self.xp.asarray(np.stack([miss_at, take, free_at, victim_at]).astype(np.int64))
        return self.engine.assign_miss_slots(
            bounds[0], bounds[1, :-1], bounds[2], bounds[3], free, victims, int(miss_at[-1])
        )

    def _choose_victims(self, short: np.ndarray, hit_slots, held, b: int, stop: int):
        """[V] per table t the short[t] unheld slots first in the order (urgency, last trained,
        slot), all tables' in ascending slot order. One int64 key per candidate orders the table
        and all three at once (table < T, urgency <= horizon, last trained in [-1, b), slot < S:
        far below 2^63), so one sort serves every table."""
        xp = self.xp
        candidate = (self.slot_ids >= 0) & ~held
        candidate[hit_slots] = False  # never evict this batch's own hits
        candidate &= xp.asarray(short > 0)[self.table_of_slot]
        slots = xp.flatnonzero(candidate)  # [C] ascending: by table
        have = _host(xp, xp.bincount(self.table_of_slot[slots], minlength=len(short)))
        if (have < short).any():
            t = int(np.flatnonzero(have < short)[0])
            raise RuntimeError(
                f"table {t}: need {short[t]} victims but only {have[t]} slots are "
                "unheld (the capacity check should have refused this)"
            )
        urgency = (
            self._urgency(b, stop)
            if self.policy is VictimPolicy.FURTHEST
            else xp.zeros(len(self.slot_ids), dtype=xp.int64)
        )
        levels = stop - b + 1  # urgency in [0, stop-1-b]
        keys = self.engine.victim_keys(
            slots, self.table_of_slot, urgency, self.last_trained, levels, b, len(self.slot_ids)
        )
        # the keys are distinct and end in the slot (key % S): sorting the keys alone orders the
        # slots, cheaper than an argsort and the gathers through its permutation
        ordered = xp.sort(keys) % len(self.slot_ids)  # [C] by table, then as evicted
        table = self.table_of_slot[ordered]
        first = xp.asarray(np.concatenate([[0], np.cumsum(have)[:-1]]))  # [T] where each table starts
        rank = xp.arange(len(slots)) - first[table]
        return xp.sort(ordered[rank < xp.asarray(short)[table]])

    def _urgency(self, b: int, stop: int):
        """[S] how soon each slot's id is needed in b+1 .. stop-1: H+1-k for batch b+k (H batches
        seen), 0 when none needs it (lookahead.NextUses, by slot through the map)."""
        xp = self.xp
        urgency = xp.zeros(len(self.slot_ids) + 1, dtype=xp.int64)  # [S+1]: -1 (absent) lands on the last
        seen = stop - 1 - b
        for k in range(seen, 0, -1):  # nearest last, so it wins
            urgency[self.map.query(self._seen[b + k][0])] = seen + 1 - k
        return urgency[:-1]  # a view: contiguous


class _Cut:
    """Where each table's part of Plan(b)'s arrays lies: one small copy of every boundary."""

    def __init__(self, plans: DevicePlans, unique, victims, held_before, written):
        xp = plans.xp
        self.at = _host(
            xp,
            xp.concatenate(
                [
                    xp.searchsorted(unique, plans.row_starts),
                    xp.searchsorted(victims, plans.slot_starts),
                    xp.searchsorted(held_before, plans.slot_starts),
                    xp.searchsorted(written, plans.slot_starts),
                ]
            ),
        ).reshape(4, -1)

    def range(self, t: int) -> tuple[slice, slice, slice, slice]:
        """Table t's slices of the working set, the victims, the held slots, the written victims."""
        return tuple(slice(int(a[t]), int(a[t + 1])) for a in self.at)


def _host(xp, array) -> np.ndarray:
    return array if xp is np else xp.asnumpy(array)


__all__ = ["DevicePlans"]
