"""The planner's id -> slot map of one scratchpad: dense host arrays, one entry per table row.

ScratchPipe's planner runs on the host, ahead of training (scratchkit/trainers/plan_ahead.py),
and keeps its own copy of which id lives in which slot. Host memory is plentiful, so the map is a
plain array indexed by id (8 bytes per table row: 270 MB for all of Criteo's 34M rows): a lookup
is one gather, with no hashing and no kernel launch. The scratchpad's hash map
(scratchkit/scratchpad.py) is what a map in device memory, sized by the slots, would use instead.

Beside the map: which id each slot holds, its dirty bit (changed since it was filled, so evicting
it needs a write-back), and how many batches in flight hold it (never evicted while held).
The planner is the only caller and keeps its own promises (distinct ids, free slots); the checks
here are the cheap ones that catch a broken promise before it corrupts the map.
"""
from __future__ import annotations

import numpy as np

from scratchkit.scratchpad import Erased


class SlotMap:
    """id -> slot for `num_rows` ids and `capacity` slots; -1 means absent (or free)."""

    def __init__(self, num_rows: int, capacity: int):
        if not 0 < capacity:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.num_rows, self.capacity = num_rows, capacity
        self.slot_of = np.full(num_rows, -1, dtype=np.int64)     # [num_rows] slot of each id
        self.slot_ids = np.full(capacity, -1, dtype=np.int64)    # [capacity] id in each slot
        self.dirty = np.zeros(capacity, dtype=bool)              # [capacity]
        self.holds = np.zeros(capacity, dtype=np.int32)          # [capacity] batches holding it

    def query(self, ids: np.ndarray) -> np.ndarray:
        """Slot of each id, -1 where absent (a new array)."""
        return self.slot_of[ids]

    def free_slots(self) -> np.ndarray:
        """Slots holding no id, ascending."""
        return np.flatnonzero(self.slot_ids < 0)

    def insert(self, ids: np.ndarray, slots: np.ndarray) -> None:
        """Map distinct new ids to distinct free slots; they arrive clean."""
        if len(ids) != len(slots):
            raise ValueError(f"ids and slots differ in length: {len(ids)} vs {len(slots)}")
        if np.any(self.slot_ids[slots] >= 0) or np.any(self.slot_of[ids] >= 0):
            raise RuntimeError("insert: a slot is taken or an id is already mapped (planner bug)")
        self.slot_of[ids] = slots
        self.slot_ids[slots] = ids
        self.dirty[slots] = False

    def erase(self, ids: np.ndarray) -> Erased:
        """Unmap distinct present ids, none held: their slots, and which were dirty."""
        slots = self.slot_of[ids]
        if np.any(slots < 0) or np.any(self.holds[slots] > 0):
            raise RuntimeError("erase: an id is absent or its slot is held (planner bug)")
        was_dirty = self.dirty[slots]
        self.slot_of[ids] = -1
        self.slot_ids[slots] = -1
        self.dirty[slots] = False
        return Erased(slots, was_dirty)

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
