"""The door every batch goes through before a trainer touches it: ids, dense values, labels.

A batch can come from a user's own Python source, so nothing about it is taken on trust. A bad
batch is refused *before any of it is trained*, with the same message whichever trainer reads it:

    batch 3, table 0: id -1 at position 5 is out of range [0, 500)
    batch 3, table 1: ids are uint64, not int64 (ids.astype(np.int64) converts ids in range exactly)
    batch 3, table 1: ids are a Python list, not a NumPy array (np.asarray(ids, dtype=np.int64))
    batch 3: labels are not contiguous in memory (strides (-4,): a view such as x[::-1] or
             x[:, ::2]); np.ascontiguousarray(labels) copies them
    batch 3: dense values of shape (32, 5), but the model takes 4 dense features a sample (the
             source's num_dense): give each sample 4, or make the source's num_dense 5
    batch 3: dense value nan at sample 2, feature 1 is not finite
    batch 3: label 2.0 at sample 1 is not 0 or 1

What each array is first (a NumPy array, contiguous, of its dtype and shape), then the values. Why
each rule. Every array is a NumPy array: a list has no dtype to check, and a trainer would fail on
it with an AttributeError. Each is C-contiguous: torch takes no negative strides, so a view such as
`x[::-1]` would fail inside some trainers' steps and not others', and the C++ loops read memory in
order; one rule refuses every such view, whichever trainer or planner reads it. Ids are int64,
offsets int64, dense values and labels float32: what every trainer and the reference compute with.
Another dtype would fail somewhere inside a step (torch refuses to mix uint64 with int64, a float64
matmul with float32 weights), or silently take another path; a trainer would find out part way
through, so the door says it first. A batch has at least one sample (the mean loss of none is NaN),
its dense values are as wide as the model's `num_dense` (wider would fail in the first matmul,
naming no batch; a model without dense features would ignore them without a word), and each table's
offsets start at 0 and never decrease (EmbeddingBag's bags). An id out of range would index past a
table: a torch op raises a bare IndexError, NumPy wraps a negative id around to the last row
without a word, and a kernel writes outside its buffer (a crash by signal). A non-finite dense
value turns every weight it reaches into NaN within a step. A label outside {0, 1} is not a click;
binary cross-entropy trains on it anyway.

The checks are a few vectorised reductions over all tables at once (each table's min and max id,
its offsets' steps): with 26 tables a reduction per table cost a tenth of a `criteo-like` step.
Only a batch they find wrong is walked table by table, for the message.
"""

from __future__ import annotations

import numpy as np


class BadBatchError(ValueError):
    """A batch a trainer refuses; the message names the batch, the table and the position."""


def check_batch(batch, table_sizes, index: int, *, num_dense: int) -> None:
    """Raise BadBatchError for the first problem of batch `index`, or return silently.
    `table_sizes` and `num_dense`: the model's (a trainer's model takes its source's `num_dense`)."""
    if len(batch.ids) != len(table_sizes) or len(batch.offsets) != len(table_sizes):
        raise BadBatchError(
            f"batch {index}: {len(batch.ids)} tables of ids and {len(batch.offsets)} "
            f"of offsets, but the model has {len(table_sizes)} tables"
        )
    samples = _check_samples(batch, num_dense, index)
    if not _tables_fine(batch.ids, batch.offsets, table_sizes, samples):
        _check_tables(batch, table_sizes, samples, index)
    _check_dense(batch.dense, index)
    _check_labels(batch.labels, index)


def _plain(array, dtype) -> bool:
    """A C-contiguous NumPy array of `dtype`: what every trainer reads without a copy."""
    return isinstance(array, np.ndarray) and array.dtype == dtype and array.flags.c_contiguous


def _tables_fine(ids, offsets, table_sizes, samples: int) -> bool:
    """Whether every table's ids and offsets pass (`_check_tables`' rules), in a few reductions
    over all tables together; False sends the batch through the table-by-table walk."""
    try:
        if not all(_plain(i, np.int64) and i.ndim == 1 for i in ids):
            return False
        if not all(_plain(o, np.int64) and o.shape == (samples,) for o in offsets):
            return False
        lengths = np.array([i.size for i in ids])  # [T]
        full = np.flatnonzero(lengths)  # tables with ids
        if full.size:
            every = np.concatenate(ids)  # [sum n_t]
            starts = (np.cumsum(lengths) - lengths)[full]
            if (
                np.minimum.reduceat(every, starts).min() < 0
                or (np.maximum.reduceat(every, starts) >= np.asarray(table_sizes, dtype=np.int64)[full]).any()
            ):
                return False
        stacked = np.stack(offsets)  # [T, B]
        return bool(
            (stacked[:, 0] == 0).all()
            and (stacked[:, -1] <= lengths).all()
            and (stacked[:, 1:] >= stacked[:, :-1]).all()
        )
    except (TypeError, ValueError, OverflowError):  # sizes beyond int64, odd objects: walk them
        return False


def _check_tables(batch, table_sizes, samples: int, index: int) -> None:
    """Each table's ids then offsets, in order: the first problem raised with its message."""
    for t, (ids, offsets, size) in enumerate(zip(batch.ids, batch.offsets, table_sizes)):
        where = f"batch {index}, table {t}"
        _check_ids(ids, int(size), where)
        _check_offsets(offsets, samples, len(ids), where)


def _check_samples(batch, num_dense: int, index: int) -> int:
    """The batch's sample count B, which the labels [B] and the dense values [B, num_dense] agree on."""
    labels, dense, where = batch.labels, batch.dense, f"batch {index}"
    _check_array(labels, "labels", where, "labels")
    _check_array(dense, "dense values", where, "dense")
    _check_dtype(labels, np.float32, "labels", where, "labels.astype(np.float32)")
    _check_dtype(dense, np.float32, "dense values", where, "dense.astype(np.float32)")
    if labels.ndim != 1 or dense.ndim != 2 or dense.shape[0] != labels.shape[0]:
        raise BadBatchError(
            f"{where}: labels of shape {labels.shape} and dense values of "
            f"shape {dense.shape}; the kit takes labels [B] and dense values [B, D]"
        )
    if labels.shape[0] == 0:
        raise BadBatchError(f"{where}: the batch has no samples; a batch needs at least one")
    if dense.shape[1] != num_dense:
        raise BadBatchError(
            f"{where}: dense values of shape {dense.shape}, but the model takes {num_dense} dense "
            f"features a sample (the source's num_dense): give each sample {num_dense}, or make "
            f"the source's num_dense {dense.shape[1]}"
        )
    return labels.shape[0]


def _check_array(array, what: str, where: str, name: str) -> None:
    """A NumPy array, C-contiguous; `name`: the variable the message's fix is written with."""
    if not isinstance(array, np.ndarray):
        kind = {list: "a Python list", tuple: "a Python tuple"}.get(type(array), f"a {type(array).__name__}")
        dtype = "np.int64" if what in ("ids", "offsets") else "np.float32"
        raise BadBatchError(f"{where}: {what} are {kind}, not a NumPy array (np.asarray({name}, dtype={dtype}))")
    if not array.flags.c_contiguous:
        raise BadBatchError(
            f"{where}: {what} are not contiguous in memory (strides {array.strides}: a view such as "
            f"x[::-1] or x[:, ::2]); np.ascontiguousarray({name}) copies them"
        )


def _check_dtype(array: np.ndarray, dtype, what: str, where: str, convert: str) -> None:
    """`convert`: the NumPy call that makes the array right, for the message."""
    if array.dtype != dtype:
        raise BadBatchError(f"{where}: {what} are {array.dtype}, not {np.dtype(dtype).name} ({convert})")


def _check_ids(ids: np.ndarray, size: int, where: str) -> None:
    _check_array(ids, "ids", where, "ids")
    _check_dtype(ids, np.int64, "ids", where, "ids.astype(np.int64) converts ids in range exactly")
    if ids.ndim != 1:
        raise BadBatchError(f"{where}: ids of shape {ids.shape}; the kit takes one flat array of ids per table")
    if ids.size == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= size:
        bad = low if low < 0 else high
        position = int(np.flatnonzero(ids == bad)[0])
        raise BadBatchError(f"{where}: id {bad} at position {position} is out of range [0, {size})")


def _check_offsets(offsets: np.ndarray, samples: int, lookups: int, where: str) -> None:
    """EmbeddingBag's offsets [B]: where each sample's bag starts in the table's ids."""
    _check_array(offsets, "offsets", where, "offsets")
    _check_dtype(offsets, np.int64, "offsets", where, "offsets.astype(np.int64)")
    if offsets.shape != (samples,):
        raise BadBatchError(f"{where}: offsets of shape {offsets.shape}; the kit takes one per sample, [{samples}]")
    starts = np.diff(offsets, prepend=0)  # offsets[0], then each bag's size
    wrong = (starts < 0) | (offsets > lookups)
    wrong[0] = offsets[0] != 0
    if wrong.any():
        sample = int(np.flatnonzero(wrong)[0])
        raise BadBatchError(
            f"{where}: offsets must start at 0, never decrease and stay within the "
            f"{lookups} ids; offset {offsets[sample]} at sample {sample}"
        )


def _check_dense(dense: np.ndarray, index: int) -> None:
    finite = np.isfinite(dense)  # [B, num_dense]
    if not finite.all():
        sample, feature = (int(i) for i in np.argwhere(~finite)[0])
        raise BadBatchError(
            f"batch {index}: dense value {dense[sample, feature]} at sample {sample}, feature {feature} is not finite"
        )


def _check_labels(labels: np.ndarray, index: int) -> None:
    bad = np.flatnonzero((labels != 0) & (labels != 1))  # NaN fails both tests: caught too
    if bad.size:
        sample = int(bad[0])
        raise BadBatchError(f"batch {index}: label {labels[sample]} at sample {sample} is not 0 or 1")


__all__ = ["BadBatchError", "check_batch"]
