"""A batch source over arrays already in memory: your own NumPy arrays as batches.

(The real-format loaders stream to disk instead: `scratchkit/data/file_source.py`, same interface.)

Each sample has `num_dense` dense features, exactly one id per table (a bag of one, as in the
Criteo and MovieLens data) and a 0/1 label. Batch `i` is samples `[i*B, (i+1)*B)`, in file order;
the incomplete last batch is left out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from scratchkit.data.batch import Batch
from scratchkit.data.lines import positive_int
from scratchkit.data.report import LoadReport


def table_sizes_from(sizes: int | Sequence[int], num_tables: int) -> tuple[int, ...]:
    """One size for every table, or one per table; each a positive integer, else ValueError."""
    if not isinstance(sizes, Sequence):
        sizes = [sizes] * num_tables
    if len(sizes) != num_tables:
        raise ValueError(f"need {num_tables} table sizes (or one int for all), got {len(sizes)}")
    return tuple(positive_int(f"table {t}: size", n) for t, n in enumerate(sizes))


class InMemoryDataset:
    """Batch source (`table_sizes`, `num_dense`, `batch_size`, `num_batches`, `batch(i)`, iteration).

    The dataset owns the arrays it is given and makes them read-only, so every `batch(i)` call
    returns the same values.
    """

    def __init__(
        self,
        dense: np.ndarray,
        ids: np.ndarray,
        labels: np.ndarray,
        table_sizes: Sequence[int],
        batch_size: int,
        report: LoadReport | None = None,
    ):
        dense = np.asarray(dense, dtype=np.float32)  # [N, num_dense]
        ids = np.asarray(ids, dtype=np.int64)  # [num_tables, N]: table-major, so a batch's
        labels = np.asarray(labels, dtype=np.float32)  # [N]           ids of one table are contiguous
        table_sizes = table_sizes_from(table_sizes, len(table_sizes))
        n = labels.shape[0]
        if labels.ndim != 1 or dense.ndim != 2 or dense.shape[0] != n:
            raise ValueError(
                f"dense must be [N, num_dense] and labels [N]; got dense {dense.shape}, labels {labels.shape}"
            )
        if ids.shape != (len(table_sizes), n):
            raise ValueError(f"ids must be [num_tables={len(table_sizes)}, N={n}], got {ids.shape}")
        for t, size in enumerate(table_sizes):
            if n and (ids[t].min() < 0 or ids[t].max() >= size):
                raise ValueError(f"table {t}: ids must lie in [0, {size}), found [{ids[t].min()}, {ids[t].max()}]")
        if not np.isin(labels, (0.0, 1.0)).all():
            raise ValueError("labels must be 0 or 1")
        batch_size = positive_int("batch_size", batch_size)
        if n < batch_size:
            raise ValueError(
                f"{n} rows is fewer than one batch of {batch_size}; load more rows or choose a smaller batch_size"
            )
        for array in (dense, ids, labels):
            array.flags.writeable = False  # batches must stay the same on every call
        self.dense, self.ids, self.labels = dense, ids, labels
        self.table_sizes = table_sizes
        self.batch_size = int(batch_size)
        self.report = report
        self._offsets = np.arange(self.batch_size, dtype=np.int64)  # one id per bag: bag b starts at b

    @property
    def num_dense(self) -> int:
        return int(self.dense.shape[1])

    @property
    def num_rows(self) -> int:
        """Samples held, including those of the incomplete last batch."""
        return int(self.labels.shape[0])

    @property
    def num_batches(self) -> int:
        return self.num_rows // self.batch_size

    def __len__(self) -> int:
        return self.num_batches

    def batch(self, i: int) -> Batch:
        """Batch `i` (0-based): fresh arrays, the same on every call."""
        if not 0 <= i < self.num_batches:
            raise IndexError(f"batch {i} out of range: this dataset has {self.num_batches} batches")
        rows = slice(i * self.batch_size, (i + 1) * self.batch_size)
        return Batch(
            dense=self.dense[rows].copy(),  # [B, num_dense]
            ids=tuple(table_ids[rows].copy() for table_ids in self.ids),  # per table: [B]
            offsets=tuple(self._offsets.copy() for _ in self.table_sizes),
            labels=self.labels[rows].copy(),  # [B]
        )

    def __iter__(self) -> Iterator[Batch]:
        return (self.batch(i) for i in range(self.num_batches))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(rows={self.num_rows:,}, batches={self.num_batches:,} of "
            f"{self.batch_size}, tables={len(self.table_sizes)}, num_dense={self.num_dense})"
        )
