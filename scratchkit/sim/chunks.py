"""A trace as a stream of int64 chunks: from memory, from a `.npy` file larger than memory, or
from any iterable of id arrays (a data source that yields a batch of ids at a time).

    stream = trace_chunks("ids.npy")       # read a chunk at a time: memory holds one chunk
    stream.total                           # accesses, when known (None for a plain iterable)
    for chunk in stream: ...               # contiguous int64 [<= chunk_size], ids checked >= 0

Bad input is refused with the position of the first bad id counted over the whole stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scratchkit.sim.checks import as_count, check_file_ids

CHUNK_SIZE = 1 << 20  # 8 MB of int64: big enough to amortise the call, small for the cache


@dataclass
class TraceChunks:
    """Iterable of checked int64 chunks; `total` is the trace length when it is known."""

    parts: Iterable
    total: int | None
    name: str
    chunk_size: int = CHUNK_SIZE

    def __iter__(self) -> Iterator[np.ndarray]:
        offset = 0
        for part in self.parts:
            ids = np.asarray(part)
            if ids.ndim != 1:
                raise ValueError(f"{self.name}: the chunk at access {offset} must be 1-D, got shape {ids.shape}")
            for start in range(0, ids.size, self.chunk_size):
                chunk = _checked(ids[start : start + self.chunk_size], self.name, offset)
                offset += chunk.size
                yield chunk


def trace_chunks(source, chunk_size: int = CHUNK_SIZE, name: str | None = None) -> TraceChunks:
    """`source`: a 1-D integer array, a path to a `.npy` of one, or an iterable of 1-D arrays."""
    chunk_size = as_count(chunk_size, "chunk_size")
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"trace file {path} does not exist")
        try:
            ids = np.load(path, mmap_mode="r", allow_pickle=False)  # reads the header only
        except ValueError as err:
            raise ValueError(f"{path}: not a .npy array of ids ({err})") from None
        check_file_ids(ids, path)
        parts = _read_npy(path, ids.offset, ids.dtype, int(ids.size), chunk_size)
        return TraceChunks(parts, int(ids.size), name or str(path), chunk_size)
    if isinstance(source, np.ndarray) or (isinstance(source, (list, tuple)) and all(np.isscalar(x) for x in source)):
        ids = _whole(np.asarray(source), name or "trace")
        return TraceChunks([ids], int(ids.size), name or "trace", chunk_size)
    if not isinstance(source, Iterable):
        raise ValueError(f"a trace is an array, a .npy path or an iterable of id arrays, got {type(source).__name__}")
    return TraceChunks(source, None, name or "trace", chunk_size)


class _read_npy:
    """The array of a `.npy` file, read `chunk_size` ids at a time with plain file reads.

    Not a memory map: the pages of a map stay resident (and count as the process's memory)
    until the kernel needs them back; reads leave nothing behind but the one chunk.
    """

    def __init__(self, path: Path, offset: int, dtype: np.dtype, size: int, chunk_size: int):
        self.path, self.offset, self.dtype, self.size = path, offset, dtype, size
        self.chunk_size = chunk_size

    def __iter__(self) -> Iterator[np.ndarray]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            for start in range(0, self.size, self.chunk_size):
                count = min(self.chunk_size, self.size - start)
                chunk = np.fromfile(f, dtype=self.dtype, count=count)
                if chunk.size < count:
                    raise ValueError(
                        f"{self.path} is truncated: its header says {self.size:,} "
                        f"ids, the file ends after {start + chunk.size:,}"
                    )
                yield chunk


def _whole(ids: np.ndarray, name: str) -> np.ndarray:
    if ids.ndim != 1:
        raise ValueError(f"{name} must be 1-D (ids in access order), got shape {ids.shape}")
    if ids.size == 0 and ids.dtype == np.float64:  # np.asarray([]) is float64
        return np.zeros(0, np.int64)
    _integer(ids, name)
    return ids


def _integer(ids: np.ndarray, name: str) -> None:
    if ids.dtype == np.bool_ or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"{name} must hold integer ids (int64), got dtype {ids.dtype}")


def _checked(part: np.ndarray, name: str, offset: int) -> np.ndarray:
    """One chunk as contiguous int64, ids >= 0; errors name the position in the whole stream."""
    _integer(part, name)
    if part.dtype.kind == "u" and part.max() > np.iinfo(np.int64).max:
        at = int(np.argmax(part > np.iinfo(np.int64).max))
        raise ValueError(f"{name}[{offset + at}] = {int(part[at])} does not fit in int64")
    chunk = np.ascontiguousarray(part, dtype=np.int64)
    if chunk.min() < 0:
        at = int(np.argmax(chunk < 0))
        raise ValueError(f"{name} ids must be >= 0, but {name}[{offset + at}] = {int(chunk[at])}")
    return chunk
