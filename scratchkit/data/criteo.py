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
    ids[t]    = int(hex, 16) % table_sizes[t]   (one id per table per sample: a bag of one)
                a missing C_t goes to row 0 of its table, as int("0", 16) does in the reference;
                so row 0 shares "missing" with the real values that hash there; counted in
                report.categorical_missing

Everything is held in memory: about 270 bytes per row once loaded, about 4 KB per row while the
text is parsed (measured with tracemalloc on the 7,200-row sample). That suits samples and slices
up to a million rows or so (`max_rows`); the full Kaggle set wants DLRM's preprocessing instead.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from scratchkit.data.in_memory import InMemoryDataset, table_sizes_from
from scratchkit.data.lines import (MalformedLineError, OnBadLine, open_text, parse_lines,
                                   positive_int, show_value)
from scratchkit.data.report import LoadReport

NUM_DENSE = 13
NUM_CATEGORICAL = 26
NUM_COLUMNS = 1 + NUM_DENSE + NUM_CATEGORICAL  # 40
COLUMN_NAMES = ("label", *(f"I{j}" for j in range(1, NUM_DENSE + 1)),
                *(f"C{t}" for t in range(1, NUM_CATEGORICAL + 1)))
DEFAULT_BATCH_SIZE = 128  # the DLRM reference's Criteo Kaggle run (bench/dlrm_s_criteo_kaggle.sh)

_INTEGER = re.compile(r"-?[0-9]+")
# 308 digits: the most a float64 holds (1.8e308); a longer count would load as inf
MAX_DENSE_DIGITS = 308
_HEX = re.compile(r"[0-9A-Fa-f]+")
# A well-formed line in one test; lines that fail it go through `_diagnose` for a precise message.
_GOOD_LINE = re.compile(r"[01](?:\t(?:-?[0-9]{1,308})?){13}(?:\t[0-9A-Fa-f]*){26}")


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
        raise bad("wrong column count", f"expected {NUM_COLUMNS} tab-separated columns "
                  f"(label, I1-I13, C1-C26), found {len(fields)}")
    for column, (name, text) in enumerate(zip(COLUMN_NAMES, fields), start=1):
        where = f"column {column} ({name}) {show_value(text)}"
        if name == "label" and text not in ("0", "1"):
            raise bad("bad label", f"{where} is not 0 or 1")
        if name.startswith("I") and text and not _INTEGER.fullmatch(text):
            raise bad("non-integer dense value", f"{where} is not an integer")
        if name.startswith("I") and len(text.lstrip("-")) > MAX_DENSE_DIGITS:
            raise bad("dense value too large", f"{where} has {len(text.lstrip('-'))} digits: more than "
                      f"a float64 holds ({MAX_DENSE_DIGITS}), it would load as inf")
        if name.startswith("C") and text and not _HEX.fullmatch(text):
            raise bad("non-hex category", f"{where} is not hex")
    raise bad("malformed line", "line does not match the Criteo format")  # not reached


def load_criteo(path: str | Path, table_sizes: int | Sequence[int],
                batch_size: int = DEFAULT_BATCH_SIZE, *, max_rows: int | None = None,
                errors: OnBadLine | str = OnBadLine.RAISE) -> InMemoryDataset:
    """Read a Criteo Kaggle/Terabyte TSV file (plain or .gz) into an in-memory batch source.

    table_sizes: rows of each of the 26 embedding tables (one int for all, or 26 ints); each
                 categorical hash is taken modulo its table's size.
    max_rows:    stop after this many rows are loaded (None: the whole file).
    errors:      "raise" (default): the first malformed line raises ValueError as `file:line: ...`;
                 "skip": malformed lines are left out and counted in the report.
    The result's `.report` (a LoadReport) counts skipped lines, filled-in values and the rows of
    the incomplete last batch, which no batch contains.
    """
    sizes = table_sizes_from(table_sizes, NUM_CATEGORICAL)
    batch_size = positive_int("batch_size", batch_size)
    errors = OnBadLine.parse(errors)
    if max_rows is not None:
        positive_int("max_rows", max_rows)
    source = str(path)
    report = LoadReport(source=source, num_dense=NUM_DENSE, num_tables=NUM_CATEGORICAL,
                        batch_size=batch_size)
    with open_text(path) as lines:
        rows = parse_lines(lines, lambda line, number: parse_line(line, source, number),
                           report, errors=errors, max_rows=max_rows)
    n = len(rows)
    if n < batch_size:
        raise ValueError(f"{source}: {n} rows loaded, fewer than one batch of {batch_size}\n{report}")

    fields = np.array(rows, dtype=str).reshape(n, NUM_COLUMNS)  # [N, 40] text
    labels = (fields[:, 0] == "1").astype(np.float32)           # [N]
    dense = _dense_features(fields[:, 1:1 + NUM_DENSE], report)  # [N, 13]
    ids = _categorical_ids(fields[:, 1 + NUM_DENSE:], sizes, report)  # [26, N]
    report.rows_dropped = n % batch_size
    return InMemoryDataset(dense, ids, labels, sizes, batch_size, report)


def _dense_features(text: np.ndarray, report: LoadReport) -> np.ndarray:
    """[N, 13] text -> [N, 13] float32: log(1 + max(x, 0)), missing as 0 (counted)."""
    missing = text == ""
    values = np.where(missing, "0", text).astype(np.float64)  # exact for |x| < 2**53
    report.dense_defaulted = int(missing.sum())
    report.dense_clipped = int((values < 0).sum())
    _count_missing_by_column(missing, COLUMN_NAMES[1:1 + NUM_DENSE], report)
    return np.log1p(np.maximum(values, 0.0)).astype(np.float32)


def _categorical_ids(text: np.ndarray, sizes: tuple[int, ...], report: LoadReport) -> np.ndarray:
    """[N, 26] hex text -> [26, N] int64 rows: int(hex, 16) % size, missing to row 0 (counted)."""
    missing = text == ""
    report.categorical_missing = int(missing.sum())
    _count_missing_by_column(missing, COLUMN_NAMES[1 + NUM_DENSE:], report)
    ids = np.empty((len(sizes), text.shape[0]), dtype=np.int64)
    for t, size in enumerate(sizes):  # Python ints: any hash length, no overflow before the modulo
        ids[t] = [int(h, 16) % size if h else 0 for h in text[:, t].tolist()]
    return ids


def _count_missing_by_column(missing: np.ndarray, names: Sequence[str], report: LoadReport) -> None:
    for name, n in zip(names, missing.sum(axis=0).tolist()):
        if n:
            report.missing_by_column[name] = n


__all__ = ["load_criteo", "parse_line", "COLUMN_NAMES", "NUM_DENSE", "NUM_CATEGORICAL"]
