"""From a feature's raw values (a Criteo hash, a user id) to rows of its embedding table.

Three maps, one per table, applied to each batch as it is read:

    Modulo(n)        row = value % n              the hash trick: TorchRec's `hashes`, the kit's
                                                  `table_sizes=`; n rows, collisions allowed
    Dictionary(v)    row = rank of value in v     v = the feature's distinct values, sorted:
                                                  one row per value, no collision (the DLRM
                                                  reference's dictionary; missing, read as 0,
                                                  is the smallest value, hence row 0)

Table sizes "derived from the data" (`derive_row_maps`): every table a Dictionary over its
distinct values, unless `max_rows` caps it: a feature with more distinct values than that is
hashed into `max_rows` rows instead (Modulo), as production pipelines do; a feature with fewer
keeps its dictionary. So no table has more than `max_rows` rows, and none has rows no value uses.

`DistinctValues` collects the distinct values while a file streams past, a block at a time.
Memory: the distinct values (at most `max_rows` a table when capped: a table that overflows is
dropped at once), never the file.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from scratchkit.native import CLibrary, address


class Modulo:
    """row = value % size (Python's modulo, so a negative int32 hash lands in [0, size))."""

    def __init__(self, size: int):
        self.size = int(size)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        if values.dtype.kind == "u":
            return (values.astype(np.uint64) % np.uint64(self.size)).astype(np.int64)
        return values.astype(np.int64) % self.size

    def __repr__(self) -> str:
        return f"Modulo({self.size})"


class Dictionary:
    """row = the rank of the value among `values` (sorted, distinct): one row per value."""

    def __init__(self, values: np.ndarray):
        self.values = np.sort(values)

    @property
    def size(self) -> int:
        return int(self.values.size)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.values, values.astype(self.values.dtype)).astype(np.int64)

    def __repr__(self) -> str:
        return f"Dictionary({self.size} values)"


_PTR, _I64 = ctypes.c_void_p, ctypes.c_int64
LOOP = CLibrary(
    "row_maps",
    Path(__file__).resolve().parent,
    ("row_maps_loop.cpp",),
    {"sk_rows_searched": (None, [_PTR, _I64, _I64, _I64, _I64, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR])},
)


class RowMapper:
    """Every table's rows of a batch of raw values: [n, T] -> [T, n] int64, as the maps say.

    The dictionaries' searches run in one C++ call (row_maps_loop.cpp: all of a table's searches
    a step at a time, so their cache misses overlap; ~10x NumPy's 26 calls on Criteo batches,
    benchmarks/bench_load.py); the other maps, and everything where no compiler is found or
    the values are signed, with NumPy (`map(values)`), the twin the tests hold it to."""

    def __init__(self, maps: list, native: bool | None = None):
        self.maps, self._asked = list(maps), native
        searched = [
            t for t, m in enumerate(self.maps) if isinstance(m, Dictionary) and m.values.dtype in (np.uint32, np.uint64)
        ]
        self.native = bool(searched) and (LOOP.available() if native is None else native)
        searched = searched if self.native else []
        self._rest = [(t, m) for t, m in enumerate(self.maps) if t not in searched]
        dicts = [self.maps[t].values for t in searched]
        self._tables = (
            len(searched),
            np.array(searched, np.int64),  # held: C reads them
            (_PTR * len(dicts))(*[d.ctypes.data for d in dicts]),
            np.array([d.size for d in dicts], np.int64),
            np.array([d.dtype == np.uint64 for d in dicts], np.int64),
        )
        self._table_args = (
            self._tables[0],
            self._tables[1].ctypes.data,
            self._tables[2],
            self._tables[3].ctypes.data,
            self._tables[4].ctypes.data,
        )

    def __reduce__(self):
        """Pickled as its maps (a source travels to another process): the pointers are remade."""
        return RowMapper, (self.maps, self._asked)

    def __call__(self, raw: np.ndarray) -> np.ndarray:
        n, num_tables = raw.shape
        ids = np.empty((num_tables, n), np.int64)
        if self.native and raw.dtype in (np.uint32, np.uint64) and n > 0:
            raw, scratch = np.ascontiguousarray(raw), np.empty(n, np.int64)  # held for the call
            LOOP.library.sk_rows_searched(
                address(raw, raw.dtype),
                int(raw.dtype == np.uint64),
                n,
                num_tables,
                *self._table_args,
                ids.ctypes.data,
                scratch.ctypes.data,
            )
            rest = self._rest
        else:
            rest = enumerate(self.maps)
        for t, m in rest:
            ids[t] = m(raw[:, t])
        return ids


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-D array, sorted. A sort and a mask: NumPy's sort of integers is
    vectorised, faster on Criteo-shaped blocks than `np.unique` (which sorts and then does more)
    and than pyarrow's hash table (`pc.unique`)."""
    ordered = np.sort(values)
    keep = np.empty(ordered.size, bool)
    keep[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


class DistinctValues:
    """Each table's distinct values, fed a block of raw values [n, tables] at a time.

    New values wait in a list until there are as many as already merged, then all merge in one
    pass: each value is merged O(log) times, as in a doubling array. With `cap`, a table found to
    have more than `cap` distinct values is dropped (it will be hashed, not looked up).
    """

    def __init__(self, num_tables: int, cap: int | None = None):
        self.cap = cap
        self._merged: list[np.ndarray | None] = [None] * num_tables
        self._pending: list[list[np.ndarray]] = [[] for _ in range(num_tables)]
        self._over = [False] * num_tables  # more distinct values than the cap

    def add(self, raw: np.ndarray) -> None:
        for t in range(raw.shape[1]):
            if self._over[t]:
                continue  # hashed anyway
            if self._merged[t] is None:
                self._merged[t] = np.zeros(0, raw.dtype)
            self._pending[t].append(_distinct(np.ascontiguousarray(raw[:, t])))
            waiting = sum(p.size for p in self._pending[t])
            if waiting >= max(self._merged[t].size, 1 << 16) or (self.cap is not None and waiting > self.cap):
                self._merge(t)

    def _merge(self, t: int) -> None:
        parts = [self._merged[t], *self._pending[t]]
        dtype = np.result_type(*parts)
        self._merged[t] = _distinct(np.concatenate([p.astype(dtype) for p in parts]))
        self._pending[t] = []
        if self.cap is not None and self._merged[t].size > self.cap:
            self._merged[t], self._over[t] = None, True

    def finish(self) -> list[np.ndarray | None]:
        """Per table: its distinct values, sorted; None for a table over the cap."""
        for t in range(len(self._merged)):
            if not self._over[t] and self._merged[t] is not None:
                self._merge(t)
        return [None if over else m for m, over in zip(self._merged, self._over)]


def derive_row_maps(distinct: list[np.ndarray | None], max_rows: int | None) -> list:
    """A Dictionary per table, or Modulo(max_rows) where the table had more distinct values."""
    return [
        Modulo(max_rows) if values is None or (max_rows is not None and values.size > max_rows) else Dictionary(values)
        for values in distinct
    ]


def save_row_maps(maps: list, folder: Path) -> list[dict]:
    """Describe the maps as JSON, the dictionaries' values as `.npy` files beside it."""
    described = []
    for t, m in enumerate(maps):
        if isinstance(m, Dictionary):
            np.save(folder / f"distinct_{t}.npy", m.values)
            described.append({"dictionary": f"distinct_{t}.npy"})
        else:
            described.append({"modulo": m.size})
    return described


def load_row_maps(described: list[dict], folder: Path) -> list:
    return [
        Dictionary(np.load(folder / d["dictionary"])) if "dictionary" in d else Modulo(d["modulo"]) for d in described
    ]


__all__ = ["Modulo", "Dictionary", "DistinctValues", "RowMapper", "derive_row_maps"]
