"""ScratchPipe's Plan for one table as a C++ loop (plan_loop.c), with the NumPy twin's interface.

`NativeTablePlanner` makes exactly the decisions of `plan.TablePlanner` (the tests compare every
array of every plan) and holds its state in NumPy arrays that the loop updates in place. Each call
releases Python's lock while the loop runs, so `PlanAhead` plans a batch's tables on several
threads at once (`PlanSetup.threads`). Built with g++ on first use (scratchkit/native.py); where
no compiler is found, `native_planner_available()` is False and the twin plans.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from scratchkit.config import VictimPolicy
from scratchkit.native import I64P, U8P, CLibrary, i64, u8
from scratchkit.scratchpipe.events import PlanDecision
from scratchkit.scratchpipe.plan import TablePlan

_VOID, _I64 = ctypes.c_void_p, ctypes.c_int64
_SIGNATURES = {
    "sk_plan_new": (_VOID, [_I64] * 6 + [I64P, U8P, I64P]),
    "sk_plan_free": (None, [_VOID]),
    "sk_plan_see": (_I64, [_VOID, _I64, I64P, _I64]),
    "sk_plan_shortfall": (_I64, [_VOID, _I64]),
    "sk_plan_batch": (_I64, [_VOID, _I64, _I64, I64P, I64P, U8P, I64P, I64P, I64P, I64P, I64P, U8P,
                             I64P, I64P]),
    "sk_plan_retire": (None, [_VOID, _I64]),
}
LOOP = CLibrary("plan", Path(__file__).resolve().parent, ("plan_loop.c",), _SIGNATURES)


def native_planner_available() -> bool:
    """Whether the C++ planner can run here (a compiler, or a cached build)."""
    return LOOP.available()


class NativeTablePlanner:
    """One table's planner, in plan_loop.c. Same arguments and decisions as `TablePlanner`, whose
    map is a `SlotMap`: here the same arrays, given whole (`slot_ids`, `dirty`, `last_trained`) and
    copied into the loop's own records."""

    def __init__(self, table: int, num_rows: int, slot_ids: np.ndarray, dirty: np.ndarray,
                 last_trained: np.ndarray, policy: VictimPolicy, holds: bool, record_held: bool,
                 ring: int):
        if policy not in (VictimPolicy.FURTHEST, VictimPolicy.LRU):
            raise ValueError(f"ScratchPipe's planner chooses victims by furthest next use or LRU, "
                             f"not {policy.value!r}")
        self.table, self.capacity, self.record_held = table, len(slot_ids), record_held
        if num_rows >= 2**31 or self.capacity >= 2**31:
            raise ValueError(f"table {table}: the C++ planner numbers rows and slots with int32; "
                             f"{num_rows} rows, {self.capacity} slots are too many (use the twin)")
        slot_ids = np.ascontiguousarray(slot_ids, dtype=np.int64)          # [capacity], copied in
        dirty = np.ascontiguousarray(dirty, dtype=np.uint8)                 # [capacity]
        last_trained = np.ascontiguousarray(last_trained, dtype=np.int64)   # [capacity]
        self._lib = LOOP.library
        self._handle = self._lib.sk_plan_new(
            num_rows, self.capacity, ring, int(holds), int(policy is VictimPolicy.FURTHEST),
            int(record_held), i64(slot_ids), u8(dirty), i64(last_trained))
        self._lookups: dict[int, int] = {}   # batch -> its number of lookups

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            self._lib.sk_plan_free(handle)

    def see(self, k: int, ids: np.ndarray) -> None:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if self._lib.sk_plan_see(self._handle, k, i64(ids), ids.size) < 0:
            raise ValueError(f"table {self.table}, batch {k}: too many distinct ids for the C++ "
                             "planner's ring (lower the horizon, or use the twin: native_planner=False)")
        self._lookups[k] = ids.size

    def shortfall(self, b: int) -> int:
        return int(self._lib.sk_plan_shortfall(self._handle, b))

    def plan(self, batch_index: int, stop: int) -> TablePlan:
        n = self._lookups.pop(batch_index)
        unique, slots, lookup_slots = (np.empty(n, np.int64) for _ in range(3))   # u <= n
        miss_ids, miss_slots, victim_ids, victim_slots = (np.empty(n, np.int64) for _ in range(4))
        hit, victim_dirty = np.empty(n, np.uint8), np.empty(n, np.uint8)
        held_before = np.empty(self.capacity if self.record_held else 0, np.int64)
        counts = np.zeros(5, np.int64)
        failed = self._lib.sk_plan_batch(
            self._handle, batch_index, stop, i64(unique), i64(slots), u8(hit), i64(lookup_slots),
            i64(miss_ids), i64(miss_slots), i64(victim_ids), i64(victim_slots), u8(victim_dirty),
            i64(held_before), i64(counts))
        if failed:
            raise RuntimeError(f"table {self.table}: need {counts[2]} victims but only {counts[0]} "
                               "slots are unheld (the capacity check should have refused this)")
        u, m, v, h, wait = (int(c) for c in counts)
        dirty = victim_dirty[:v].astype(bool)
        decision = PlanDecision(batch_index, self.table, unique[:u], slots[:u], hit[:u].astype(bool),
                                victim_ids[:v], victim_slots[:v], held_before[:h])
        return TablePlan(decision, lookup_slots, miss_ids[:m], miss_slots[:m], victim_ids[:v][dirty],
                         victim_slots[:v][dirty], wait)

    def retire(self, k: int) -> None:
        self._lib.sk_plan_retire(self._handle, k)
