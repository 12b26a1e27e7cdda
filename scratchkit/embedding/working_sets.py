"""A batch's working set: `np.unique(ids, return_inverse=True[, return_counts=True])` for one
table, made faster where it can. The demand caches serve each batch from it and ScratchPipe's
planners plan from it.

When the table is small next to a batch (at most BITMAP_ROWS_PER_LOOKUP rows per lookup), ids
are marked in a [num_rows] bitmap and read back in order: the same arrays as np.unique's, without
its sort. The sort is what np.unique costs, and NumPy's default argsort (an introsort) slows on
skewed ids: a skewed batch's ids take about twice as long to argsort as as many distinct-ish
ones; the bitmap is several times faster than sorting a few thousand ids and does not care how
skewed they are. Larger tables sort, as np.unique does.
"""

from __future__ import annotations

import numpy as np

from scratchkit.measured import measured


class WorkingSets:
    """One table's working sets, batch after batch (the bitmap is kept between calls)."""

    # the bitmap's reach, measured against np.unique (scratchkit/measured.json says how and where)
    BITMAP_ROWS_PER_LOOKUP = measured("bitmap_rows_per_lookup")

    def __init__(self, num_rows: int):
        self.num_rows = num_rows
        self._mark = self._position = None  # [num_rows] scratch, made on first use

    def uses_bitmap(self, lookups: int) -> bool:
        return self.num_rows <= self.BITMAP_ROWS_PER_LOOKUP * lookups

    def __call__(self, ids: np.ndarray, counts: bool = False) -> tuple[np.ndarray, ...]:
        """(unique [u] sorted, inverse [n]) with unique[inverse] == ids; `counts`: and each
        unique id's lookups [u], as np.unique's return_counts."""
        if not self.uses_bitmap(len(ids)):
            return np.unique(ids, return_inverse=True, return_counts=counts)
        if self._mark is None:
            self._mark = np.zeros(self.num_rows, dtype=bool)
            self._position = np.empty(self.num_rows, dtype=np.int64)
        self._mark[ids] = True
        unique = np.flatnonzero(self._mark)
        self._mark[unique] = False  # clean for the next batch
        self._position[unique] = np.arange(len(unique))
        inverse = self._position[ids]
        if not counts:
            return unique, inverse
        return unique, inverse, np.bincount(inverse, minlength=len(unique))
