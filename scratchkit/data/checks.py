"""The door every batch goes through before a trainer touches it: ids, dense values, labels.

A batch can come from a user's own Python source, so nothing about it is taken on trust. A bad
batch is refused *before any of it is trained*, with the same message whichever trainer reads it:

    batch 3, table 0: id -1 at position 5 is out of range [0, 500)
    batch 3: dense value nan at sample 2, feature 1 is not finite
    batch 3: label 2.0 at sample 1 is not 0 or 1

Why each rule. An id out of range would index past a table: a torch op raises a bare IndexError,
NumPy wraps a negative id around to the last row without a word, and a kernel writes outside its
buffer (a crash by signal). A non-finite dense value turns every weight it reaches into NaN within
a step. A label outside {0, 1} is not a click; binary cross-entropy trains on it anyway.

The checks are a few vectorised reductions per table (min, max, isfinite), microseconds beside a
training step.
"""
from __future__ import annotations

import numpy as np


class BadBatchError(ValueError):
    """A batch a trainer refuses; the message names the batch, the table and the position."""


def check_batch(batch, table_sizes, index: int) -> None:
    """Raise BadBatchError for the first problem of batch `index`, or return silently."""
    if len(batch.ids) != len(table_sizes):
        raise BadBatchError(f"batch {index}: {len(batch.ids)} tables of ids, but the model has "
                            f"{len(table_sizes)} tables")
    for t, (ids, size) in enumerate(zip(batch.ids, table_sizes)):
        _check_ids(ids, int(size), f"batch {index}, table {t}")
    _check_dense(batch.dense, index)
    _check_labels(batch.labels, index)


def _check_ids(ids: np.ndarray, size: int, where: str) -> None:
    if not np.issubdtype(ids.dtype, np.integer):
        raise BadBatchError(f"{where}: ids must be integers, got dtype {ids.dtype}")
    if ids.size == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= size:
        bad = low if low < 0 else high
        position = int(np.flatnonzero(ids == bad)[0])
        raise BadBatchError(f"{where}: id {bad} at position {position} is out of range [0, {size})")


def _check_dense(dense: np.ndarray, index: int) -> None:
    finite = np.isfinite(dense)                               # [B, num_dense]
    if not finite.all():
        sample, feature = (int(i) for i in np.argwhere(~finite)[0])
        raise BadBatchError(f"batch {index}: dense value {dense[sample, feature]} at sample {sample}, "
                            f"feature {feature} is not finite")


def _check_labels(labels: np.ndarray, index: int) -> None:
    bad = np.flatnonzero((labels != 0) & (labels != 1))      # NaN fails both tests: caught too
    if bad.size:
        sample = int(bad[0])
        raise BadBatchError(f"batch {index}: label {labels[sample]} at sample {sample} is not 0 or 1")


__all__ = ["BadBatchError", "check_batch"]
