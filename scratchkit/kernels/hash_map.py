"""The scratchpad's id -> slot hash map on the device: open addressing with linear probing over
`table_size` buckets (a power of two, so `& mask` replaces `% size`), probed, filled and emptied by
the kernels of `hashmap.cu` (`atomicCAS` claims a bucket; twin.py is their NumPy specification).

An erased id leaves a tombstone, which a later probe walks past like a live id, so tombstones
lengthen misses until an insert reuses one or a rebuild drops them all. This class is the
mechanism and its counts; how many buckets, and when to rebuild, the scratchpad decides
(BUCKETS_PER_SLOT below, scratchpad.py's MAX_USED_FRACTION), as it checks every id before a kernel runs.
"""

from __future__ import annotations

# Linear probing's expected probes per miss are about (1 + 1/(1-a)^2) / 2 at load a: 2.5 at
# a = 0.5, 8.5 at 0.75, 50 at 0.9. A table of at least 2 * capacity buckets keeps a <= 0.5 even
# with every slot used, for 16 bytes (key + value) per bucket, small beside a row of dim floats.
BUCKETS_PER_SLOT = 2


class SlotHashMap:
    """`table_size` buckets of (key, value) = (id, slot) in `engine`'s memory; -1 = empty.

    keys    [table_size] int64   the id in each bucket
    values  [table_size] int64   its slot
    """

    def __init__(self, engine, table_size: int):
        xp = engine.xp
        self.engine, self.table_size = engine, table_size
        self.keys = xp.full(table_size, -1, dtype=xp.int64)
        self.values = xp.full(table_size, -1, dtype=xp.int64)
        self.live = 0  # ids in the map
        self.tombstones = 0  # erased buckets not yet reused or rebuilt away
        self.rebuilds = 0

    def query(self, ids):
        """The slot of each id (engine arrays of int64), -1 for a miss."""
        return self.engine.hashmap_query(self.keys, self.values, ids)

    def insert(self, ids, slots) -> None:
        """Map each of `ids` (distinct, none in the map) to its slot in `slots`."""
        reused, failed = self.engine.hashmap_insert(self.keys, self.values, ids, slots)
        if failed:  # cannot happen while live ids fill at most half the table
            raise RuntimeError(f"hash map insert found no bucket for {failed} ids (internal error)")
        self.live += ids.size
        self.tombstones -= reused

    def erase(self, ids) -> None:
        """Remove `ids` (distinct, each in the map): each leaves a tombstone."""
        self.engine.hashmap_erase(self.keys, self.values, ids)
        self.live -= ids.size
        self.tombstones += ids.size

    def used(self) -> int:
        """Buckets that lengthen a miss: live ids and tombstones."""
        return self.live + self.tombstones

    def rebuild(self, ids, slots) -> None:
        """Empty every bucket and map `ids` (every live id) to `slots` afresh: drops all tombstones."""
        self.keys.fill(-1)
        self.values.fill(-1)
        self.live = self.tombstones = 0
        self.insert(ids, slots)
        self.rebuilds += 1
