"""`Curve`: hits of one cache policy at several capacities, on one trace.

Exact curves (`rate == 1.0`) count hits at the capacities they list. Sampled ones (SHARDS,
`sampling.py`) estimate them from a share `rate` of the ids, are trusted from 1/rate rows up, and
are step functions: they list the capacities where they step, and between two of them hold the
value of the lower one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scratchkit.sim.checks import as_capacity


@dataclass(frozen=True)
class Curve:
    """Hits of one policy at several capacities, on one trace."""

    policy: str
    lookups: int
    unique_ids: int  # from this capacity on, every reuse hits (estimated if sampled)
    capacities: np.ndarray  # int64 [k]
    hits: np.ndarray  # int64 [k], hits at capacities[i]
    rate: float = 1.0  # share of the ids simulated: 1.0 exact, < 1 a SHARDS estimate

    def hits_at(self, capacity: int) -> int:
        """Hits at `capacity`: one on the curve, or any >= unique ids (all reuses hit there)."""
        return int(self.hits_over([as_capacity(capacity)])[0])

    def hits_over(self, capacities) -> np.ndarray:
        """Hits at many capacities: exact curves at those they list or >= unique ids (for LRU's,
        which lists 1 .. unique ids, any capacity); sampled ones at any capacity. [k] int64"""
        capacities = np.asarray(capacities, dtype=np.int64)
        inside = capacities < self.unique_ids
        beyond = self.lookups - self.unique_ids
        if self.rate < 1.0:  # a step function
            at = np.searchsorted(self.capacities, capacities, side="right") - 1
            hits = self.hits[np.maximum(at, 0)] if self.hits.size else np.zeros(at.shape, np.int64)
            return np.where(inside, np.where(at >= 0, hits, 0), beyond).astype(np.int64)
        at = np.minimum(np.searchsorted(self.capacities, capacities), self.capacities.size - 1)
        found = self.capacities[at] == capacities if self.capacities.size else inside & False
        if np.any(inside & ~found):
            bad = int(capacities[np.argmax(inside & ~found)])
            raise ValueError(f"capacity {bad} is not on this {self.policy} curve")
        return np.where(inside, self.hits[at] if self.hits.size else beyond, beyond).astype(np.int64)

    def rates_at(self, capacities) -> np.ndarray:
        """Hit rates at many capacities, as `hits_over`. [k] float64"""
        hits = self.hits_over(capacities)
        return hits / self.lookups if self.lookups else np.zeros(hits.shape)

    @property
    def hit_rate(self) -> np.ndarray:
        return self.hits / self.lookups if self.lookups else np.zeros(self.hits.shape)

    @property
    def miss_ratio(self) -> np.ndarray:
        return 1.0 - self.hit_rate if self.lookups else np.zeros(self.hits.shape)

    def to_rows(self) -> list[dict]:
        """[{capacity, hits, hit_rate}, ...] for JSON."""
        rate = self.hit_rate
        return [
            {"capacity": int(c), "hits": int(h), "hit_rate": float(r)}
            for c, h, r in zip(self.capacities, self.hits, rate)
        ]
