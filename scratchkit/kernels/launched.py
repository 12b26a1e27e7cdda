"""The kernels as Python functions, launched from their `.cu` source (host build or CuPy).

`LaunchedEngine` has the same methods, arguments and results as `twin.TwinEngine`; each method
allocates the outputs, picks the grid (one thread per item, `threads_per_block` per block) and
launches the kernel through a launcher: `HostLauncher` (g++ build, ctypes, NumPy arrays) or
`CupyLauncher` (NVRTC, CuPy arrays). Inputs must already be C-contiguous arrays of the right
dtype (int64 ids/slots/offsets, float32 rows); `scratchkit.kernels.scratchpad` checks and converts them.
"""

from __future__ import annotations

from dataclasses import dataclass

from scratchkit.device_work import launched, waited
from scratchkit.kernels.launched_plan import PlanKernels
from scratchkit.kernels.launched_tbe import TbeKernels

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


class LaunchedEngine(PlanKernels, TbeKernels):
    def __init__(self, name: str, launcher, xp, threads_per_block: int = 256):
        self.name = name
        self.launcher = launcher
        self.xp = xp
        self.threads_per_block = threads_per_block
        self._addresses = {}  # for tbe.cu's kernels: tables' addresses -> their device array

    def _launch(self, kernel: str, num_threads: int, *args) -> None:
        if num_threads == 0:
            return  # CUDA refuses an empty grid; nothing to do anyway
        grid = -(-num_threads // self.threads_per_block)
        launched(kernel)
        self.launcher.launch(kernel, grid, self.threads_per_block, args)

    # ---- hash map
    def hashmap_query(self, keys, values, ids):
        out = self.xp.empty(ids.size, dtype=self.xp.int64)
        self._launch("hashmap_query", ids.size, keys, values, keys.size - 1, ids, ids.size, out)
        return out

    def hashmap_insert(self, keys, values, ids, slots, stats=None) -> tuple[int, int] | None:
        """(tombstones reused, ids with no bucket), read back now (a wait); given `stats` ([2]
        uint64 on the device), added there instead, for the caller to read when it next waits."""
        counts = self.xp.zeros(2, dtype=self.xp.uint64) if stats is None else stats
        self._launch("hashmap_insert", ids.size, keys, values, keys.size - 1, ids, slots, ids.size, counts)
        if stats is not None:
            return None
        waited("hashmap_insert counts")
        reused, failed = (int(v) for v in counts.tolist())
        return reused, failed

    def hashmap_stamp(self, keys, values, ids, value: int, out) -> None:
        self._launch("hashmap_stamp", ids.size, keys, values, keys.size - 1, ids, ids.size, value, out)

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
