"""MovieLens ratings as a two-table DLRM dataset: users and movies, label = "liked it".

Two file formats, one rating per line:

    u.data       (MovieLens 100K)           user \\t item \\t rating \\t timestamp, no header
    ratings.csv  (ml-latest, 20M, 25M, 32M) header `userId,movieId,rating,timestamp`, then
                                            user,movie,rating,timestamp (ratings in half stars)

As a DLRM sample each rating becomes:

    ids       table 0 = the user id, table 1 = the movie id, used as row numbers unchanged (MovieLens
              ids start at 1, so row 0 of each table is never used); table sizes = largest id + 1,
              or given
    label     1 if rating >= like_threshold else 0
    dense     one feature: the timestamp scaled to [0, 1] over the rows loaded,
              (t - t_min) / (t_max - t_min) (0 when all are equal): when the rating was made,
              the one per-rating number the file has besides the label's source

Rows stay in file order (u.data is in no particular order; ratings.csv is sorted by user).
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from enum import Enum
from pathlib import Path

import numpy as np

from scratchkit.choices import parse_choice
from scratchkit.data.in_memory import InMemoryDataset, table_sizes_from
from scratchkit.data.lines import (MalformedLineError, OnBadLine, open_text, parse_lines,
                                   positive_int, show_value)
from scratchkit.data.report import LoadReport

LIKE_THRESHOLD = 4.0  # 4 and 5 stars read as a click: the usual cut from ratings to implicit
                      # feedback, keeping an average 3 out of the positives
DEFAULT_BATCH_SIZE = 128  # as for Criteo: the DLRM reference's Kaggle mini-batch
TABLE_NAMES = ("users", "movies")

_ID = re.compile(r"[0-9]+")
_RATING = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_TIMESTAMP = re.compile(r"-?[0-9]+")


class MovieLensFormat(str, Enum):
    """The two rating files the loader reads, named after the files that use them."""

    U_DATA = "u.data"            # tab-separated, no header
    RATINGS_CSV = "ratings.csv"  # comma-separated, one header line

    @property
    def separator(self) -> str:
        return "\t" if self is MovieLensFormat.U_DATA else ","

    @property
    def column_names(self) -> tuple[str, str, str, str]:
        if self is MovieLensFormat.U_DATA:
            return ("user id", "item id", "rating", "timestamp")  # the names of ML-100K's README
        return ("userId", "movieId", "rating", "timestamp")

    @property
    def header(self) -> str | None:
        return ",".join(self.column_names) if self is MovieLensFormat.RATINGS_CSV else None

    @classmethod
    def parse(cls, name: "MovieLensFormat | str") -> "MovieLensFormat":
        return parse_choice(cls, name, "MovieLens format ", choose="choose one of", quote=True)

    @classmethod
    def guess(cls, path: str | Path) -> "MovieLensFormat":
        """From the file name: `*.csv` is ratings.csv, `*.data` (and .tsv) is u.data."""
        name = str(path).removesuffix(".gz")
        if name.endswith(".csv"):
            return cls.RATINGS_CSV
        if name.endswith((".data", ".tsv")):
            return cls.U_DATA
        raise ValueError(f"{path}: cannot tell the MovieLens format from the file name; "
                         f"pass format='u.data' or format='ratings.csv'")


def parse_rating(line: str, source: str, line_number: int, fmt: MovieLensFormat,
                 table_sizes: tuple[int, int] | None) -> tuple[int, int, float, int]:
    """(user, movie, rating, timestamp) of one line, or MalformedLineError naming what is wrong."""
    def bad(kind: str, detail: str) -> MalformedLineError:
        return MalformedLineError(source, line_number, kind, detail)

    fields = line.split(fmt.separator)
    names = fmt.column_names
    if len(fields) != 4:
        sep = "tab" if fmt is MovieLensFormat.U_DATA else "comma"
        raise bad("wrong column count", f"expected 4 {sep}-separated columns "
                  f"({', '.join(names)}), found {len(fields)}")
    user, movie, rating, timestamp = fields

    def where(column: int) -> str:
        return f"column {column + 1} ({names[column]}) {show_value(fields[column])}"

    for column in (0, 1):
        if not _ID.fullmatch(fields[column]):
            raise bad("bad id", f"{where(column)} is not a non-negative integer")
    if not _RATING.fullmatch(rating):
        raise bad("bad rating", f"{where(2)} is not a non-negative number")
    if not _TIMESTAMP.fullmatch(timestamp):
        raise bad("bad timestamp", f"{where(3)} is not an integer")
    if not math.isfinite(float(rating)):
        raise bad("bad rating", f"{where(2)} is too large for a floating-point number")
    if not -2**63 <= int(timestamp) < 2**63:
        raise bad("bad timestamp", f"{where(3)} does not fit a 64-bit integer")
    ids = (int(user), int(movie))
    if table_sizes is not None:
        for column, (row, size) in enumerate(zip(ids, table_sizes)):
            if row >= size:
                raise bad("id outside table", f"{where(column)} does not fit the "
                          f"{TABLE_NAMES[column]} table of {size} rows")
    return ids[0], ids[1], float(rating), int(timestamp)


def load_movielens(path: str | Path, batch_size: int = DEFAULT_BATCH_SIZE, *,
                   table_sizes: Sequence[int] | None = None,
                   like_threshold: float = LIKE_THRESHOLD,
                   format: MovieLensFormat | str | None = None,
                   max_rows: int | None = None,
                   errors: OnBadLine | str = OnBadLine.RAISE) -> InMemoryDataset:
    """Read MovieLens ratings (u.data or ratings.csv, plain or .gz) into an in-memory batch source.

    table_sizes:    (users, movies) table rows; None: largest id loaded + 1. An id that does not
                    fit a given size is a malformed line.
    like_threshold: ratings >= this are label 1.
    format:         "u.data" or "ratings.csv"; None: guessed from the file name.
    max_rows, errors: as for `load_criteo`. A missing or wrong ratings.csv header always raises,
                    whatever `errors` says: it means the wrong file, not one bad line.
    """
    fmt = MovieLensFormat.guess(path) if format is None else MovieLensFormat.parse(format)
    sizes = None if table_sizes is None else table_sizes_from(table_sizes, 2)
    if not math.isfinite(like_threshold):
        raise ValueError(f"like_threshold must be a finite number, got {like_threshold}")
    batch_size = positive_int("batch_size", batch_size)
    errors = OnBadLine.parse(errors)
    if max_rows is not None:
        positive_int("max_rows", max_rows)
    source = str(path)
    report = LoadReport(source=source, num_dense=1, num_tables=2, batch_size=batch_size)

    def parse(line: str, number: int):
        return parse_rating(line, source, number, fmt, sizes)

    with open_text(path) as lines:
        first_line_number = 1
        if fmt.header is not None:
            header = next(lines, "").rstrip("\r\n").lstrip("\ufeff")
            if header != fmt.header:
                raise MalformedLineError(source, 1, "bad header",
                                         f"expected the header {fmt.header!r}, found {show_value(header, 60)}")
            first_line_number = 2
        rows = parse_lines(lines, parse, report, errors=errors, max_rows=max_rows,
                           first_line_number=first_line_number)
    n = len(rows)
    if n < batch_size:
        raise ValueError(f"{source}: {n} rows loaded, fewer than one batch of {batch_size}\n{report}")

    users, movies, ratings, timestamps = (np.array(column) for column in zip(*rows))
    ids = np.stack([users, movies]).astype(np.int64)                  # [2, N]
    if sizes is None:
        sizes = (int(users.max()) + 1, int(movies.max()) + 1)
    labels = (ratings >= like_threshold).astype(np.float32)          # [N]
    dense = _scaled_time(timestamps.astype(np.float64))[:, None]     # [N, 1]
    report.rows_dropped = n % batch_size
    return InMemoryDataset(dense, ids, labels, sizes, batch_size, report)


def _scaled_time(t: np.ndarray) -> np.ndarray:
    """Timestamps scaled to [0, 1] over these rows, float32; all 0 when every timestamp is equal."""
    span = t.max() - t.min()
    scaled = (t - t.min()) / span if span > 0 else np.zeros_like(t)
    return scaled.astype(np.float32)


__all__ = ["load_movielens", "MovieLensFormat", "parse_rating", "LIKE_THRESHOLD"]
