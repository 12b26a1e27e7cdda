"""The kernels as Python functions, launched from their `.cu` source (host build or CuPy).

`LaunchedEngine` has the same methods, arguments and results as `twin.TwinEngine`; each method
allocates the outputs, picks the grid (one thread per item, `threads_per_block` per block) and
launches the kernel through a launcher: `HostLauncher` (g++ build, ctypes, NumPy arrays) or
`CupyLauncher` (NVRTC, CuPy arrays). Inputs must already be C-contiguous arrays of the right
dtype (int64 ids/slots/offsets, float32 rows); `scratchkit.kernels.scratchpad` checks and converts them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..device_work import launched, waited

ROW_LANES = 32  # threads per row in rows.cu (SK_ROW_LANES)


@dataclass(frozen=True)
class CoalescingPlan:
    """Which lookups feed which row, so one kernel thread can sum a row's gradient in order.

    sorted_bags  [nnz]  bag of each lookup, lookups sorted by (slot, position in the batch)
    unique_slots [U]    distinct slots, ascending
    run_starts   [U+1]  lookups of unique_slots[u] are sorted_bags[run_starts[u]:run_starts[u+1]]
    """

    sorted_bags: object
    unique_slots: object
    run_starts: object

    @classmethod
    def build(cls, xp, slots, offsets) -> "CoalescingPlan":
        nnz = slots.size
        positions = xp.arange(nnz, dtype=xp.int64)
        bag_of = xp.searchsorted(offsets, positions, side="right") - 1  # [nnz]
        # Sort by (slot, position). The composite key is unique, so any sort (CuPy's too) keeps
        # the duplicates of a slot in lookup order.
        order = xp.argsort(slots * nnz + positions)
        sorted_slots = slots[order]
        waited("coalescing plan sizes")  # flatnonzero's length: only the device knows it (tbe.cu needs none)
        starts = xp.flatnonzero(sorted_slots[1:] != sorted_slots[:-1]) + 1
        run_starts = xp.concatenate([xp.zeros(1, xp.int64), starts.astype(xp.int64), xp.full(1, nnz, xp.int64)])
        unique_slots = xp.ascontiguousarray(sorted_slots[run_starts[:-1]])
        return cls(xp.ascontiguousarray(bag_of[order]), unique_slots, run_starts)


class LaunchedEngine:
    def __init__(self, name: str, launcher, xp, threads_per_block: int = 256):
        self.name = name
        self.launcher = launcher
        self.xp = xp
        self.threads_per_block = threads_per_block
        self._addresses = {}  # tables' addresses -> the device array holding them

    def _launch(self, kernel: str, num_threads: int, *args) -> None:
        if num_threads == 0:
            return  # CUDA refuses an empty grid; nothing to do anyway
        grid = -(-num_threads // self.threads_per_block)
        launched(kernel)
        self.launcher.launch(kernel, grid, self.threads_per_block, args)

    def addresses(self, arrays):
        """[T] int64: where each array's data starts, in the engine's memory, for a kernel that
        takes one pointer per table. Kept per set of arrays (a trainer's tables stay where they
        are), so a step copies no addresses to the device."""
        key = tuple(a.ctypes.data if self.xp is np else a.data.ptr for a in arrays)
        if key not in self._addresses:
            if len(self._addresses) >= 64:  # tables made and dropped (a scratchpad's reset)
                self._addresses.clear()
            self._addresses[key] = self.xp.asarray(np.array(key, dtype=np.int64))
        return self._addresses[key]

    # ---- hash map
    def hashmap_query(self, keys, values, ids):
        out = self.xp.empty(ids.size, dtype=self.xp.int64)
        self._launch("hashmap_query", ids.size, keys, values, keys.size - 1, ids, ids.size, out)
        return out

    def hashmap_insert(self, keys, values, ids, slots) -> tuple[int, int]:
        stats = self.xp.zeros(2, dtype=self.xp.uint64)  # [tombstones reused, ids with no bucket]
        self._launch("hashmap_insert", ids.size, keys, values, keys.size - 1, ids, slots, ids.size, stats)
        reused, failed = (int(v) for v in stats.tolist())
        return reused, failed

    def hashmap_erase(self, keys, values, ids):
        out = self.xp.empty(ids.size, dtype=self.xp.int64)
        self._launch("hashmap_erase", ids.size, keys, values, keys.size - 1, ids, ids.size, out)
        return out

    # ---- rows
    def gather_rows(self, table, slots):
        width = table.shape[1]
        out = self.xp.empty((slots.size, width), dtype=self.xp.float32)  # [n, width]
        self._launch("gather_rows", slots.size * ROW_LANES, table, width, slots, slots.size, out)
        return out

    def scatter_rows(self, table, slots, src) -> None:
        width = table.shape[1]
        self._launch("scatter_rows", slots.size * ROW_LANES, table, width, slots, slots.size, src)

    # ---- embedding bag
    def embedding_bag_forward(self, rows, slots, offsets):
        num_bags, dim = offsets.size, rows.shape[1]
        pooled = self.xp.empty((num_bags, dim), dtype=self.xp.float32)  # [num_bags, dim]
        self._launch("embedding_bag_forward", num_bags * dim, rows, dim, slots, slots.size, offsets, num_bags, pooled)
        return pooled

    def embedding_bag_backward_sgd(self, rows, slots, offsets, grad_pooled, lr) -> None:
        if slots.size == 0:
            return
        plan = CoalescingPlan.build(self.xp, slots, offsets)
        num_unique, dim = plan.unique_slots.size, rows.shape[1]
        self._launch(
            "embedding_bag_backward_sgd",
            num_unique * dim,
            rows,
            dim,
            grad_pooled,
            plan.sorted_bags,
            plan.unique_slots,
            plan.run_starts,
            num_unique,
            lr,
        )

    def embedding_bag_backward_rowwise_adagrad(self, rows, state, slots, offsets, grad_pooled, lr, eps) -> None:
        if slots.size == 0:
            return
        plan = CoalescingPlan.build(self.xp, slots, offsets)
        num_unique, dim = plan.unique_slots.size, rows.shape[1]
        self._launch(
            "embedding_bag_backward_rowwise_adagrad",
            num_unique,
            rows,
            state,
            dim,
            grad_pooled,
            plan.sorted_bags,
            plan.unique_slots,
            plan.run_starts,
            num_unique,
            lr,
            eps,
        )

    def embedding_bag_backward_adagrad(self, rows, state, slots, offsets, grad_pooled, lr, eps) -> None:
        if slots.size == 0:
            return
        plan = CoalescingPlan.build(self.xp, slots, offsets)
        num_unique, dim = plan.unique_slots.size, rows.shape[1]
        self._launch(
            "embedding_bag_backward_adagrad",
            num_unique * dim,
            rows,
            state,
            dim,
            grad_pooled,
            plan.sorted_bags,
            plan.unique_slots,
            plan.run_starts,
            num_unique,
            lr,
            eps,
        )

    # ---- the device planner's fused steps (plan.cu)
    def to_local(self, values, where, table_of_slot, starts):
        out = self.xp.empty(values.size, dtype=self.xp.int64)
        self._launch("to_local", values.size, values, where, table_of_slot, starts, values.size, out)
        return out

    def assign_miss_slots(self, miss_at, take, free_at, victim_at, free_slots, victims, n: int):
        out = self.xp.empty(n, dtype=self.xp.int64)
        self._launch("assign_miss_slots", n, miss_at, take, free_at, victim_at, take.size, free_slots, victims, n, out)
        return out

    def victim_keys(self, candidates, table_of_slot, urgency, last_trained, levels, batch, slots):
        out = self.xp.empty(candidates.size, dtype=self.xp.int64)
        self._launch(
            "victim_keys",
            candidates.size,
            candidates,
            table_of_slot,
            urgency,
            last_trained,
            levels,
            batch,
            slots,
            candidates.size,
            out,
        )
        return out

    # ---- table-batched embedding (tbe.cu): tables are lists of engine arrays, one per table
    def tbe_forward(self, tables, index, index_base, starts, offsets, pooled) -> None:
        num_bags, num_tables, dim = pooled.shape
        self._launch(
            "tbe_forward",
            num_bags * num_tables * dim,
            self.addresses(tables),
            dim,
            index,
            index_base,
            starts,
            offsets,
            num_tables,
            num_bags,
            pooled,
        )

    def _tbe_backward(self, kernel, per_lookup: int, tables, states, grad, sorted_keys, sorted_at, batch, rates):
        """Launch one of tbe.cu's backward kernels with `per_lookup` threads per sorted lookup.
        batch: (index, index_base, starts, offsets); rates: (lr,) or (lr, eps)."""
        num_bags, num_tables, dim = grad.shape
        n = sorted_keys.size
        pointers = (self.addresses(tables),) + (() if states is None else (self.addresses(states),))
        ahead = (*pointers, dim, grad, sorted_keys, sorted_at, n)
        self._launch(kernel, n * per_lookup, *ahead, *batch, num_tables, num_bags, *rates)

    def tbe_backward_sgd(self, tables, grad, sorted_keys, sorted_at, index, index_base, starts, offsets, lr) -> None:
        batch, dim = (index, index_base, starts, offsets), grad.shape[2]
        self._tbe_backward("tbe_backward_sgd", dim, tables, None, grad, sorted_keys, sorted_at, batch, (lr,))

    def tbe_backward_rowwise_adagrad(
        self, tables, states, grad, sorted_keys, sorted_at, index, index_base, starts, offsets, lr, eps
    ) -> None:
        batch = (index, index_base, starts, offsets)  # a thread per lookup: it sums its row's columns
        kernel = "tbe_backward_rowwise_adagrad"
        self._tbe_backward(kernel, 1, tables, states, grad, sorted_keys, sorted_at, batch, (lr, eps))

    def tbe_backward_adagrad(
        self, tables, states, grad, sorted_keys, sorted_at, index, index_base, starts, offsets, lr, eps
    ) -> None:
        batch, dim = (index, index_base, starts, offsets), grad.shape[2]
        kernel = "tbe_backward_adagrad"
        self._tbe_backward(kernel, dim, tables, states, grad, sorted_keys, sorted_at, batch, (lr, eps))

    def tbe_count_hits(self, slot_ids, index, keys, key_base, starts, hits) -> None:
        num_tables, n = starts.size - 1, index.size
        self._launch("tbe_count_hits", n, self.addresses(slot_ids), index, keys, key_base, starts, num_tables, n, hits)
