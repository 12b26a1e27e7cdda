"""The device planner's id -> slot map: the kernels' hash map (kernels/hashmap.cu), sized by slots.

The host planner's map (slot_map.py) is a dense array over every row of the table: one gather per
lookup, 8 bytes per table row, which host memory can afford. On a GPU the map has to fit beside
the rows, so the device planner (device_plan.py) uses the open-addressing hash map the kernels
teach: 2 buckets per slot (16 bytes each), whatever the table's size. Its probe, insert and erase
run through an engine (scratchkit/kernels/engine.py): CuPy on a GPU, the host build of the same
`.cu` or its NumPy twin on a CPU; all three answer every query alike.

What a reader might get wrong: an erased id leaves a tombstone that later probes walk past, so a
map that only ever erases and inserts would slow down as they pile up; like the kernels'
Scratchpad (kernels/scratchpad.py, which says why 3/4) this map rebuilds itself from its live ids
before that. How many ids a batch inserted and erased, and how many tombstones its inserts reused,
only the device knows at first: the insert adds them to a `stats` array the planner reads with
the rest of its batch's counts, then hands them to `settle`, which keeps the books and rebuilds
when they say so. So the map never makes the host wait. The caller keeps the map's promises (ids
distinct, new on insert, present on erase): nothing here re-checks them on the hot path.

Negative ids are no ids: never found, and an insert skips a pair whose id or slot is negative,
which is how the planner's padded buffers (kernels/plan.cu) go in whole.
"""

from __future__ import annotations

import numpy as np

from scratchkit.kernels.scratchpad import MAX_USED_FRACTION, map_buckets


class DeviceSlotMap:
    """id -> slot for `capacity` slots, in engine arrays (`engine.xp`: NumPy or CuPy); `ops` the
    counted array calls (kernels/array_ops.py)."""

    def __init__(self, capacity: int, engine, ops):
        self.engine, self.ops = engine, ops
        self.table_size = map_buckets(capacity)
        self._keys = ops.full(self.table_size, -1)  # [buckets] id, -1 empty, -2 erased
        self._values = ops.full(self.table_size, -1)  # [buckets] its slot
        self._unread = ops.zeros(2, dtype=np.uint64)  # a rebuild's counts: nobody reads them (module note)
        self.live = self.tombstones = 0
        self.rebuilds = 0

    def query(self, ids):
        """[n] slot of each id, -1 where absent."""
        return self.engine.hashmap_query(self._keys, self._values, ids)

    def stamp(self, ids, value: int, out) -> None:
        """out[slot of each id in the map] = value (ids distinct)."""
        self.engine.hashmap_stamp(self._keys, self._values, ids, value, out)

    def insert(self, ids, slots, stats) -> None:
        """Map distinct absent ids to distinct slots. Adds to `stats` ([2] uint64 on the device)
        the tombstones reused and the ids that found no bucket: `settle` takes them once read."""
        self.engine.hashmap_insert(self._keys, self._values, ids, slots, stats)

    def erase(self, ids) -> None:
        """Forget distinct present ids (each leaves a tombstone)."""
        self.engine.hashmap_erase(self._keys, self._values, ids)

    def settle(self, live: int, erased: int, reused: int, failed: int, slot_ids, slot_numbers) -> None:
        """A batch's counts, read (`live` ids in the map now, `erased` by the batch, `reused` and
        `failed` its inserts' stats): the books, and a rebuild from the slots (`slot_ids`
        [capacity], the id in each, -1 free; `slot_numbers` 0..capacity-1) when tombstones pile up."""
        if failed:  # cannot happen while live ids fill at most half the buckets
            raise RuntimeError(f"device map: no bucket for {failed} ids (internal error)")
        self.live = live
        self.tombstones += erased - reused
        if self.live + self.tombstones > MAX_USED_FRACTION * self.table_size:
            self.rebuild(slot_ids, slot_numbers)

    def fill(self, slot_ids, slot_numbers) -> None:
        """An empty map given every slot's id (-1: free); how many, the first `settle` says."""
        self.insert(slot_ids, slot_numbers, self._unread)  # reuses nothing; has room (module note)

    def rebuild(self, slot_ids, slot_numbers) -> None:
        """Clear every bucket and insert the live ids again (slot order): no tombstones left."""
        self.ops.fill(self._keys, -1)
        self.ops.fill(self._values, -1)
        self.insert(slot_ids, slot_numbers, self._unread)
        self.tombstones = 0
        self.rebuilds += 1
