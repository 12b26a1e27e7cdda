"""Reading a data file line by line, with errors that say `file:line: what is wrong`.

Both real-format loaders (Criteo, MovieLens) share this loop: open the file (plain or `.gz`),
hand each line to a per-format parser, and on a malformed line either stop (`errors="raise"`)
or skip it and count it (`errors="skip"`). Counting lives in `LoadReport`.
"""

from __future__ import annotations

import gzip
import operator
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path
from typing import TextIO, TypeVar

from scratchkit.choices import parse_choice

FIRST_ERRORS_KEPT = 5  # enough messages to see what is wrong with a file, few enough to print
Row = TypeVar("Row")


class OnBadLine(str, Enum):
    """What a loader does with a malformed line."""

    RAISE = "raise"  # stop at the first bad line: the default, since one bad line often means a bad file
    SKIP = "skip"  # leave the line out, count it, keep the first few messages in the report

    @classmethod
    def parse(cls, name: "OnBadLine | str") -> "OnBadLine":
        return parse_choice(cls, name, "errors=", choose="choose one of", quote=True)


class MalformedLineError(ValueError):
    """A line that cannot be read; the message reads `file:line: what is wrong`.

    `kind` is a short category ("wrong column count", "non-hex category", ...): the key under which
    `LoadReport.skip_reasons` counts the line when the loader skips bad lines.
    """

    def __init__(self, path: str, line_number: int, kind: str, detail: str):
        self.path = path
        self.line_number = line_number  # 1-based, counting every physical line (a header too)
        self.kind = kind
        self.detail = detail
        super().__init__(f"{path}:{line_number}: {detail}")


def show_value(text: str, limit: int = 24) -> str:
    """`repr` of a field from a file, shortened so that a message stays on one line."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def open_text(path: str | Path) -> TextIO:
    """Open a data file for reading text; `.gz` files (as Criteo Terabyte ships) are decompressed.

    Undecodable bytes become U+FFFD instead of raising, so they surface as a malformed field with
    its line number rather than as a UnicodeDecodeError without one.
    """
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def positive_int(name: str, value) -> int:
    """`value` as an int if it is a positive integer (not a bool, not 2.0), else ValueError."""
    try:
        number = operator.index(value)
    except TypeError:
        number = 0
    if number <= 0 or isinstance(value, bool):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return number


def parse_lines(
    lines: Iterator[str],
    parse: Callable[[str, int], Row],
    report,
    errors: OnBadLine | str = OnBadLine.RAISE,
    max_samples: int | None = None,
    first_line_number: int = 1,
) -> list[Row]:
    """`parse(line, line_number)` on each line (newline removed); the rows it returns, in order.

    `parse` raises `MalformedLineError` for a bad line: re-raised under `errors="raise"`, counted
    in `report` (a LoadReport, scratchkit/data/report.py) and left out under `errors="skip"`.
    Reading stops once `max_samples` rows are parsed (the report says so if lines were left).
    Adds to the report's counts, so a file read in blocks calls it once a block.
    """
    errors = OnBadLine.parse(errors)
    if max_samples is not None:
        positive_int("max_samples", max_samples)
    rows: list[Row] = []
    for line_number, line in enumerate(lines, start=first_line_number):
        if max_samples is not None and len(rows) >= max_samples:
            report.stopped_at_max_samples = True
            break
        report.lines_read += 1
        try:
            rows.append(parse(line.rstrip("\r\n"), line_number))
        except MalformedLineError as error:
            if errors is OnBadLine.RAISE:
                raise
            report.record_skip(error)
    report.rows_loaded += len(rows)
    return rows
