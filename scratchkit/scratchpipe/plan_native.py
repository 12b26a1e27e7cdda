"""ScratchPipe's Plan as C++ loops: plan_loop.cpp plans one table (or one stripe of it), and
plan_group.cpp runs every planner of a batch on a pool of threads, in one call per step.

`NativePlans` makes exactly the decisions of the NumPy twin (`TwinPlans` in plan_ahead.py over
`plan.TablePlanner`; tests/test_plan_native.py compares every array of every plan). Each call
releases Python's lock while the loops run. Built with g++ on first use (scratchkit/native.py);
where no compiler is found, `native_planner_available()` is False and the twin plans.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from scratchkit.config import VictimPolicy
from scratchkit.native import I64P, U8P, CLibrary, address_array, i64, u8
from scratchkit.scratchpipe.events import PlanDecision
from scratchkit.scratchpipe.plan import TablePlan
from scratchkit.scratchpipe.stripes import StripeOf, stripe_slots

_VOID, _I64 = ctypes.c_void_p, ctypes.c_int64
_PTRS = _VOID  # int64_t *const *: an address_array
_SIGNATURES = {
    "sk_plan_new": (_VOID, [_I64] * 9 + [I64P, U8P, I64P]),
    "sk_plan_free": (None, [_VOID]),
    "sk_group_new": (_VOID, [ctypes.POINTER(_VOID), _I64, _I64, _I64]),
    "sk_group_free": (None, [_VOID]),
    "sk_group_see": (_I64, [_VOID, _I64, _PTRS, I64P]),
    "sk_group_shortfall": (_I64, [_VOID, _I64]),
    "sk_group_plan": (_I64, [_VOID, _I64, _I64, I64P, I64P, _PTRS, I64P]),
    "sk_group_retire": (None, [_VOID, _I64]),
}
# sk_group_plan's ten arrays per table, in order: unique, slots, hit, miss ids, miss slots, victim
# ids, victim slots, victim dirty, held, lookup slots (plan_group.cpp)
_PLAN_ARRAYS = ("i64", "i64", "u8", "i64", "i64", "i64", "i64", "u8", "i64", "i64")
LOOP = CLibrary("plan", Path(__file__).resolve().parent, ("plan_loop.cpp", "plan_group.cpp"), _SIGNATURES)


def native_planner_available() -> bool:
    """Whether the C++ planner can run here (a compiler, or a cached build)."""
    return LOOP.available()


class NativePlans:
    """Every table's planners (`setup.stripes` per table) in plan_loop.cpp, run as one group
    (plan_group.cpp) on `setup.threads` threads: one call per batch and step. The same interface and
    decisions as `TwinPlans` (plan_ahead.py), the NumPy twin."""

    def __init__(self, setup):
        self.setup, self._lib = setup, LOOP.library
        handles = []
        try:
            for t, num_rows in enumerate(setup.table_sizes):
                for s, (offset, size) in enumerate(stripe_slots(setup.capacities[t], setup.stripes)):
                    handles.append(self._planner(t, num_rows, StripeOf(s, setup.stripes, offset), size))
        except Exception:
            for handle in handles:
                self._lib.sk_plan_free(handle)
            raise
        self._group = self._lib.sk_group_new(
            (_VOID * len(handles))(*handles), len(handles), setup.stripes, setup.threads
        )
        self._lookups: dict[int, list[int]] = {}  # batch -> lookups per table

    def _planner(self, t: int, num_rows: int, stripe: StripeOf, size: int):
        setup, mine = self.setup, slice(stripe.offset, stripe.offset + size)
        local_rows = stripe.local_rows(num_rows)
        if local_rows >= 2**31 or size >= 2**31:
            raise ValueError(
                f"table {t}: the C++ planner numbers rows and slots with int32; "
                f"{local_rows} rows, {size} slots a stripe are too many (use more "
                "plan_stripes, or the twin: native_planner=False)"
            )
        slot_ids = np.ascontiguousarray(setup.slot_ids[t][mine], dtype=np.int64)  # [size], copied in
        dirty = np.ascontiguousarray(setup.dirty[t][mine], dtype=np.uint8)
        clock = np.ascontiguousarray(setup.last_trained[t][mine], dtype=np.int64)
        ring = setup.depth + setup.horizon + 3  # every batch from the oldest in flight to the furthest seen
        handle = self._lib.sk_plan_new(
            local_rows,
            size,
            ring,
            int(setup.holds),
            int(setup.policy is VictimPolicy.FURTHEST),
            int(setup.record_events),
            stripe.stripe,
            stripe.stripes,
            stripe.offset,
            i64(slot_ids),
            u8(dirty),
            i64(clock),
        )
        if not handle:
            raise ValueError(
                f"table {t}: slots {stripe.offset}.. hold ids of another stripe "
                f"(the scratchpad was filled with a different number of plan stripes)"
            )
        return handle

    def __del__(self):
        group, self._group = getattr(self, "_group", None), None
        if group:
            self._lib.sk_group_free(group)

    def _where(self, t: int, s: int) -> str:
        return f"table {t}" + (f", stripe {s}" if self.setup.stripes > 1 else "")

    def see(self, k: int, batch) -> None:
        ids = [np.ascontiguousarray(i, dtype=np.int64) for i in batch.ids]
        failed = self._lib.sk_group_see(
            self._group, k, address_array(i.ctypes.data for i in ids), i64(np.array([i.size for i in ids], np.int64))
        )
        if failed:
            t, s = divmod(-1 - failed, self.setup.stripes)
            raise ValueError(
                f"{self._where(t, s)}, batch {k}: too many distinct ids for the C++ "
                "planner's ring (lower the horizon, or use the twin: native_planner=False)"
            )
        self._lookups[k] = [i.size for i in ids]

    def shortfall(self, b: int) -> int:
        return int(self._lib.sk_group_shortfall(self._group, b))

    def plan(self, b: int, stop: int) -> list[TablePlan]:
        n = self._lookups.pop(b)
        held = [c if self.setup.record_events else 0 for c in self.setup.capacities]
        # Per table ten arrays, sized for its lookups (held: for the slots), as sk_group_plan fills
        # them: views of one int64 and one uint8 block a table. Ten allocations and ten ctypes
        # pointers a table cost as long as a small batch's plan (~70 us a table). (Not one block a
        # batch: past glibc's 32 MiB mmap threshold each would be fresh pages, faulted in by the loop.)
        arrays, addresses = [], []
        for size, h in zip(n, held):
            words, flags = np.empty(7 * size + h, np.int64), np.empty(2 * size, np.uint8)
            at = {"i64": (words, words.ctypes.data, 8), "u8": (flags, flags.ctypes.data, 1)}
            used = {"i64": 0, "u8": 0}
            table = []
            for kind, length in zip(_PLAN_ARRAYS, (size,) * 8 + (h, size)):
                block, base, width = at[kind]
                table.append(block[used[kind] : used[kind] + length])
                addresses.append(base + width * used[kind])
                used[kind] += length
            arrays.append(table)
        counts = np.zeros(5 * len(n), np.int64)
        failed = self._lib.sk_group_plan(
            self._group,
            b,
            stop,
            i64(np.array(n, np.int64)),
            i64(np.array(held, np.int64)),
            address_array(addresses),
            i64(counts),
        )
        if failed:
            t, s = divmod(-1 - failed, self.setup.stripes)
            raise RuntimeError(
                f"{self._where(t, s)}: Plan({b}) needs more victims than unheld slots "
                "(the capacity check should have refused this)"
            )
        return [self._table_plan(b, t, table, counts[5 * t : 5 * t + 5]) for t, table in enumerate(arrays)]

    @staticmethod
    def _table_plan(b: int, t: int, arrays: list, counts) -> TablePlan:
        unique, slots, hit, miss_ids, miss_slots, victim_ids, victim_slots, victim_dirty, held, lookup_slots = arrays
        u, m, v, h, wait = (int(c) for c in counts)
        dirty = victim_dirty[:v].view(bool)  # the loop writes 0 or 1
        decision = PlanDecision(
            b, t, unique[:u], slots[:u], hit[:u].view(bool), victim_ids[:v], victim_slots[:v], held[:h]
        )
        return TablePlan(
            decision, lookup_slots, miss_ids[:m], miss_slots[:m], victim_ids[:v][dirty], victim_slots[:v][dirty], wait
        )

    def retire(self, k: int) -> None:
        self._lib.sk_group_retire(self._group, k)
