"""The slow, obvious twin of `lru_engine.cpp`: Mattson's LRU stack as a Python list, with SHARDS.

It takes the same settings, is fed the same chunks and reports the same figures as the C engine
(see `native.py`), one access at a time and in plain Python, so it is the readable specification
the tests hold the C loop to, bit for bit (weights and bins too: the same float operations in the
same order). It is O(distinct ids) per access: for traces of thousands of accesses, not millions.

    twin = StackTwin(threshold, exact=True, max_ids=0, max_bins=1 << 22)
    twin.feed(chunk)                    # int64 ids, any number of chunks
    twin.stats(), twin.hist(), twin.bins()
"""

from __future__ import annotations

import numpy as np

TWO64 = float(2**64)
MASK64 = (1 << 64) - 1


def fmix64(row: int) -> int:
    """murmur3's 64-bit finalizer, as `setassoc.set_of` and the C engine compute it."""
    h = row & MASK64
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & MASK64
    h ^= h >> 33
    return h


class StackTwin:
    """Settings as `native.Engine`: keep ids with fmix64(id) < threshold (all when `exact`);
    `max_ids` > 0 keeps at most that many ids (fixed size), weighing into `max_bins` bins."""

    def __init__(self, threshold: int, exact: bool, max_ids: int = 0, max_bins: int = 1 << 22):
        self.threshold, self.exact, self.max_ids = threshold, exact, max_ids
        self.max_bins = max(max_bins, 1)
        self.stack: list[int] = []  # kept ids, most recently used first
        self.hashes: dict[int, int] = {}  # fixed size: kept id -> its hash
        self.histogram: list[int] = []  # exact / fixed rate: [d] accesses at distance d
        self.weights: list[float] = []  # fixed size: [b] weight at scaled distance b*width..
        self.width, self.weight = 1.0, 0.0
        self.seen = self.sampled = self.cold = 0

    def feed(self, ids: np.ndarray) -> None:
        for row in ids.tolist():
            self._one(row)
        self.seen += len(ids)

    def _touch(self, row: int) -> int:
        """Move `row` to the top of the stack; its depth before, or -1 if it was not there."""
        try:
            depth = self.stack.index(row)
        except ValueError:
            self.stack.insert(0, row)
            return -1
        del self.stack[depth]
        self.stack.insert(0, row)
        return depth

    def _count(self, depth: int) -> None:
        if depth < 0:
            self.cold += 1
            return
        self.histogram.extend([0] * (depth + 1 - len(self.histogram)))
        self.histogram[depth] += 1

    def _weigh(self, scaled: float, w: float) -> None:
        b = int(scaled / self.width)
        while b >= self.max_bins:  # merge pairs of bins: the width doubles
            bins = self.weights
            self.weights = [bins[i] + (bins[i + 1] if i + 1 < len(bins) else 0.0) for i in range(0, len(bins), 2)]
            self.width *= 2
            b = int(scaled / self.width)
        self.weights.extend([0.0] * (b + 1 - len(self.weights)))
        self.weights[b] += w

    def _one(self, row: int) -> None:
        if self.exact:
            self._count(self._touch(row))
            return
        h = fmix64(row)
        if h >= self.threshold:
            return
        self.sampled += 1
        w = TWO64 / float(self.threshold)  # 1 / rate, before any drop
        depth = self._touch(row)
        if self.max_ids == 0:  # fixed rate
            self._count(depth)
            return
        self.weight += w
        if depth >= 0:
            self._weigh(float(depth) * w, w)
            return
        self.cold += 1
        self.hashes[row] = h
        if len(self.stack) > self.max_ids:  # one too many: drop the largest hash
            victim = max(self.hashes, key=self.hashes.get)
            self.threshold = self.hashes.pop(victim)
            self.stack.remove(victim)

    def stats(self) -> tuple[list[int], list[float]]:
        """([seen, sampled, cold, live, hist length, bins length], [weight, width, rate])."""
        rate = 1.0 if self.exact else float(self.threshold) / TWO64
        sampled = self.seen if self.exact else self.sampled
        return (
            [self.seen, sampled, self.cold, len(self.stack), len(self.histogram), len(self.weights)],
            [self.weight, self.width, rate],
        )

    def hist(self) -> np.ndarray:
        return np.array(self.histogram, dtype=np.int64)

    def bins(self) -> np.ndarray:
        return np.array(self.weights, dtype=np.float64)
