"""Criteo click logs (Kaggle Display Advertising Challenge, Terabyte) in their raw TSV format.

One sample per line, tab-separated, no header (Terabyte's `day_N` files have the same layout):

    column  1       label     1 = the ad was clicked, 0 = not
    columns 2-14    I1..I13   integer counts; empty = missing; may be negative (Kaggle)
    columns 15-40   C1..C26   categorical values, 32-bit hashes written as 8 hex digits; empty = missing

What the loader makes of a line, following the DLRM reference (facebookresearch/dlrm,
`data_utils.py`, which fills an empty field with "0", clips negative integers to 0 and trains on
log(x + 1)):

    dense[j]  = log(1 + max(x, 0)) as float32   (computed in float64, rounded once)
                a missing I_j counts as x = 0, hence dense 0; counted in report.dense_defaulted
    sparse[t] = int(hex, 16)                    (one id per table per sample: a bag of one)
                a missing C_t reads as 0, as int("0", 16) does in the reference: the smallest
                value, so row 0 of its table; row 0 thus shares "missing" with a real hash 0
                (or, hashed, with the values that land there); counted in report.categorical_missing


Categorical values of at most 16 hex digits (64 bits) are read; Criteo's have 8. Each table's row is its value's rank among the feature's distinct values, as the DLRM
reference's dictionary numbers them (`scratchkit/data/row_maps.py`; capped by `max_rows`), or
`value % table_sizes[t]` when sizes are given: the hash trick the kit always offered.

The file streams (`scratchkit/data/convert.py`): a C++ loop checks every field of each 8 MB
block against the grammar below and decodes it in one pass (`criteo_native.py`; where no compiler
is found, pyarrow splits the block into columns and NumPy checks them, `fields.py`); a block with
anything odd is read again line by line by `parse_line`, which names the line. The columns go to
disk as they are made (`scratchkit/data/file_source.py`), so memory does not grow with the file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from scratchkit.data.blocks import BLOCK_BYTES
from scratchkit.data.convert import Chunk, only_bytes, read_columns
from scratchkit.data.criteo_native import LOG1P, decode_block, native_loader_available
from scratchkit.data.fields import Fields, decode_hex, decode_labels
from scratchkit.data.file_source import FileSource
from scratchkit.data.in_memory import table_sizes_from
from scratchkit.data.lines import MalformedLineError, OnBadLine, positive_int, show_value
from scratchkit.data.loading import convert_file, open_columns
from scratchkit.data.row_maps import DistinctValues, Modulo, derive_row_maps, load_row_maps, save_row_maps

NUM_DENSE = 13
NUM_CATEGORICAL = 26
NUM_COLUMNS = 1 + NUM_DENSE + NUM_CATEGORICAL  # 40
COLUMN_NAMES = ("label", *(f"I{j}" for j in range(1, NUM_DENSE + 1)), *(f"C{t}" for t in range(1, NUM_CATEGORICAL + 1)))
# Blocks for the C++ loop: 8 MB (~33k lines) is one thread's work, and below glibc's 32 MB
# limit for fresh pages from the kernel (mmap) on every block: at 32 MB, taking those pages
# cost ~0.3 s of CPU per 1M lines, more than the loop; pyarrow keeps BLOCK_BYTES for its threads
NATIVE_BLOCK_BYTES = 8 << 20
DEFAULT_BATCH_SIZE = 128  # the DLRM reference's Criteo Kaggle run (bench/dlrm_s_criteo_kaggle.sh)

_INTEGER = re.compile(r"-?[0-9]+")
# 308 digits: the most a float64 holds (1.8e308); a longer count would load as inf
MAX_DENSE_DIGITS = 308
_HEX = re.compile(r"[0-9A-Fa-f]+")
# A well-formed line in one test; lines that fail it go through `_diagnose` for a precise message.
_GOOD_LINE = re.compile(r"[01](?:\t(?:-?[0-9]{1,308})?){13}(?:\t[0-9A-Fa-f]{0,16}){26}")
MAX_HEX_DIGITS = 16  # 64 bits
# The bytes a well-formed block can hold. With nothing else in it, pyarrow's int64 reading of
# the counts accepts exactly `-?[0-9]+` (no space, '+' or 'x' for its leniency to act on).
_BLOCK_BYTES = b"0123456789abcdefABCDEF-\t\n\r"


def parse_line(line: str, source: str, line_number: int) -> list[str]:
    """The 40 fields of one line (newline removed), or MalformedLineError naming what is wrong."""
    if _GOOD_LINE.fullmatch(line) is None:
        _diagnose(line, source, line_number)
    return line.split("\t")


def _diagnose(line: str, source: str, line_number: int) -> None:
    """Raise for the first problem of a line that failed the one-test check, reading left to right."""

    def bad(kind: str, detail: str) -> MalformedLineError:
        return MalformedLineError(source, line_number, kind, detail)

    fields = line.split("\t")
    if len(fields) != NUM_COLUMNS:
        raise bad(
            "wrong column count",
            f"expected {NUM_COLUMNS} tab-separated columns (label, I1-I13, C1-C26), found {len(fields)}",
        )
    for column, (name, text) in enumerate(zip(COLUMN_NAMES, fields), start=1):
        where = f"column {column} ({name}) {show_value(text)}"
        if name == "label" and text not in ("0", "1"):
            raise bad("bad label", f"{where} is not 0 or 1")
        if name.startswith("I") and text and not _INTEGER.fullmatch(text):
            raise bad("non-integer dense value", f"{where} is not an integer")
        if name.startswith("I") and len(text.lstrip("-")) > MAX_DENSE_DIGITS:
            raise bad(
                "dense value too large",
                f"{where} has {len(text.lstrip('-'))} digits: more than "
                f"a float64 holds ({MAX_DENSE_DIGITS}), it would load as inf",
            )
        if name.startswith("C") and text and not _HEX.fullmatch(text):
            raise bad("non-hex category", f"{where} is not hex")
        if name.startswith("C") and len(text) > MAX_HEX_DIGITS:
            raise bad("category too long", f"{where} has {len(text)} hex digits: more than {MAX_HEX_DIGITS} (64 bits)")
    raise bad("malformed line", "line does not match the Criteo format")  # not reached


class CriteoFormat:
    """The Criteo TSV for the streaming loop (`scratchkit/data/convert.py`): a fast block reader
    and the line parser it falls back to, both giving the same Chunk."""

    name = "criteo"
    num_dense, num_tables, dense_dtype = NUM_DENSE, NUM_CATEGORICAL, np.float32

    def __init__(self, source: str, native: bool | None = None):
        self.source = source
        # the C++ decoder (criteo_native.py), else pyarrow + NumPy; None: C++ where it builds
        self.native = native_loader_available() if native is None else native
        self.block_bytes = NATIVE_BLOCK_BYTES if self.native else BLOCK_BYTES

    def parse_line(self, line: str, number: int) -> list[str]:
        return parse_line(line, self.source, number)

    def split(self, block):
        """What runs ahead on the reader thread: the whole block decoded by the C++ loop (a
        Chunk), or else pyarrow's columns (counts as int64, the rest as bytes); None if the
        block needs the line parser (a field out of place, a line pyarrow refuses)."""
        if self.native:
            return decode_block(block.data, block.lines)
        if not only_bytes(block.data, _BLOCK_BYTES):
            return None
        return read_columns(block.data, list(COLUMN_NAMES), "\t", COLUMN_NAMES[1 : 1 + NUM_DENSE])

    def fast(self, block, table=None) -> Chunk | None:
        """Every line of the block decoded at once, or None if any field is odd."""
        table = self.split(block) if table is None else table
        if table is None or isinstance(table, Chunk):
            return table
        labels = _decoded(table, COLUMN_NAMES[0], decode_labels)
        if labels is None:
            return None
        counts = [_int_column(table.column(name).combine_chunks()) for name in COLUMN_NAMES[1 : 1 + NUM_DENSE]]
        hexes = [_decoded(table, name, decode_hex) for name in COLUMN_NAMES[1 + NUM_DENSE :]]
        if any(h is None for h in hexes):
            return None
        values = np.stack([v for v, _ in counts], axis=1)  # int64 [n, 13]
        return Chunk(
            labels,
            _log_dense(values),
            np.stack([v for v, _ in hexes], axis=1),  # [n, 26]
            {
                "dense_missing": np.stack([m for _, m in counts], axis=1),  # [n, 13]
                "dense_negative": values < 0,
                "categorical_missing": np.stack([m for _, m in hexes], axis=1),
            },
        )

    def rows_to_chunk(self, rows: list[list[str]]) -> Chunk:
        """The slow twin: rows of 40 strings (checked by `parse_line`) to a Chunk."""
        text = np.array(rows, dtype=str).reshape(len(rows), NUM_COLUMNS)  # [n, 40]
        dense_text, cat_text = text[:, 1 : 1 + NUM_DENSE], text[:, 1 + NUM_DENSE :]
        values = np.where(dense_text == "", "0", dense_text).astype(np.float64)  # exact < 2**53
        sparse = np.array(
            [[int(h, 16) if h else 0 for h in row] for row in cat_text.tolist()], dtype=np.uint64
        ).reshape(len(rows), NUM_CATEGORICAL)
        return Chunk(
            (text[:, 0] == "1").astype(np.uint8),
            _log_dense(values),
            sparse,
            {"dense_missing": dense_text == "", "dense_negative": values < 0, "categorical_missing": cat_text == ""},
        )

    @staticmethod
    def count(chunk: Chunk, report) -> None:
        if not len(chunk):
            return
        report.dense_defaulted += int(chunk.marks["dense_missing"].sum())
        report.dense_clipped += int(chunk.marks["dense_negative"].sum())
        report.categorical_missing += int(chunk.marks["categorical_missing"].sum())
        missing = np.concatenate(
            [chunk.marks["dense_missing"].sum(axis=0), chunk.marks["categorical_missing"].sum(axis=0)]
        )
        for name, n in zip(COLUMN_NAMES[1:], missing.tolist()):
            if n:
                report.missing_by_column[name] = report.missing_by_column.get(name, 0) + n


def _int_column(array) -> tuple[np.ndarray, np.ndarray]:
    """An Arrow int64 array (nulls where the field was empty) as (values with 0 for a missing
    one, missing) from its buffers: ~10x pyarrow's fill_null + to_numpy on 130k values."""
    n, offset = len(array), array.offset
    validity, data = array.buffers()[:2]
    values = np.frombuffer(data, np.int64, n, offset * 8).copy()
    if validity is None or array.null_count == 0:
        return values, np.zeros(n, bool)
    bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[offset : offset + n]
    missing = bits == 0
    values[missing] = 0
    return values, missing


def _decoded(table, name: str, decode):
    """One column decoded per Arrow chunk and joined; None if any chunk declines."""
    parts = [decode(Fields.from_arrow(chunk)) for chunk in table.column(name).chunks]
    if any(p is None for p in parts):
        return None
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return np.zeros(0, np.uint8)
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate(column) for column in zip(*parts))
    return np.concatenate(parts)


def _log_dense(values: np.ndarray) -> np.ndarray:
    """[n, 13] counts (int64, or float64 past int64) -> float32 log(1 + max(x, 0)), computed in
    float64 and rounded once. Integer counts below 65536 (most of them) are looked up in a table
    of those same values; the others are computed."""
    if values.dtype.kind != "i":
        return np.log1p(np.maximum(values, 0.0)).astype(np.float32)
    clipped = np.maximum(values, 0)
    small = clipped < LOG1P.size
    if small.all():
        return LOG1P[clipped]
    out = LOG1P[np.where(small, clipped, 0)]
    out[~small] = np.log1p(clipped[~small].astype(np.float64)).astype(np.float32)
    return out


def load_criteo(
    path: str | Path,
    table_sizes: int | Sequence[int] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    max_rows: int | None = None,
    max_samples: int | None = None,
    errors: OnBadLine | str = OnBadLine.RAISE,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> FileSource:
    """Read a Criteo Kaggle/Terabyte TSV file (plain or .gz) as a batch source, streaming.

    table_sizes: None (default): each table has a row per distinct value of its feature (the
                 DLRM reference's dictionary); or rows of each of the 26 tables (one int for
                 all, or 26 ints), each hash taken modulo its table's size.
    max_rows:    with table_sizes None, no table gets more rows than this: a feature with more
                 distinct values is hashed into max_rows rows (value % max_rows).
    max_samples: stop after this many rows are loaded (None: the whole file).
    errors:      "raise" (default): the first malformed line raises ValueError as `file:line: ...`;
                 "skip": malformed lines are left out and counted in the report.
    cache_dir:   keep the converted columns in a folder here, and reuse them next time (default:
                 a temporary folder, deleted with the source).
    progress:    a progress bar on stderr (a terminal only) when reading takes over 2 s.
    The result's `.report` (a LoadReport) counts skipped lines, filled-in values and the rows of
    the incomplete last batch, which no batch contains.
    """
    if table_sizes is not None and max_rows is not None:
        raise ValueError(
            "give table_sizes (hash into those sizes) or max_rows (derive the sizes "
            "from the data, at most max_rows), not both"
        )
    sizes = None if table_sizes is None else table_sizes_from(table_sizes, NUM_CATEGORICAL)
    batch_size = positive_int("batch_size", batch_size)
    errors = OnBadLine.parse(errors)
    for name, value in (("max_rows", max_rows), ("max_samples", max_samples)):
        if value is not None:
            positive_int(name, value)
    distinct = DistinctValues(NUM_CATEGORICAL, cap=max_rows) if sizes is None else None

    def finish(folder: Path) -> dict:
        maps = [Modulo(n) for n in sizes] if sizes else derive_row_maps(distinct.finish(), max_rows)
        return {"row_maps": save_row_maps(maps, folder)}

    folder, temporary, meta = convert_file(
        path,
        CriteoFormat(str(path)),
        options={"table_sizes": sizes, "max_rows": max_rows},
        errors=errors,
        max_samples=max_samples,
        cache_dir=cache_dir,
        progress=progress,
        on_chunk=(lambda chunk: distinct.add(chunk.sparse)) if distinct else (lambda chunk: None),
        finish=finish,
    )
    maps = load_row_maps(meta.get("row_maps", []), folder)
    return open_columns(folder, temporary, meta, maps, batch_size)


__all__ = ["load_criteo", "parse_line", "CriteoFormat", "COLUMN_NAMES", "NUM_DENSE", "NUM_CATEGORICAL"]
