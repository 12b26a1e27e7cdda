"""plan.cu's kernels as Python functions, for `LaunchedEngine` (launched.py): same arguments and
results as their twins (twin_plan.py, which says what each computes). Each allocates its outputs,
launches one kernel over its items and returns without waiting: `count`s and outputs stay on the
device (what the planner reads, it reads once a batch: scratchpipe/device_plan.py).

Arrays are int64 engine arrays, `dirty` bool; scalars are Python ints.
"""

from __future__ import annotations


class PlanKernels:
    """The device planner's kernels; the engine supplies `xp` and `_launch`."""

    def _ints(self, n: int):
        return self.xp.empty(n, dtype=self.xp.int64)

    # ---- the working set
    def first_of_runs(self, ids, order):
        flags = self._ints(ids.size)
        self._launch("first_of_runs", ids.size, ids, order, ids.size, flags)
        return flags

    def working_set(self, ids, order, pos):
        unique, inverse = self._ints(ids.size), self._ints(ids.size)
        self._launch("working_set", ids.size, ids, order, pos, ids.size, unique, inverse)
        return unique, inverse

    def lower_bounds(self, ordered, values, out) -> None:
        self._launch("lower_bounds", values.size, ordered, ordered.size, values, values.size, out)

    # ---- flags and compaction
    def in_range(self, values, low: int, high: int):
        flags = self._ints(values.size)
        self._launch("in_range", values.size, values, values.size, low, high, flags)
        return flags

    def compact(self, pos, values):
        out = self._ints(values.size)
        self._launch("compact", values.size, pos, values, values.size, out)
        return out

    def counts_at(self, pos, at, out) -> None:
        self._launch("counts_at", at.size, pos, at, at.size, out)

    # ---- a batch's plan
    def split_hits(self, slots, count, batch: int, hit_stamp):
        miss_flags = self._ints(slots.size)
        self._launch("split_hits", slots.size, slots, count, slots.size, batch, hit_stamp, miss_flags)
        return miss_flags

    def table_bounds(
        self, unique_at, miss_pos, free_pos, held_pos, slot_starts, unique_out, miss_at, free_at, held_at, need, take
    ) -> None:
        tables = need.size
        self._launch(
            "table_bounds",
            tables + 1,
            unique_at,
            miss_pos,
            free_pos,
            held_pos,
            slot_starts,
            tables,
            unique_out,
            miss_at,
            free_at,
            held_at,
            need,
            take,
        )

    def victim_keys(
        self, slot_ids, last_planned, hit_stamp, table_of_slot, need, urgency, last_trained, batch, held_since, levels
    ):
        slots = slot_ids.size
        keys = self._ints(slots)
        self._launch(
            "victim_keys",
            slots,
            slot_ids,
            last_planned,
            hit_stamp,
            table_of_slot,
            need,
            urgency,
            last_trained,
            batch,
            held_since,
            levels,
            slots,
            keys,
        )
        return keys

    def victims_per_table(self, keys, need, span: int, first, have, count) -> None:
        self._launch("victims_per_table", need.size, keys, keys.size, need, need.size, span, first, have, count)

    def pick_victims(self, keys, table_of_slot, first, count, chosen) -> None:
        self._launch("pick_victims", keys.size, keys, keys.size, table_of_slot, first, count, chosen)

    def evict(self, victims, count, slot_ids, dirty):
        victim_ids, written = self._ints(victims.size), self._ints(victims.size)
        self._launch("evict", victims.size, victims, count, victims.size, slot_ids, dirty, victim_ids, written)
        return victim_ids, written

    def assign_miss_slots(self, miss_at, take, free_at, victim_at, free_slots, victims, n: int):
        out = self._ints(n)
        self._launch("assign_miss_slots", n, miss_at, take, free_at, victim_at, take.size, free_slots, victims, n, out)
        return out

    def place(self, unique, count, miss_pos, miss_slots, batch: int, slots, slot_ids, dirty, last_planned):
        hit = self.xp.empty(slots.size, dtype=self.xp.bool_)
        n = slots.size
        self._launch(
            "place", n, unique, count, miss_pos, miss_slots, n, batch, slots, hit, slot_ids, dirty, last_planned
        )
        return hit

    def mark_trained(self, slots, batch: int, dirty, last_trained) -> None:
        self._launch("mark_trained", slots.size, slots, slots.size, batch, dirty, last_trained)

    def to_local(self, ids, slots, count, table_of_slot, row_starts, slot_starts):
        ids_out, slots_out = self._ints(ids.size), self._ints(ids.size)
        self._launch(
            "to_local",
            ids.size,
            ids,
            slots,
            count,
            ids.size,
            table_of_slot,
            row_starts,
            slot_starts,
            ids_out,
            slots_out,
        )
        return ids_out, slots_out

    def to_global(self, ids, table_of_slot, row_starts):
        out = self._ints(ids.size)
        self._launch("to_global", ids.size, ids, table_of_slot, row_starts, ids.size, out)
        return out

    def gather_ids(self, values, index):
        out = self._ints(index.size)
        self._launch("gather_ids", index.size, values, index, index.size, out)
        return out
