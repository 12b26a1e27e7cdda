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

The file streams as the Criteo one does (`scratchkit/data/convert.py`): pyarrow splits blocks
into columns, NumPy checks and decodes them, an odd block is read again line by line by
`parse_rating`; the columns go to disk (`file_source.py`), the raw timestamps with them, scaled
as each batch is read. `max_rows` caps a table: ids at or past it are hashed (id % max_rows).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from enum import Enum
from pathlib import Path

import numpy as np

from scratchkit.choices import parse_choice
from scratchkit.data.blocks import first_line_of
from scratchkit.data.convert import Chunk, read_columns
from scratchkit.data.fields import Fields, decode_decimals, decode_ints
from scratchkit.data.file_source import FileSource
from scratchkit.data.in_memory import table_sizes_from
from scratchkit.data.lines import MalformedLineError, OnBadLine, positive_int, show_value
from scratchkit.data.loading import convert_file, open_columns
from scratchkit.data.row_maps import Modulo

LIKE_THRESHOLD = 4.0  # 4 and 5 stars read as a click: the usual cut from ratings to implicit
# feedback, keeping an average 3 out of the positives
DEFAULT_BATCH_SIZE = 128  # as for Criteo: the DLRM reference's Kaggle mini-batch
TABLE_NAMES = ("users", "movies")

_ID = re.compile(r"[0-9]+")
_RATING = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_TIMESTAMP = re.compile(r"-?[0-9]+")


class MovieLensFormat(str, Enum):
    """The two rating files the loader reads, named after the files that use them."""

    U_DATA = "u.data"  # tab-separated, no header
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
        raise ValueError(
            f"{path}: cannot tell the MovieLens format from the file name; pass format='u.data' or format='ratings.csv'"
        )


def parse_rating(
    line: str, source: str, line_number: int, fmt: MovieLensFormat, table_sizes: tuple[int, int] | None
) -> tuple[int, int, float, int]:
    """(user, movie, rating, timestamp) of one line, or MalformedLineError naming what is wrong."""

    def bad(kind: str, detail: str) -> MalformedLineError:
        return MalformedLineError(source, line_number, kind, detail)

    fields = line.split(fmt.separator)
    names = fmt.column_names
    if len(fields) != 4:
        sep = "tab" if fmt is MovieLensFormat.U_DATA else "comma"
        raise bad("wrong column count", f"expected 4 {sep}-separated columns ({', '.join(names)}), found {len(fields)}")
    user, movie, rating, timestamp = fields

    def where(column: int) -> str:
        return f"column {column + 1} ({names[column]}) {show_value(fields[column])}"

    for column in (0, 1):
        if not _ID.fullmatch(fields[column]):
            raise bad("bad id", f"{where(column)} is not a non-negative integer")
        if int(fields[column]) >= 2**63:
            raise bad("bad id", f"{where(column)} does not fit a 64-bit integer")
    if not _RATING.fullmatch(rating):
        raise bad("bad rating", f"{where(2)} is not a non-negative number")
    if not _TIMESTAMP.fullmatch(timestamp):
        raise bad("bad timestamp", f"{where(3)} is not an integer")
    if not math.isfinite(float(rating)):
        raise bad("bad rating", f"{where(2)} is too large for a floating-point number")
    if not -(2**63) <= int(timestamp) < 2**63:
        raise bad("bad timestamp", f"{where(3)} does not fit a 64-bit integer")
    ids = (int(user), int(movie))
    if table_sizes is not None:
        for column, (row, size) in enumerate(zip(ids, table_sizes)):
            if row >= size:
                raise bad(
                    "id outside table", f"{where(column)} does not fit the {TABLE_NAMES[column]} table of {size} rows"
                )
    return ids[0], ids[1], float(rating), int(timestamp)


class RatingsFormat:
    """u.data or ratings.csv for the streaming loop: a fast block reader and its line twin."""

    name = "movielens"
    num_dense, num_tables, dense_dtype = 1, 2, np.int64  # dense: the raw timestamp

    def __init__(self, source: str, fmt: MovieLensFormat, sizes, like_threshold: float):
        self.source, self.fmt, self.sizes, self.threshold = source, fmt, sizes, like_threshold

    def parse_line(self, line: str, number: int):
        return parse_rating(line, self.source, number, self.fmt, self.sizes)

    def split(self, block):
        """The block's columns as raw bytes (pyarrow), or None; runs ahead on a thread."""
        return read_columns(block.data, list(self.fmt.column_names), self.fmt.separator)

    def fast(self, block, table=None) -> Chunk | None:
        table = self.split(block) if table is None else table
        if table is None:
            return None
        decoders = (
            lambda f: _whole(decode_ints(f, signed=False)),
            lambda f: _whole(decode_ints(f, signed=False)),
            decode_decimals,
            lambda f: _whole(decode_ints(f, signed=True)),
        )
        columns = []
        for name, decode in zip(self.fmt.column_names, decoders):
            parts = [decode(Fields.from_arrow(chunk)) for chunk in table.column(name).chunks]
            if any(p is None for p in parts):
                return None
            columns.append(np.concatenate(parts) if parts else np.zeros(0))
        users, movies, ratings, times = columns
        if self.sizes is not None and ((users >= self.sizes[0]).any() or (movies >= self.sizes[1]).any()):
            return None  # the line parser names the line
        return self._chunk(users, movies, ratings, times)

    def rows_to_chunk(self, rows) -> Chunk:
        """The slow twin: (user, movie, rating, timestamp) tuples checked by `parse_rating`."""
        if not rows:
            return self._chunk(*(np.zeros(0, np.int64),) * 2, np.zeros(0), np.zeros(0, np.int64))
        users, movies, ratings, times = (np.array(c) for c in zip(*rows))
        return self._chunk(users, movies, ratings.astype(np.float64), times)

    def _chunk(self, users, movies, ratings, times) -> Chunk:
        return Chunk(
            (ratings >= self.threshold).astype(np.uint8),
            times.astype(np.int64)[:, None],  # [n, 1]
            np.stack([users, movies], axis=1).astype(np.uint64),
        )  # [n, 2]

    @staticmethod
    def count(chunk: Chunk, report) -> None:
        """Nothing is filled in or clipped in a ratings file: only skipped lines count."""


def _whole(decoded):
    """Integers with no empty field (MovieLens has no missing values), else None."""
    if decoded is None or decoded[1].any():
        return None
    return decoded[0]


class ScaledTime:
    """Raw timestamps [n, 1] -> float32 (t - t_min) / (t_max - t_min), 0 when all are equal."""

    def __init__(self, t_min: int, t_max: int):
        self.t_min, self.t_max = int(t_min), int(t_max)

    def __call__(self, t: np.ndarray) -> np.ndarray:
        span = float(self.t_max) - float(self.t_min)
        t = t.astype(np.float64)
        scaled = (t - float(self.t_min)) / span if span > 0 else np.zeros_like(t)
        return scaled.astype(np.float32)


class _Extent:
    """The largest ids and the time span of the rows kept, gathered chunk by chunk."""

    def __init__(self):
        self.top = [0, 0]
        self.t_min = self.t_max = None

    def __call__(self, chunk: Chunk) -> None:
        self.top = [max(self.top[t], int(chunk.sparse[:, t].max())) for t in range(2)]
        low, high = int(chunk.dense.min()), int(chunk.dense.max())
        self.t_min = low if self.t_min is None else min(self.t_min, low)
        self.t_max = high if self.t_max is None else max(self.t_max, high)


def load_movielens(
    path: str | Path,
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    table_sizes: Sequence[int] | None = None,
    like_threshold: float = LIKE_THRESHOLD,
    format: MovieLensFormat | str | None = None,
    max_rows: int | None = None,
    max_samples: int | None = None,
    errors: OnBadLine | str = OnBadLine.RAISE,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> FileSource:
    """Read MovieLens ratings (u.data or ratings.csv, plain or .gz) as a batch source, streaming.

    table_sizes:    (users, movies) table rows; None: largest id loaded + 1. An id that does not
                    fit a given size is a malformed line.
    max_rows:       with table_sizes None, at most this many rows a table: larger ids are hashed
                    (id % max_rows).
    like_threshold: ratings >= this are label 1.
    format:         "u.data" or "ratings.csv"; None: guessed from the file name.
    max_samples, errors, cache_dir, progress: as for `load_criteo`. A missing or wrong
                    ratings.csv header always raises, whatever `errors` says: it means the wrong
                    file, not one bad line.
    """
    fmt = MovieLensFormat.guess(path) if format is None else MovieLensFormat.parse(format)
    sizes = None if table_sizes is None else table_sizes_from(table_sizes, 2)
    if not math.isfinite(like_threshold):
        raise ValueError(f"like_threshold must be a finite number, got {like_threshold}")
    if sizes is not None and max_rows is not None:
        raise ValueError("give table_sizes or max_rows, not both")
    batch_size = positive_int("batch_size", batch_size)
    errors = OnBadLine.parse(errors)
    for name, value in (("max_rows", max_rows), ("max_samples", max_samples)):
        if value is not None:
            positive_int(name, value)
    source = str(path)
    first_line, skip = 1, 0
    if fmt.header is not None and Path(path).is_file():
        header, skip = first_line_of(path)
        if header.lstrip("\ufeff") != fmt.header:
            raise MalformedLineError(
                source, 1, "bad header", f"expected the header {fmt.header!r}, found {show_value(header, 60)}"
            )
        first_line = 2
    extent = _Extent()

    def finish(folder: Path) -> dict:
        return {"top_ids": extent.top, "time_span": [extent.t_min, extent.t_max]}

    folder, temporary, meta = convert_file(
        path,
        RatingsFormat(source, fmt, sizes, float(like_threshold)),
        options={"format": fmt.value, "table_sizes": sizes, "like_threshold": like_threshold},
        errors=errors,
        max_samples=max_samples,
        cache_dir=cache_dir,
        progress=progress,
        on_chunk=extent,
        finish=finish,
        first_line=first_line,
        skip_bytes=skip,
    )
    if sizes is None and meta["rows"]:
        sizes = tuple(top + 1 if max_rows is None else min(top + 1, max_rows) for top in meta["top_ids"])
    maps = [Modulo(n) for n in (sizes or (1, 1))]
    return open_columns(
        folder,
        temporary,
        meta,
        maps,
        batch_size,
        dense_transform=ScaledTime(*meta["time_span"]) if meta["rows"] else None,
    )


__all__ = ["load_movielens", "MovieLensFormat", "RatingsFormat", "parse_rating", "LIKE_THRESHOLD"]
