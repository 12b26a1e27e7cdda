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
before that. The caller keeps the map's promises (ids distinct, new on insert, present on erase):
nothing here re-checks them on the hot path, where a check would cost a sort per call.
"""

from __future__ import annotations

from scratchkit.kernels.scratchpad import MAX_USED_FRACTION, map_buckets


class DeviceSlotMap:
    """id -> slot for `capacity` slots, in engine arrays (`engine.xp`: NumPy or CuPy)."""

    def __init__(self, capacity: int, engine):
        self.engine, xp = engine, engine.xp
        self.table_size = map_buckets(capacity)
        self._keys = xp.full(self.table_size, -1, dtype=xp.int64)  # [buckets] id, -1 empty, -2 erased
        self._values = xp.full(self.table_size, -1, dtype=xp.int64)  # [buckets] its slot
        self._live = self._tombstones = 0
        self.rebuilds = 0

    def query(self, ids):
        """[n] slot of each id, -1 where absent."""
        return self.engine.hashmap_query(self._keys, self._values, ids)

    def insert(self, ids, slots) -> None:
        """Map distinct absent ids to distinct slots."""
        if len(ids) == 0:
            return
        reused, failed = self.engine.hashmap_insert(self._keys, self._values, ids, slots)
        if failed:  # cannot happen while live ids fill at most half the buckets
            raise RuntimeError(f"device map: no bucket for {failed} ids (internal error)")
        self._live += len(ids)
        self._tombstones -= reused

    def erase(self, ids, slot_ids) -> None:
        """Forget distinct present ids. `slot_ids` [capacity]: the id in each slot once they are
        gone (what a rebuild re-inserts)."""
        if len(ids) == 0:
            return
        self.engine.hashmap_erase(self._keys, self._values, ids)
        self._live -= len(ids)
        self._tombstones += len(ids)
        if self._live + self._tombstones > MAX_USED_FRACTION * self.table_size:
            self.rebuild(slot_ids)

    def rebuild(self, slot_ids) -> None:
        """Clear every bucket and insert the live ids again (slot order): no tombstones left."""
        xp = self.engine.xp
        self._keys.fill(-1)
        self._values.fill(-1)
        slots = xp.flatnonzero(slot_ids >= 0)
        self._live = self._tombstones = 0
        self.insert(xp.ascontiguousarray(slot_ids[slots]), slots)
        self.rebuilds += 1
