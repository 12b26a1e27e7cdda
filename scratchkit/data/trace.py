"""Access traces for the cache simulators: 1-D int64 `.npy` of ids in access order.

Order: rows (samples) in order, and within a row the tables in order, each bag's ids in bag order,
as a real dataset is read line by line. Each table's ids are offset by the sizes of the tables
before it, so one trace covers all tables without collisions.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def table_offsets(table_sizes) -> np.ndarray:
    """Start of each table in the global id space: [0, n0, n0+n1, ...] (one entry per table)."""
    return np.concatenate([[0], np.cumsum(table_sizes, dtype=np.int64)[:-1]]).astype(np.int64)


def batch_trace(batch, offsets: np.ndarray) -> np.ndarray:
    """The global ids one batch touches, in access order (sample-major): [lookups]."""
    ids, sample, table = [], [], []
    for t, (t_ids, t_offsets) in enumerate(zip(batch.ids, batch.offsets)):
        bag_sizes = np.diff(np.append(t_offsets, len(t_ids)))       # [B]
        ids.append(t_ids + offsets[t])
        sample.append(np.repeat(np.arange(batch.batch_size), bag_sizes))
        table.append(np.full(len(t_ids), t))
    ids, sample, table = (np.concatenate(a) for a in (ids, sample, table))
    order = np.lexsort((table, sample))   # stable: keeps each bag's ids in bag order
    return ids[order]


def make_trace(source, num_batches: int, start: int = 0) -> np.ndarray:
    """The trace of batches `start .. start+num_batches-1` of a batch source."""
    if num_batches <= 0:
        raise ValueError(f"number of batches must be positive, got {num_batches}")
    offsets = table_offsets(source.table_sizes)
    return np.concatenate([batch_trace(source.batch(i), offsets)
                           for i in range(start, start + num_batches)])


def write_trace(trace: np.ndarray, path: str | Path) -> Path:
    path = Path(path)
    np.save(path, np.ascontiguousarray(trace, dtype=np.int64))
    return path if path.suffix == ".npy" else path.with_name(path.name + ".npy")


def read_trace(path: str | Path) -> np.ndarray:
    """Load and check a trace file: it must be 1-D, integer, non-negative."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"trace file {path} does not exist")
    trace = np.load(path, allow_pickle=False)
    if trace.ndim != 1 or not np.issubdtype(trace.dtype, np.integer):
        raise ValueError(f"{path}: a trace is a 1-D integer array, got shape {trace.shape} "
                         f"dtype {trace.dtype}")
    if trace.size and trace.min() < 0:
        raise ValueError(f"{path}: ids must be >= 0; position {int(np.argmin(trace))} "
                         f"holds {int(trace.min())}")
    return trace.astype(np.int64, copy=False)
