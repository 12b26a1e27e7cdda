"""A batch source over column files on disk: what the loaders return, at any size.

Design. A loader streams its text file once and writes three `.npy` columns (the layout of
TorchRec's Criteo preprocessing, `{dense, sparse, labels}.npy`, here under a folder of its own):

    labels.npy   [N] or [N, 1]      0/1 clicks
    dense.npy    [N, num_dense]     dense features (or their raw values, with `dense_transform`)
    sparse.npy   [N, num_tables]    each feature's raw value: a hash, a user id

`batch(i)` reads rows [i*B, (i+1)*B) of each column with one file read apiece (no memory map:
the pages of a map stay resident, reads leave nothing behind) and maps each table's raw values
to rows (`row_maps.py`: a dictionary of the distinct values, searched in C++, or value % size).
So any batch is
random access in microseconds, as the trainers need (ScratchPipe's planner reads ahead, the
static cache profiles a prefix), and memory holds a batch and the dictionaries, whatever N is.
Why a converted file rather than a window over the text: random access by index into text needs
an index of line offsets and a parse per read; the binary columns are ~60% of the text's size,
are read back at disk speed, and are the layout TorchRec users already have
(`scratchkit/data/criteo_npy.py` reads theirs with this same class).

A temporary folder (the default) is deleted when the source is closed or garbage collected,
and only by the process that made it (ScratchPipe forks; a child must not delete its parent's
files). A folder given as `cache_dir` is kept, and a later load of the same file reuses it.
"""

from __future__ import annotations

import os
import shutil
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from scratchkit.data.batch import Batch
from scratchkit.data.npy_files import NpyRows
from scratchkit.data.row_maps import RowMapper


class ConcatRows:
    """Several `.npy` files of the same row shape read as one: rows [start, stop) across files."""

    def __init__(self, parts: Sequence[NpyRows], limit: int | None = None):
        self.parts = list(parts)
        self.limit = limit  # use only the first `limit` rows (None: all)
        shapes = {p.row_shape for p in self.parts}
        if len(shapes) != 1:
            raise ValueError(
                f"{self.parts[0].path.parent}: files with different row shapes: "
                + ", ".join(f"{p.path.name} {p.shape}" for p in self.parts)
            )
        self.row_shape = self.parts[0].row_shape
        self.dtype = self.parts[0].dtype
        self.bounds = np.cumsum([0] + [len(p) for p in self.parts])  # [files+1]

    def __len__(self) -> int:
        return int(self.bounds[-1]) if self.limit is None else min(self.limit, int(self.bounds[-1]))

    def read(self, start: int, stop: int) -> np.ndarray:
        first = int(np.searchsorted(self.bounds, start, side="right")) - 1
        pieces = []
        while start < stop:
            part, base = self.parts[first], int(self.bounds[first])
            end = min(stop, int(self.bounds[first + 1]))
            pieces.append(part.read(start - base, end - base))
            start, first = end, first + 1
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


def _remove_folder(folder: str, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


class FileSource:
    """Batch source (`table_sizes`, `num_dense`, `batch_size`, `num_batches`, `batch(i)`,
    iteration) over labels/dense/sparse column files, each a NpyRows or ConcatRows."""

    def __init__(
        self,
        labels,
        dense,
        sparse,
        row_maps: Sequence,
        batch_size: int,
        *,
        report=None,
        dense_transform=None,
        name: str = "data",
        temporary_folder: str | Path | None = None,
    ):
        self._labels, self._dense, self._sparse = labels, dense, sparse
        if not len(labels) == len(dense) == len(sparse):
            raise ValueError(
                f"{name}: columns of different lengths: labels {len(labels):,}, "
                f"dense {len(dense):,}, sparse {len(sparse):,} rows"
            )
        if len(sparse.row_shape) != 1 or sparse.row_shape[0] != len(row_maps):
            raise ValueError(
                f"{name}: sparse rows of shape {sparse.row_shape}, expected ({len(row_maps)},): one value per table"
            )
        self.row_maps = list(row_maps)
        self._rows_of = RowMapper(self.row_maps)
        self.table_sizes = tuple(m.size for m in self.row_maps)
        self.batch_size = int(batch_size)
        self.report = report
        self.name = name
        self._dense_transform = dense_transform
        self._offsets = np.arange(self.batch_size, dtype=np.int64)  # a bag of one per sample
        self._cleanup = None
        if temporary_folder is not None:
            self._cleanup = weakref.finalize(self, _remove_folder, str(temporary_folder), os.getpid())
        if self.num_batches == 0:
            raise ValueError(f"{name}: {self.num_rows} rows is fewer than one batch of {batch_size}")

    @property
    def num_dense(self) -> int:
        return int(self._dense.row_shape[0])

    @property
    def num_rows(self) -> int:
        """Samples held, including those of the incomplete last batch."""
        return len(self._labels)

    @property
    def num_batches(self) -> int:
        return self.num_rows // self.batch_size

    def __len__(self) -> int:
        return self.num_batches

    def rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(dense [n, num_dense] float32, ids [num_tables, n] int64, labels [n] float32) of
        samples [start, stop)."""
        dense = self._dense.read(start, stop)
        if self._dense_transform is not None:
            dense = self._dense_transform(dense)
        raw = self._sparse.read(start, stop)  # [n, tables]
        ids = self._rows_of(raw)  # [tables, n]
        labels = self._labels.read(start, stop).reshape(-1).astype(np.float32)
        return np.ascontiguousarray(dense, dtype=np.float32), ids, labels

    def batch(self, i: int) -> Batch:
        """Batch `i` (0-based): fresh arrays, the same on every call."""
        if not 0 <= i < self.num_batches:
            raise IndexError(f"batch {i} out of range: this dataset has {self.num_batches} batches")
        dense, ids, labels = self.rows(i * self.batch_size, (i + 1) * self.batch_size)
        return Batch(dense=dense, ids=tuple(ids), offsets=tuple(self._offsets.copy() for _ in ids), labels=labels)

    def __iter__(self) -> Iterator[Batch]:
        return (self.batch(i) for i in range(self.num_batches))

    # Whole columns, read into memory: for small data, tests and notebooks.
    @property
    def dense(self) -> np.ndarray:
        return self.rows(0, self.num_rows)[0]

    @property
    def ids(self) -> np.ndarray:
        """[num_tables, N] rows of every sample."""
        return self.rows(0, self.num_rows)[1]

    @property
    def labels(self) -> np.ndarray:
        return self.rows(0, self.num_rows)[2]

    def close(self) -> None:
        """Delete the temporary folder now (a source read from a kept folder keeps it)."""
        if self._cleanup is not None:
            self._cleanup()

    def __enter__(self) -> "FileSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name!r}: rows={self.num_rows:,}, batches="
            f"{self.num_batches:,} of {self.batch_size}, tables={len(self.table_sizes)}, "
            f"num_dense={self.num_dense})"
        )


__all__ = ["FileSource", "ConcatRows"]
