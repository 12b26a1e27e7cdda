"""Streaming a text data file into column files, a block at a time: the loaders' one loop.

Each block of lines goes first to the format's fast reader (Criteo's: a C++ loop that checks
and decodes every field, `criteo_native.py`; MovieLens', and Criteo's where no compiler is found:
pyarrow splits it into columns, NumPy checks and decodes them, `fields.py`). If the fast reader
declines the block (a field falls outside the grammar, a line has the wrong number of columns, a
lone carriage return, pyarrow is not installed), the block is read again line by line by the
format's line parser, the slow obvious twin, which names the line (`file:line: what is wrong`)
or, under `errors="skip"`, leaves it out and counts it. All produce the same `Chunk`, and the
tests hold them equal.

Memory: one block, its columns and the chunk; the output goes to disk as it is made.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scratchkit.data.blocks import BLOCK_BYTES, read_blocks
from scratchkit.data.lines import parse_lines
from scratchkit.data.npy_files import NpyAppender

FORMAT_VERSION = 1  # of the converted folder: a cached folder of another version is remade


@dataclass
class Chunk:
    """Rows of a block, decoded: labels uint8 [n], dense [n, D], sparse raw values [n, T], and
    `marks` (name -> bool [n, k]) that the format counts into the report."""

    labels: np.ndarray
    dense: np.ndarray
    sparse: np.ndarray
    marks: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def head(self, n: int) -> "Chunk":
        return Chunk(self.labels[:n], self.dense[:n], self.sparse[:n], {k: v[:n] for k, v in self.marks.items()})


def arrow_csv():
    """pyarrow's CSV module, or None where pyarrow is not installed (every block then goes
    through the line parser: slower, same result)."""
    try:
        import pyarrow.csv
    except ImportError:
        return None
    return pyarrow.csv


ARROW_BLOCK_BYTES = 8 << 20  # pyarrow parses a 32 MB block as 4 pieces, on as many threads


def read_columns(data: bytes, names: list[str], delimiter: str, integers: tuple[str, ...] = ()):
    """Split a block into columns with pyarrow, or None if pyarrow refuses it (or is missing).

    Every column is raw bytes except those named in `integers`, which pyarrow reads as int64
    with an empty field as null. Quotes and escapes are off: a field is exactly the bytes between
    two delimiters, as the line parsers see it. Empty lines are kept (they are malformed lines).
    pyarrow's integers are more lenient than the kit's grammar (" 3", "0x10"): a caller that asks
    for them checks first that the block holds no byte such a field could hide behind."""
    csv = arrow_csv()
    if csv is None:
        return None
    import io
    import pyarrow as pa

    types = {n: pa.int64() if n in integers else pa.binary() for n in names}
    try:
        return csv.read_csv(
            io.BytesIO(data),
            read_options=csv.ReadOptions(column_names=names, use_threads=True, block_size=ARROW_BLOCK_BYTES),
            parse_options=csv.ParseOptions(
                delimiter=delimiter, quote_char=False, double_quote=False, escape_char=False, ignore_empty_lines=False
            ),
            convert_options=csv.ConvertOptions(
                column_types=types, null_values=[""], strings_can_be_null=False, check_utf8=False
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowException):
        return None


def only_bytes(data: bytes, allowed: bytes) -> bool:
    """Every byte of `data` is one of `allowed` (deleting them leaves nothing: one C pass,
    ~5x a NumPy table lookup over the block)."""
    return not data.translate(None, allowed)


class ColumnFiles:
    """The three output columns of a conversion; sparse values are stored in the narrowest of
    uint32/uint64 that holds them (Criteo's 8-digit hashes: uint32), widened if one does not."""

    def __init__(self, folder: Path, num_dense: int, dense_dtype, num_tables: int):
        self.labels = NpyAppender(folder / "labels.npy", np.uint8)
        self.dense = NpyAppender(folder / "dense.npy", dense_dtype, (num_dense,))
        self.sparse = NpyAppender(folder / "sparse.npy", np.uint32, (num_tables,))

    def append(self, chunk: Chunk) -> None:
        if (
            len(chunk)
            and chunk.sparse.dtype.itemsize > 4
            and self.sparse.dtype == np.uint32
            and int(chunk.sparse.max()) > np.iinfo(np.uint32).max
        ):
            self.sparse.widen(np.uint64)  # a value past 32 bits: rare, once
        self.labels.append(chunk.labels)
        self.dense.append(chunk.dense)
        self.sparse.append(chunk.sparse)

    def close(self) -> None:
        for f in (self.labels, self.dense, self.sparse):
            f.close()


def convert(
    path,
    fmt,
    files: ColumnFiles,
    report,
    *,
    errors,
    max_samples: int | None,
    first_line: int = 1,
    skip_bytes: int = 0,
    on_bytes=None,
    on_chunk=None,
    block_bytes: int | None = None,
) -> int:
    """Stream `path` through `fmt` into `files`; returns the rows written.

    `fmt` has `split(block)` (the work done ahead: a decoded Chunk, pyarrow's columns, or
    None), `fast(block, columns) -> Chunk | None`, `parse_line(line, number)`,
    `rows_to_chunk(rows)` and `count(chunk, report)`; blocks are `fmt.block_bytes` long where
    it says, else BLOCK_BYTES. `on_chunk(chunk)` sees every chunk kept (distinct values...).
    The next block is read and split on a thread while this one is decoded (the C++ loop,
    pyarrow and most of NumPy let go of the GIL).
    """
    remaining, rows = max_samples, 0
    block_bytes = block_bytes or getattr(fmt, "block_bytes", BLOCK_BYTES)
    for block, columns in _split_ahead(read_blocks(path, block_bytes, first_line, skip_bytes, on_bytes), fmt):
        if remaining == 0:
            report.stopped_at_max_samples = True
            break
        chunk = None if block.lone_cr or columns is None else fmt.fast(block, columns)
        if chunk is not None and len(chunk) == block.lines:
            if remaining is not None and len(chunk) > remaining:
                chunk = chunk.head(remaining)
                report.stopped_at_max_samples = True
            report.lines_read += len(chunk)
            report.rows_loaded += len(chunk)
        else:
            chunk = fmt.rows_to_chunk(
                parse_lines(
                    block.text_lines(),
                    fmt.parse_line,
                    report,
                    errors=errors,
                    max_samples=remaining,
                    first_line_number=block.first_line,
                )
            )
        fmt.count(chunk, report)
        files.append(chunk)
        if on_chunk is not None and len(chunk):
            on_chunk(chunk)
        rows += len(chunk)
        if remaining is not None:
            remaining -= len(chunk)
        if report.stopped_at_max_samples:
            break
    files.close()
    return rows


def _split_ahead(blocks, fmt):
    """(block, its columns) pairs, the next block read and split on a worker thread meanwhile."""
    from concurrent.futures import ThreadPoolExecutor

    def read_next(it):
        block = next(it, None)
        return None if block is None else (block, None if block.lone_cr else fmt.split(block))

    blocks = iter(blocks)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="scratchkit-read") as pool:
        pending = pool.submit(read_next, blocks)
        while (item := pending.result()) is not None:
            pending = pool.submit(read_next, blocks)
            yield item


def cache_key(path: str | Path, fmt_name: str, options: dict) -> str:
    """Names a conversion: the file (resolved path, size, modification time) and the options."""
    stat = Path(path).stat()
    text = json.dumps(
        [FORMAT_VERSION, str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns, fmt_name, options],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def output_folder(path: str | Path, key: str, cache_dir: str | Path | None) -> tuple[Path, bool]:
    """(the folder to convert into or read from, whether it is temporary)."""
    if cache_dir is None:
        return Path(tempfile.mkdtemp(prefix="scratchkit-")), True
    folder = Path(cache_dir) / f"{Path(path).name}-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder, False


def read_meta(folder: Path, key: str) -> dict | None:
    """The finished conversion's description, if `folder` holds one made with `key`."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if meta.get("key") == key else None


def write_meta(folder: Path, meta: dict) -> None:
    """Written last, whole or not at all: a conversion cut short is never taken as finished."""
    tmp = folder / "meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=1))
    os.replace(tmp, folder / "meta.json")


def progress_bar(path: str | Path, enabled: bool):
    """A progress bar over the file's bytes on disk, on stderr when it is a terminal, shown
    only once reading has taken 2 s (small files never show one)."""
    from tqdm import tqdm

    return tqdm(
        total=Path(path).stat().st_size,
        desc=f"reading {Path(path).name}",
        unit="B",
        unit_scale=True,
        delay=2.0,
        leave=False,
        disable=None if enabled else True,
    )


__all__ = ["Chunk", "ColumnFiles", "convert", "cache_key"]
