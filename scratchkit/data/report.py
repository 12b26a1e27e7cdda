"""What a real-format loader did to the file: rows kept, rows skipped, values filled in.

Real logs have holes and the odd broken line. The rule of the kit is that nothing is dropped or
defaulted silently: every loader counts what it skipped, filled in or clipped, and hands that back
as a `LoadReport`, printable in one glance:

    >>> print(load_criteo("train.tsv").report)
    train.tsv: 7,200 of 7,200 lines loaded as rows, 0 skipped
      dense values missing, set to 0: ...
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields

from scratchkit.data.lines import FIRST_ERRORS_KEPT, MalformedLineError


@dataclass
class LoadReport:
    """Counts of everything a loader skipped, filled in or changed while reading one file."""

    source: str  # the file, as the caller named it
    num_dense: int = 0  # dense features per row, to turn counts into shares
    num_tables: int = 0  # categorical features (= embedding tables) per row
    lines_read: int = 0  # data lines looked at (a header is not counted)
    rows_loaded: int = 0  # lines that became samples
    skip_reasons: Counter = field(default_factory=Counter)  # kind -> lines skipped for it
    first_errors: list[str] = field(default_factory=list)  # the first FIRST_ERRORS_KEPT messages
    dense_defaulted: int = 0  # missing dense values replaced by 0
    dense_clipped: int = 0  # negative dense values clipped to 0 before the log transform
    categorical_missing: int = 0  # missing categorical values, sent to row 0 of their table
    missing_by_column: dict[str, int] = field(default_factory=dict)  # column name -> missing values
    batch_size: int = 0
    rows_dropped: int = 0  # rows of the incomplete last batch, left out of every batch
    stopped_at_max_samples: bool = False  # reading stopped early: max_samples rows were loaded

    @property
    def rows_skipped(self) -> int:
        return sum(self.skip_reasons.values())

    @property
    def rows_in_batches(self) -> int:
        return self.rows_loaded - self.rows_dropped

    def record_skip(self, error: MalformedLineError) -> None:
        """Count a skipped line under its kind; keep its message if it is among the first few."""
        self.skip_reasons[error.kind] += 1
        if len(self.first_errors) < FIRST_ERRORS_KEPT:
            self.first_errors.append(str(error))

    def to_dict(self) -> dict:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return values | {
            "skip_reasons": dict(self.skip_reasons),
            "first_errors": list(self.first_errors),
            "missing_by_column": dict(self.missing_by_column),
        }

    @classmethod
    def from_dict(cls, values: dict) -> "LoadReport":
        report = cls(**values)
        report.skip_reasons = Counter(report.skip_reasons)
        return report

    def __str__(self) -> str:
        stop = " (stopped at max_samples)" if self.stopped_at_max_samples else ""
        lines = [
            f"{self.source}: {self.rows_loaded:,} of {self.lines_read:,} lines loaded as rows, "
            f"{self.rows_skipped:,} skipped{stop}"
        ]
        for kind, n in sorted(self.skip_reasons.items()):
            lines.append(f"  skipped, {kind}: {n:,}")
        lines += [f"    {message}" for message in self.first_errors]
        dense_total = self.rows_loaded * self.num_dense
        cat_total = self.rows_loaded * self.num_tables
        changed = [
            ("dense values missing, set to 0", self.dense_defaulted, dense_total),
            ("dense values negative, clipped to 0", self.dense_clipped, dense_total),
            ("categorical values missing, sent to row 0", self.categorical_missing, cat_total),
        ]
        for what, n, total in changed:
            if n:
                lines.append(f"  {what}: {_share(n, total)}")
        if not any(n for _, n, _ in changed):
            lines.append("  no values missing or changed")
        if self.missing_by_column:
            worst = sorted(self.missing_by_column.items(), key=lambda kv: -kv[1])[:6]
            lines.append("  most missing: " + ", ".join(f"{name} {n:,}" for name, n in worst))
        if self.batch_size:
            lines.append(
                f"  batches of {self.batch_size}: {self.rows_in_batches // self.batch_size:,}; "
                f"rows dropped in the incomplete last batch: {self.rows_dropped:,}"
            )
        return "\n".join(lines)


def _share(n: int, total: int) -> str:
    percent = f" ({100 * n / total:.1f}%)" if total else ""
    return f"{n:,} of {total:,}{percent}"
