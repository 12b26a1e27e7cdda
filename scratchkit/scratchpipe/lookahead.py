"""What Plan reads of the batches it can see: how soon ids come back.

Plan(b) needs batch b's working set U_b (its distinct ids) for the hits and misses
(`scratchkit.embedding.working_sets.WorkingSets`, shared with the caches), and, when it must
evict, how soon each resident id is needed again in batches b+1 .. b+horizon, to keep the ones
needed soon (`NextUses`), computed once per batch for every table at once.
"""

from __future__ import annotations

import numpy as np


class NextUses:
    """How soon each id is needed again, for every table at once: its *urgency*, 0 when no future
    batch the planner sees uses it, else H+1-k for its next use in batch b+k (H batches seen), so
    the sooner the higher. Victims are taken least urgent first.

    The tables share one array, each table's ids offset by the rows of the tables before it: one
    fill and one scatter per future batch, not one per table (26 tables: 26x fewer NumPy calls).
    The array is reused by the next call (a fresh one per batch cost more in page faults than the
    filling), so read the views before calling again.
    """

    def __init__(self, table_sizes):
        self.offsets = np.concatenate([[0], np.cumsum(table_sizes, dtype=np.int64)])  # [T+1]
        self._urgency = np.empty(int(self.offsets[-1]), dtype=np.int64)

    def joined(self, working_sets: list[np.ndarray]) -> np.ndarray:
        """One batch's working sets (one per table) as one array of offset ids."""
        return np.concatenate([ws + offset for ws, offset in zip(working_sets, self.offsets)])

    def __call__(self, future: list[np.ndarray]) -> list[np.ndarray]:
        """`future[k-1]`: batch b+k's `joined` working sets -> per table [num_rows] urgencies."""
        urgency, seen = self._urgency, len(future)
        urgency.fill(0)
        for k in range(seen, 0, -1):  # nearest last, so it wins
            urgency[future[k - 1]] = seen + 1 - k
        return [urgency[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]
