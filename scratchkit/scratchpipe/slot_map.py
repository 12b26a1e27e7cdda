"""The planner's id -> slot map of one scratchpad: dense host arrays, one entry per table row.

ScratchPipe's planner runs on the host, ahead of training (scratchkit/scratchpipe/plan_ahead.py),
and keeps its own copy of which id lives in which slot: not what the row store holds now
(scratchkit/scratchpipe/rows.py) but what it *will* hold once the batches planned so far are
inserted, and which slots will be dirty by then. Host memory is plentiful, so the map is a plain
array indexed by id (8 bytes per table row: 270 MB for all of Criteo's 34M rows): a lookup is one
gather, with no hashing and no kernel launch. The kernels' hash map
(scratchkit/kernels/scratchpad.py) is what a map in device memory, sized by the slots, would use.

Beside the map: which id each slot holds, its dirty bit (changed since it was filled, so evicting
it needs a write-back), and how many batches in flight hold it (never evicted while held).
The planner is the only caller and keeps its own promises (distinct ids, free slots), so nothing
here re-checks them on the hot path: the exactness tests (every lookup a hit, every parameter the
baseline's) are what would catch a planner that broke one.
"""

from __future__ import annotations

import numpy as np


class SlotMap:
    """id -> slot for `num_rows` ids and `capacity` slots; -1 means absent (or free)."""

    def __init__(self, num_rows: int, capacity: int):
        if not 0 <= capacity:  # 0: a plan stripe with no slots (stripes.py), whose ids never come
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.num_rows, self.capacity = num_rows, capacity
        self.slot_of = np.full(num_rows, -1, dtype=np.int64)  # [num_rows] slot of each id
        self.slot_ids = np.full(capacity, -1, dtype=np.int64)  # [capacity] id in each slot
        self.dirty = np.zeros(capacity, dtype=bool)  # [capacity]
        self.holds = np.zeros(capacity, dtype=np.int32)  # [capacity] batches holding it

    def query(self, ids: np.ndarray) -> np.ndarray:
        """Slot of each id, -1 where absent (a new array)."""
        return self.slot_of[ids]

    def free_slots(self) -> np.ndarray:
        """Slots holding no id, ascending."""
        return np.flatnonzero(self.slot_ids < 0)

    def insert(self, ids: np.ndarray, slots: np.ndarray) -> None:
        """Map distinct new ids to as many distinct free slots; they arrive clean."""
        self.slot_of[ids] = slots
        self.slot_ids[slots] = ids
        self.dirty[slots] = False

    def evict(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Free distinct used, unheld slots: (the ids they held, which of them were dirty)."""
        ids = self.slot_ids[slots]
        was_dirty = self.dirty[slots]
        self.slot_of[ids] = -1
        self.slot_ids[slots] = -1
        self.dirty[slots] = False
        return ids, was_dirty

    def hold(self, slots: np.ndarray) -> None:
        """One more batch in flight uses each of these distinct slots."""
        self.holds[slots] += 1

    def release(self, slots: np.ndarray) -> None:
        """Undo one `hold` of each of these distinct slots."""
        self.holds[slots] -= 1

    def held_mask(self) -> np.ndarray:
        """[capacity] bool, True where some batch in flight holds the slot."""
        return self.holds > 0

    def mark_dirty(self, slots: np.ndarray) -> None:
        self.dirty[slots] = True
