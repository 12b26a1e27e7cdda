"""Notebook 06's exercises: how skewed a trace is, and the rows a loaded column gets.

hottest_share(trace, fraction)   the share of lookups served by the hottest `fraction` of
                                 distinct ids, checked against
                                 scratchkit.course.analysis.top_share (the notebook's figure)
table_rows(values, max_rows)     a column's raw values -> rows of its table, as the loader
                                 maps them: checked against scratchkit.data.row_maps
                                 (derive_row_maps: a Dictionary, or Modulo past max_rows)
"""

from __future__ import annotations

import numpy as np

from scratchkit.course.analysis import top_share
from scratchkit.course.exercises.checking import Case, Exercise, register
from scratchkit.data.row_maps import derive_row_maps
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.data.trace import make_trace
from scratchkit.profiles import get_profile


def _ids(*ids) -> np.ndarray:
    return np.array(ids, dtype=np.int64)


def _share_cases() -> list[Case]:
    hot = _ids(*[1] * 6, 2, 3, 4, 5, 6, 7, 8, 9, 10)  # 10 distinct ids, id 1 hot
    ranked = _ids(1, 2, 2, 3, 3, 3)  # the hottest id is the largest
    return [
        Case(
            (_ids(1, 1, 1, 5, 2), 0.2),
            "3 distinct ids, the hottest 20%",
            "round the number of ids up, to at least one: ceil(fraction x distinct ids)",
        ),
        Case(
            (ranked, 0.5),
            "the hottest ids are not the smallest",
            "rank the distinct ids by their number of lookups (np.unique(..., return_counts=True)), most first",
        ),
        Case(
            (hot, 0.25),
            "a fraction of the distinct ids, not of the lookups",
            "fraction is of the 10 distinct ids (ceil(2.5) = 3 of them), not of the 15 lookups",
        ),
        Case((hot, 1.0), "every id", "all the distinct ids serve every lookup: 1.0"),
        Case(
            (_ids(), 0.01),
            "an empty trace",
            "with no lookups there is no share: raise ValueError, as the kit does, rather than return 0 / 0",
        ),
        Case(
            (make_trace(SyntheticSource(get_profile("small").data), 4), 0.01),
            "4 batches of the small profile, the hottest 1%",
            shown="make_trace(small source, 4), 0.01",
        ),
    ]


def kit_rows(values: np.ndarray, max_rows: int | None) -> np.ndarray:
    """The loader's rows for one column: derive_row_maps over its distinct values, applied."""
    (row_map,) = derive_row_maps([np.unique(values)], max_rows)
    return row_map(values)


def _values(*values) -> np.ndarray:
    return np.array(values, dtype=np.uint32)  # a Criteo hash: 8 hex digits, read as uint32


def _rows_cases() -> list[Case]:
    hashes = np.random.default_rng(6).integers(0, 2**32, 3000, dtype=np.uint32)
    column = hashes[np.random.default_rng(7).zipf(1.3, 2000) % hashes.size]  # repeats, like a log
    distinct = np.unique(column).size
    return [
        Case(
            (_values(0x30, 0x10, 0x20, 0x10), None),
            "one row per distinct value",
            "row = the value's rank among the column's distinct values, sorted: np.unique, then np.searchsorted",
        ),
        Case(
            (_values(0x5D534602, 0, 0x646C2BA0, 0), None),
            "missing values (read as 0)",
            "a missing value is read as 0, the smallest value: it lands in row 0 with no special case",
        ),
        Case(
            (_values(7, 3, 9, 3), 3),
            "exactly max_rows distinct values",
            "a column with max_rows distinct values or fewer keeps one row per value: only a column "
            "with more is hashed",
        ),
        Case(
            (_values(7, 3, 9, 12, 3), 3),
            "more distinct values than max_rows",
            "past max_rows distinct values the column is hashed: row = value % max_rows",
        ),
        Case(
            (column, 100),
            f"a Zipf-like column of {distinct:,} distinct hashes, max_rows 100",
            shown=f"column [{column.size}] uint32, 100",
        ),
        Case((column, 10**6), "the same column, max_rows 1,000,000", shown=f"column [{column.size}] uint32, 10**6"),
    ]


register(
    Exercise(
        "hottest_share",
        "hottest_share(trace, fraction)",
        _share_cases,
        top_share,
        "count each id's lookups, take the ceil(fraction x distinct ids) largest counts, divide "
        "their sum by the number of lookups",
    ),
    Exercise(
        "table_rows",
        "table_rows(values, max_rows)",
        _rows_cases,
        kit_rows,
        "distinct = np.unique(values); if max_rows is None or distinct.size <= max_rows: "
        "np.searchsorted(distinct, values), else values % max_rows",
    ),
)
