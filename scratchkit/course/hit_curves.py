"""Hit rate vs cache size for one table, per locality and policy, each computed once, on first use.

The cache explorer's sliders must answer in a fraction of a second. Moving the capacity or the
depth only moves a line; changing the locality (Zipf exponent) needs a new trace and new curves,
so `HitCurves` makes the trace of each exponent once and keeps it, and each policy's curve once
per trace:

    lru        every capacity at once from stack distances (`scratchkit.sim.lru_mrc`, one pass)
    static     the hottest ids of a profiled prefix, pinned: one cumulative sum over the hot set
    opt, lfu   one simulation per capacity on the grid (~1 s for a curve: computed on first use)
    lookahead  ScratchPipe's look-forward cache hits 100% once the capacity holds the working set
               of the D+1 batches in flight (`scratchkit.sim.min_capacity`), and cannot run below
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scratchkit.config import DataConfig
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.sim import hot_set, lru_mrc, min_capacity, opt_mrc, simulate
from scratchkit.sim.static import DEFAULT_PREFIX_SHARE

POLICIES = ("static", "lru", "lfu", "opt", "lookahead")


class HitCurves:
    """Curves for table `table` of `data`, over its first `num_batches` batches.

    `capacities` is a grid of `points` sizes from ~0.5% of the table's rows to all of them.
    """

    def __init__(self, data: DataConfig, table: int = 0, num_batches: int = 30, points: int = 16):
        if not 0 <= table < len(data.table_sizes):
            raise ValueError(f"table {table} out of range: the data has {len(data.table_sizes)} tables")
        if num_batches < 2 or num_batches > data.num_batches:
            raise ValueError(f"num_batches must be in 2..{data.num_batches}, got {num_batches}")
        if points < 2:
            raise ValueError(f"points must be >= 2, got {points}")
        self.data, self.table, self.num_batches = data, table, num_batches
        self.num_rows = int(data.table_sizes[table])
        self.batch_lookups = data.batch_size * data.pooling  # B * L lookups per batch
        low = max(1, self.num_rows // 200)
        self.capacities = np.unique(np.geomspace(low, self.num_rows, points).round().astype(np.int64))
        self._traces: dict[float, np.ndarray] = {}
        self._curves: dict[tuple, np.ndarray] = {}
        self._lru: dict[float, np.ndarray] = {}
        self._needed: dict[tuple, int] = {}
        self._rates: dict[tuple, float] = {}  # (zipf, policy, capacity) -> exact hit rate, once

    @property
    def load_factors(self) -> np.ndarray:
        return self.capacities / self.num_rows

    def trace(self, zipf: float) -> np.ndarray:
        """The table's ids over the batches, in access order, for this Zipf exponent. [num_batches * B * L]"""
        zipf = round(float(zipf), 6)
        if zipf not in self._traces:
            source = SyntheticSource(replace(self.data, zipf=zipf))
            self._traces[zipf] = np.concatenate([source.batch(b).ids[self.table] for b in range(self.num_batches)])
        return self._traces[zipf]

    def needed(self, zipf: float, depth: int) -> int:
        """Rows a look-forward scratchpad needs at look-ahead depth D: the largest window working set."""
        key = (round(float(zipf), 6), int(depth))
        if key not in self._needed:
            self._needed[key] = int(min_capacity(self.trace(zipf), self.batch_lookups, int(depth)))
        return self._needed[key]

    def lru_hits(self, zipf: float) -> np.ndarray:
        """LRU hits at every capacity 1..num_rows (index c-1), from one pass."""
        key = round(float(zipf), 6)
        if key not in self._lru:
            curve = lru_mrc(self.trace(zipf))
            hits = np.full(self.num_rows, curve.hits[-1] if curve.hits.size else 0, dtype=np.int64)
            hits[: curve.hits.size] = curve.hits[: self.num_rows]
            self._lru[key] = hits
        return self._lru[key]

    def curve(self, zipf: float, policy: str, depth: int = 2) -> np.ndarray:
        """Hit rates at `self.capacities` (NaN where the policy cannot run at that size)."""
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
        if policy == "lookahead":
            return np.where(self.capacities >= self.needed(zipf, depth), 1.0, np.nan)
        key = (round(float(zipf), 6), policy)
        if key not in self._curves:
            trace = self.trace(zipf)
            if policy == "lru":
                hits = self.lru_hits(zipf)[self.capacities - 1]
            elif policy == "opt":
                hits = opt_mrc(trace, self.capacities).hits
            elif policy == "static":
                hits = self._static_hits(trace)
            else:
                hits = np.array([simulate(trace, policy, int(c)).hits for c in self.capacities])
            self._curves[key] = np.asarray(hits, dtype=np.float64) / trace.size
        return self._curves[key]

    def _static_hits(self, trace: np.ndarray) -> np.ndarray:
        """Static hits at every grid capacity: pin the K hottest profiled ids; count their lookups."""
        ranked = hot_set(trace, int(self.capacities[-1]), DEFAULT_PREFIX_SHARE)  # hottest first
        ids, counts = np.unique(trace, return_counts=True)
        where = np.searchsorted(ids, ranked)  # every ranked id occurs in the trace
        served = np.concatenate([[0], np.cumsum(counts[where])])
        return served[np.minimum(self.capacities, ranked.size)]

    def hit_rate(self, zipf: float, policy: str, capacity: int, depth: int = 2) -> float:
        """One policy's hit rate at one capacity (exact, not read off the grid)."""
        capacity = int(capacity)
        if not 1 <= capacity <= self.num_rows:
            raise ValueError(f"capacity must be in 1..{self.num_rows} rows, got {capacity}")
        trace = self.trace(zipf)
        if policy == "lru":
            return float(self.lru_hits(zipf)[capacity - 1] / trace.size)
        if policy == "lookahead":
            return 1.0 if capacity >= self.needed(zipf, depth) else float("nan")
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
        key = (round(float(zipf), 6), policy, capacity)
        if key not in self._rates:  # one simulation (lfu ~30 ms, opt ~50 ms), then remembered
            self._rates[key] = simulate(trace, policy, capacity).hit_rate
        return self._rates[key]

    def computed(self) -> set[tuple[float, str]]:
        """The (locality, policy) pairs whose grid curve is computed already."""
        return set(self._curves)

    def has_trace(self, zipf: float) -> bool:
        """Whether this locality's trace is made already (a new one takes a moment)."""
        return round(float(zipf), 6) in self._traces
