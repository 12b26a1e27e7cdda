"""A lazy, deterministic generator of DLRM mini-batches with tunable locality.

Batch `i` is drawn from its own random stream seeded by `(seed, i)`, so any batch can be made on
demand, in any order, by any thread, and is always the same: exactly what a look-ahead planner needs
(it peeks at batches `i+1 .. i+D` before Train reaches them).

Locality: ids follow a Zipf law over *ranks* (rank k has weight 1/(k+1)^s). Ranks are scattered over
the table by a fixed bijection, so hot rows are not simply rows 0, 1, 2, ... (a cache could cheat).

Scaled-down tables (`DataConfig.rank_rows` larger than the table): the law keeps its full-size ranks
and a rank lands on row `rank % rows`. The hot head, which is what a cache or a scratchpad holds and
what makes locality, keeps rows of its own; only the cold tail, whose rows are seldom reused
anyway, shares rows. Every batch keeps its size, so the work per step stays that of the full model.

A law of millions of ranks would need a CDF of as many floats per table (80 MB for Criteo's largest
table): above EXACT_RANKS ranks the sampler keeps the head's CDF exactly and draws the tail from the
continuous power law (x^-s on [K+1/2, N+1/2], the sum's integral): the tail's ranks are each about
as rare as they should be, and no one row of it matters.
"""

from __future__ import annotations

import math

import numpy as np

from scratchkit.config import DataConfig
from scratchkit.data.batch import Batch


def zipf_cdf(num_rows: int, exponent: float) -> np.ndarray:
    """Cumulative probabilities [num_rows] of ranks 0..num_rows-1 under weight 1/(k+1)^exponent."""
    weights = np.arange(1, num_rows + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


class ZipfSampler:
    """Inverse-CDF sampling of Zipf ranks with a guide table (Chen & Asau, 1974).

    Gives exactly `np.searchsorted(cdf, u, side="right")`, but instead of a binary search over the
    whole CDF per draw (cache-unfriendly: ~60 ns a draw for 20k rows), `guide[j]` jumps to the first
    rank whose CDF exceeds j/G, and a few vectorised steps finish the search; a draw in a bucket of
    one rank (`start`) needs no step at all. Laws of more than EXACT_RANKS ranks sample the head
    exactly and the tail from its continuous form (module note). A source's tables of one law
    share one sampler (the embedding-bound profiles' eight tables: one 1M-rank law).
    """

    EXACT_RANKS = 1 << 20

    def __init__(self, num_rows: int, exponent: float):
        self.num_rows, self.exponent = num_rows, exponent
        head = min(num_rows, self.EXACT_RANKS)
        self.cdf = zipf_cdf(head, exponent)  # [head] the head, normalised
        self.guide = np.searchsorted(self.cdf, np.arange(head) / head, side="right")
        # A bucket whose first rank's CDF lies above the bucket's end holds no other rank: every
        # draw in it is that rank, with no look at the CDF. The margin keeps it so for a draw u
        # whose u * G rounds down into the bucket from just past its end (a relative error of
        # 2^-53, far inside 1e-9). Kept as ~rank (negative) where the search must go on, in int32
        # (head <= 2^20 ranks): half the bytes of the one random read most draws make.
        ends = (np.arange(head) + 1) / head * (1 + 1e-9)  # [G] each bucket's end, and a margin
        self.start = np.where(self.cdf[self.guide] > ends, self.guide, ~self.guide).astype(np.int32)  # [G]
        head_mass = float(np.sum(np.arange(1, head + 1, dtype=np.float64) ** -exponent))
        self.p_head = head_mass / (head_mass + self._tail_mass()) if num_rows > head else 1.0

    def _tail_mass(self) -> float:
        """The weight of ranks K..N-1, as the integral of x^-s over [K+1/2, N+1/2]."""
        a, b, s = self.EXACT_RANKS + 0.5, self.num_rows + 0.5, self.exponent
        return math.log(b / a) if s == 1 else (b ** (1 - s) - a ** (1 - s)) / (1 - s)

    def ranks(self, u: np.ndarray) -> np.ndarray:
        """Ranks [n] for uniforms u [n] in [0, 1)."""
        if self.p_head == 1.0:
            return self._head(u)
        rank = np.empty(u.shape, dtype=np.int64)
        head = u < self.p_head
        rank[head] = self._head(u[head] / self.p_head)
        rank[~head] = self._tail((u[~head] - self.p_head) / (1 - self.p_head))
        return rank

    def _head(self, u: np.ndarray) -> np.ndarray:
        rank = self.start[(u * len(self.guide)).astype(np.int64)].astype(np.int64)
        search = np.flatnonzero(rank < 0)  # draws in buckets of more than one rank
        rank[search] = ~rank[search]  # their bucket's first rank: the search starts there
        pending = search[self.cdf[rank[search]] <= u[search]]
        while pending.size:  # a step or two: buckets hold ~1 rank each
            rank[pending] += 1
            pending = pending[self.cdf[rank[pending]] <= u[pending]]
        return rank

    def _tail(self, v: np.ndarray) -> np.ndarray:
        """Ranks K..N-1 for uniforms v in [0, 1): the continuous law's inverse CDF, rounded."""
        a, b, s = self.EXACT_RANKS + 0.5, self.num_rows + 0.5, self.exponent
        if s == 1:
            x = a * (b / a) ** v
        else:
            x = (a ** (1 - s) + v * (b ** (1 - s) - a ** (1 - s))) ** (1 / (1 - s))
        return np.clip(np.floor(x + 0.5).astype(np.int64) - 1, self.EXACT_RANKS, self.num_rows - 1)


def _coprime_multiplier(num_rows: int, seed: int) -> int:
    """A multiplier a with gcd(a, num_rows) = 1, so rank -> (a*rank + c) % num_rows is a bijection."""
    a = (0x9E3779B1 + 2 * seed) % num_rows or 1
    while math.gcd(a, num_rows) != 1:
        a = a % num_rows + 1
    return a


class SyntheticSource:
    """Batches of a `DataConfig`, made on demand. `source.batch(i)` is deterministic."""

    def __init__(self, config: DataConfig):
        self.config = config
        self.table_sizes = tuple(int(n) for n in config.table_sizes)
        self.num_dense = config.num_dense
        self.batch_size = config.batch_size
        self.num_batches = config.num_batches
        laws: dict[tuple[int, float], ZipfSampler] = {}  # one sampler per law, shared by its tables
        for t in range(len(self.table_sizes)):
            law = (config.ranks(t), config.exponent(t))
            if law[1] > 0 and law not in laws:
                laws[law] = ZipfSampler(*law)
        self._samplers = [laws.get((config.ranks(t), config.exponent(t))) for t in range(len(self.table_sizes))]
        self._scatter = [
            (_coprime_multiplier(n, config.seed + t), (7919 * t + config.seed) % n)
            for t, n in enumerate(self.table_sizes)
        ]
        label_rng = np.random.default_rng([config.seed, 2**31 - 1])
        self._dense_weights = label_rng.standard_normal(config.num_dense).astype(np.float32)

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self):
        return (self.batch(i) for i in range(self.num_batches))

    def batch(self, index: int) -> Batch:
        if not 0 <= index < self.num_batches:
            raise IndexError(f"batch {index} out of range: this source has {self.num_batches} batches")
        cfg = self.config
        rng = np.random.default_rng([cfg.seed, index])
        B, L = cfg.batch_size, cfg.pooling
        dense = rng.standard_normal((B, cfg.num_dense), dtype=np.float32)
        ids, offsets = [], []
        for t, n in enumerate(self.table_sizes):
            u = rng.random(B * L)
            sampler = self._samplers[t]
            ranks = sampler.ranks(u) if sampler is not None else (u * n).astype(np.int64)
            a, c = self._scatter[t]
            if sampler is not None and (sampler.num_rows - 1) * a + c >= 2**63:
                ranks %= n  # a scaled table folds its tail first, where a*rank + c would overflow
            ranks *= a  # in place: (a*rank + c) % n folds the tail by itself, as rank % n does
            ranks += c
            ranks %= n
            ids.append(ranks)  # [B*L], bag b = ids[b*L:(b+1)*L]
            offsets.append(np.arange(0, B * L, L, dtype=np.int64))  # [B]
        labels = self._labels(rng, dense, ids)
        return Batch(dense=dense, ids=tuple(ids), offsets=tuple(offsets), labels=labels)

    def _labels(self, rng, dense: np.ndarray, ids: list[np.ndarray]) -> np.ndarray:
        """Clicks from a logistic model of the dense features and a fixed per-id effect."""
        B, L = self.batch_size, self.config.pooling
        score = dense @ self._dense_weights / max(1.0, math.sqrt(self.num_dense))
        for t_ids in ids:
            effect = ((t_ids * 2654435761) % 1000) / 1000.0 - 0.5  # [B*L] in [-0.5, 0.5)
            score = score + effect.reshape(B, L).mean(axis=1)
        prob = 1.0 / (1.0 + np.exp(-2.0 * score))
        return (rng.random(B) < prob).astype(np.float32)
