"""The look-forward scratchpad over depth, on the same footing as the LRU and OPT curves.

A scratchpad planning `depth` batches ahead holds every id of the depth+1 batches in flight, so it
needs at least their largest working set (`lookahead.min_capacity`) and, from there on, every
lookup hits at use time. What it still pays is copies: rows fetched from the host, one per
(batch, id) it did not keep. LRU pays one copy per miss, so "lookups served without a copy",
lookups - fetched_rows, are LRU's hits and the scratchpad's alike, and the two curves share axes:

    depths = lookahead_depth_curve(trace, batch_size=4096, depths=range(0, 5))
    depths.min_capacity          # [D] rows each depth needs
    depths.as_curve()            # Curve("lookahead"): hits = lookups - fetched at those capacities

All depths share one cut of the trace into batches; each depth is one vectorised window count
and one simulation at its own minimum capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scratchkit.sim.checks import as_count, as_trace
from scratchkit.sim.curve import Curve
from scratchkit.sim.lookahead import cut_into_batches, simulate_lookahead, window_working_sets


@dataclass(frozen=True)
class DepthCurve:
    """The scratchpad at each depth, each at the fewest rows that depth runs with."""

    batch_size: int
    lookups: int
    unique_ids: int
    depths: np.ndarray  # int64 [D]
    min_capacity: np.ndarray  # int64 [D] rows needed: below, the planner refuses to run
    fetched_rows: np.ndarray  # int64 [D] host -> device copies at that capacity

    @property
    def served_without_copy(self) -> np.ndarray:
        """lookups - fetched rows: what LRU calls hits. [D]"""
        return self.lookups - self.fetched_rows

    def as_curve(self) -> Curve:
        """A Curve over the depths' capacities (ascending; the best depth where two tie)."""
        order = np.lexsort((-self.served_without_copy, self.min_capacity))
        capacities, hits = self.min_capacity[order], self.served_without_copy[order]
        first = np.ones(capacities.size, dtype=bool)
        first[1:] = capacities[1:] != capacities[:-1]
        return Curve("lookahead", self.lookups, self.unique_ids, capacities[first], hits[first])

    def to_rows(self) -> list[dict]:
        return [
            {
                "depth": int(d),
                "min_capacity": int(c),
                "fetched_rows": int(f),
                "served_without_copy": int(self.lookups - f),
            }
            for d, c, f in zip(self.depths, self.min_capacity, self.fetched_rows)
        ]


def lookahead_depth_curve(trace, batch_size: int, depths=range(0, 5)) -> DepthCurve:
    trace = as_trace(trace)
    batch_size = as_count(batch_size, "batch_size")
    depths = np.array([as_count(d, "depth", minimum=0) for d in np.atleast_1d(list(depths))], dtype=np.int64)
    batches = cut_into_batches(trace, batch_size)
    need = np.array([window_working_sets(batches, int(d)).max() if trace.size else 1 for d in depths], dtype=np.int64)
    need = np.maximum(need, 1)
    fetched = np.array(
        [simulate_lookahead(trace, int(c), batch_size, int(d)).fetched_rows for d, c in zip(depths, need)],
        dtype=np.int64,
    )
    return DepthCurve(batch_size, int(trace.size), batches.rows, depths, need, fetched)
