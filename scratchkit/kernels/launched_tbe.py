"""tbe.cu's kernels as Python functions, for `LaunchedEngine` (launched.py): the same arguments as
their twins (twin_tbe.py, which says what each computes and how the batch is laid out). Tables are
lists of engine arrays, one per table, passed to the kernels as an array of their addresses
(`addresses`, kept while the tables stay where they are). Each method launches one kernel and
returns without waiting.
"""

from __future__ import annotations

import numpy as np


class TbeKernels:
    """The table-batched embedding's kernels; the engine supplies `xp`, `_launch` and
    `_addresses` (a dict: tables' addresses -> the device array holding them)."""

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
