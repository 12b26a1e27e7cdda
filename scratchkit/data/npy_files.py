"""`.npy` files written a chunk at a time and read a few rows at a time, never whole.

    with NpyAppender(path, np.float32, row_shape=(13,)) as out:   # [N, 13], N unknown up front
        for chunk in chunks: out.append(chunk)                      # header patched on close
    rows = NpyRows(path)                                            # reads the header only
    rows.read(100, 228)                                             # [128, 13]: one pread

Why not `np.lib.format.open_memmap`: it needs N before the first row, and a streamed file's N is
known only at its end; and the pages of a memory map stay resident (and count as the process's
memory) until the kernel wants them back, while plain reads leave nothing behind but the rows
asked for. The header is written with room for any N (`HEADER_BYTES`), then rewritten in place
with the real shape: the file is a plain `.npy`, `np.load` reads it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

MAGIC = b"\x93NUMPY\x01\x00"  # format version 1.0: a 2-byte header length follows
HEADER_BYTES = 128  # magic + length + the dict, padded: room for any shape here


def _header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """A version 1.0 header of exactly HEADER_BYTES bytes (numpy needs a multiple of 64)."""
    text = repr(
        {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
            "fortran_order": False,
            "shape": tuple(int(n) for n in shape),
        }
    )
    room = HEADER_BYTES - len(MAGIC) - 2
    if len(text) + 1 > room:
        raise ValueError(f"npy header for shape {shape} does not fit {HEADER_BYTES} bytes")
    body = (text + " " * (room - 1 - len(text))).encode("latin1") + b"\n"  # spaces, then \n
    return MAGIC + room.to_bytes(2, "little") + body


class NpyAppender:
    """A `.npy` of rows of `row_shape`, appended a chunk at a time; the header is final on close."""

    def __init__(self, path: str | Path, dtype, row_shape: tuple[int, ...] = ()):
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.row_shape = tuple(row_shape)
        self.rows = 0
        self._file = open(self.path, "wb")
        self._file.write(_header(self.dtype, (0, *self.row_shape)))

    def append(self, chunk: np.ndarray) -> None:
        chunk = np.ascontiguousarray(chunk, dtype=self.dtype)  # [n, *row_shape]
        if chunk.shape[1:] != self.row_shape:
            raise ValueError(f"{self.path.name}: rows of shape {self.row_shape} expected, got {chunk.shape[1:]}")
        self._file.write(chunk.tobytes())
        self.rows += chunk.shape[0]

    def widen(self, dtype) -> None:
        """Rewrite the rows so far in a wider dtype (e.g. uint32 -> uint64), a chunk at a time."""
        dtype = np.dtype(dtype)
        self._file.flush()
        old, rows = self.dtype, self.rows
        self._file.close()
        tmp = self.path.with_name(self.path.name + ".widen")
        self.path.rename(tmp)
        self.dtype, self.rows = dtype, 0
        self._file = open(self.path, "wb")
        self._file.write(_header(dtype, (0, *self.row_shape)))
        per_row = int(np.prod(self.row_shape, dtype=np.int64))
        with open(tmp, "rb") as f:
            f.seek(HEADER_BYTES)
            for start in range(0, rows, 1 << 20):
                n = min(1 << 20, rows - start)
                self.append(np.fromfile(f, old, n * per_row).reshape(n, *self.row_shape))
        tmp.unlink()

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.seek(0)
        self._file.write(_header(self.dtype, (self.rows, *self.row_shape)))
        self._file.close()

    def __enter__(self) -> "NpyAppender":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class NpyRows:
    """Rows `[start, stop)` of a C-ordered `.npy` file, read with one file read each call.

    Opens the file per call: safe to share across a fork (no file position to share).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        with open(self.path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read_header(f)
            self.offset = f.tell()
        if fortran and len(shape) > 1:
            raise ValueError(f"{self.path}: a Fortran-ordered array; save it C-ordered")
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        if not self.shape:
            raise ValueError(f"{self.path}: a 0-d array has no rows")
        self.row_shape = self.shape[1:]
        self.row_items = int(np.prod(self.row_shape, dtype=np.int64))
        expected = self.offset + self.shape[0] * self.row_items * self.dtype.itemsize
        if self.path.stat().st_size < expected:
            raise ValueError(f"{self.path} is truncated: its header says {self.shape[0]:,} rows")

    def __len__(self) -> int:
        return self.shape[0]

    def read(self, start: int, stop: int) -> np.ndarray:
        """[stop - start, *row_shape], a fresh array."""
        count = (stop - start) * self.row_items
        data = np.fromfile(
            self.path, self.dtype, count, offset=self.offset + start * self.row_items * self.dtype.itemsize
        )
        return data.reshape(stop - start, *self.row_shape)

    def chunks(self, rows: int = 1 << 18):
        """(start, rows) of the whole file, `rows` at a time."""
        for start in range(0, len(self), rows):
            yield start, self.read(start, min(start + rows, len(self)))


def npy_shape(path: str | Path) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) from a `.npy` header alone."""
    rows = NpyRows(path)
    return rows.shape, rows.dtype


__all__ = ["NpyAppender", "NpyRows", "npy_shape", "HEADER_BYTES"]
