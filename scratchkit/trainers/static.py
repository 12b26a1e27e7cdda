"""`static`: the hottest rows of a profiled prefix, pinned in the device cache for the whole run.

The `capacity` rows most looked up in the first `profile_batches` batches are pinned (profiled on a
prefix of the very data it trains on, as deployed hot-row caches profile a sample of their logs).
A lookup of any other row misses, and that row is handled *hybrid-style*: it lives on the host;
for one step it is read into a transient slot after the cache (with its state) by the device's
row kernels from the host table mapped into the device (embedding/device_cache.py), trained there
by the same single embedding_bag / apply_update as the cached rows (trainers/cached.py), and
written back to the host after the update. One working buffer per step keeps the math identical;
splitting each bag into a device part and a host part and adding the two partial sums would not
(float addition is not associative).
"""

from __future__ import annotations

import numpy as np

from scratchkit.embedding.victims import profile_hot_ids
from scratchkit.trainers.cached import CachedTrainer
from scratchkit.designs.demand_cache import STATIC


class StaticCacheTrainer(CachedTrainer):
    """The hottest rows of a profiled prefix, pinned; other rows trained hybrid-style (see above)."""

    name = STATIC.name
    # 100 batches of `small` are ~200k lookups per table (~10 per row), enough to rank the hot head
    # of a Zipf law, and take ~0.1 s to generate. A longer prefix ranks the tail better but costs
    # start-up time; a shorter one pins noise.
    profile_batches: int = 100

    def __init__(self, config, source=None, device=None, profile_batches: int | None = None):
        super().__init__(config, source, device)
        if profile_batches is not None:
            self.profile_batches = profile_batches
        self.hot_ids = profile_hot_ids(self.source, self.profile_batches, [c.capacity for c in self.caches])
        for cache, hot in zip(self.caches, self.hot_ids):
            cache.fill(hot, np.arange(len(hot), dtype=np.int64))  # pinned for good
        self._transient: list[np.ndarray] = [np.empty(0, dtype=np.int64) for _ in self.caches]

    def admit(self, t, unique, counts, slot_u, step, locked, stages):
        miss = slot_u < 0
        misses = unique[miss]
        with stages.fetch():
            # rows a step that failed after its update left here go home before their slots are reused
            self._return_transient(t)
            slot_u[miss] = self.caches[t].load_transient(misses)
            self._transient[t] = misses
        return len(misses), 0, 0

    def after_update(self) -> int:
        with self.timer.stage("write_back"):
            return sum(self._return_transient(t) for t in range(len(self.caches)))

    def _return_transient(self, t: int) -> int:
        misses = self._transient[t]
        self.caches[t].return_transient(misses)
        self._transient[t] = misses[:0]
        return len(misses)

    def flush(self) -> int:
        # rows of a step cut short (an exception, KeyboardInterrupt) are returned too
        return sum(self._return_transient(t) for t in range(len(self.caches))) + super().flush()
