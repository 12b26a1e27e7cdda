"""The cost model's curves: speeds that depend on the size of what is done, measured (or derived
from a datasheet) at a few sizes and interpolated.

    RowCurve    seconds per row of a random-row gather or scatter, by the row's bytes and the
                footprint (bytes of the table the rows come from): a table inside the last-level
                cache gathers several times faster than one beyond it
    RateCurve   a rate by the size of one call: the kit's sorts (keys x log2 keys per second at n
                keys: the n log n shape, and what is left of it measured at each n) and matrix
                multiplications (FLOP/s by FLOPs per call: small matmuls run far below peak)

Both interpolate log-linearly between their points and hold the end values beyond them: no
extrapolation past what was measured.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass


def interp_log(xs: list[float], ys: list[float], x: float) -> float:
    """y at x, interpolated linearly in (log x, log y) between sorted points; the ends held."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect_left(xs, x)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    w = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return math.exp(math.log(y0) + w * (math.log(y1) - math.log(y0)))


@dataclass(frozen=True)
class RowCurve:
    """Seconds per row of a random-row gather (or scatter) call, by the row's bytes, the bytes of
    the table, and the rows the call moves: points (row_bytes, footprint, rows, seconds per row).

    The rows of one call matter: a call that moves a table's worth of rows pulls the table into
    the core's caches as it goes, one that moves a few hundred pays a miss for each, and a call's
    own fixed cost (counted apart, as a kit call's) is not in these figures."""

    points: tuple[tuple[float, float, float, float], ...]

    def __post_init__(self):
        if not self.points or any(len(p) != 4 or not all(x > 0 for x in p) for p in self.points):
            raise ValueError(
                f"a row curve needs points of four positive numbers (row_bytes, "
                f"footprint, rows, seconds), got {self.points!r}"
            )

    def seconds_per_row(self, row_bytes: float, footprint: float, rows: float = 1.0) -> float:
        """Interpolated in the call's rows and the footprint at each measured row size, then in
        the row size. Rows narrower than the narrowest measured cost what it costs (one cache
        line either way); wider ones cost in proportion to their bytes."""
        sizes = sorted({p[0] for p in self.points})
        at = {r: self._at_row_size(r, footprint, rows) for r in sizes}
        if row_bytes > sizes[-1]:
            return at[sizes[-1]] * row_bytes / sizes[-1]
        return interp_log(sizes, [at[r] for r in sizes], max(row_bytes, 1.0))

    def _at_row_size(self, row: float, footprint: float, rows: float) -> float:
        grid: dict[float, list[tuple[float, float]]] = {}
        for r, f, n, sec in self.points:
            if r == row:
                grid.setdefault(f, []).append((n, sec))
        feet = sorted(grid)
        per_foot = [
            interp_log([n for n, _ in sorted(grid[f])], [sec for _, sec in sorted(grid[f])], max(rows, 1e-9))
            for f in feet
        ]  # rows, or the update's density
        return interp_log(feet, per_foot, max(footprint, 1.0))

    def seconds(self, rows: float, row_bytes: float, footprint: float) -> float:
        """One call moving `rows` rows."""
        return rows * self.seconds_per_row(row_bytes, footprint, rows) if rows else 0.0

    def bandwidth(self, row_bytes: float, footprint: float, rows: float = 2**14) -> float:
        """Row bytes per second (what a datasheet-style figure would say)."""
        return row_bytes / self.seconds_per_row(row_bytes, footprint, rows)

    @classmethod
    def from_bandwidths(cls, in_cache_bw: float, beyond_bw: float, cache_bytes: float, line_bytes: int) -> "RowCurve":
        """A curve from three figures: rows inside a cache of `cache_bytes` move at `in_cache_bw`,
        rows of a table 8x larger at `beyond_bw` (log-interpolated between), whatever the rows of
        the call; a row costs at least one `line_bytes` access (a cache line, a GPU sector)."""
        points = []
        for row in (line_bytes, 256, 512):
            moved = max(row, line_bytes)
            points += [(row, cache_bytes, 1, moved / in_cache_bw), (row, 8 * cache_bytes, 1, moved / beyond_bw)]
        return cls(tuple(points))


@dataclass(frozen=True)
class RateCurve:
    """A rate by the size of one call: points (size, rate), log-log interpolated, ends held."""

    points: tuple[tuple[float, float], ...]

    def __post_init__(self):
        if not self.points or any(not (n > 0 and r > 0) for n, r in self.points):
            raise ValueError(f"a rate curve needs points of positive (size, rate), got {self.points!r}")

    def at(self, size: float) -> float:
        pts = sorted(self.points)
        return interp_log([n for n, _ in pts], [r for _, r in pts], max(size, 1.0))

    @classmethod
    def constant(cls, rate: float) -> "RateCurve":
        return cls(((1.0, rate),))
