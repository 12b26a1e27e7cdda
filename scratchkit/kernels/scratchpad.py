"""The kernels' scratchpad: `capacity` slots of `dim` floats on the device, and an id -> slot hash map
on the device too. Every operation is a kernel (scratchkit/kernels/*.cu) with its NumPy twin: the
map's probe, insert and erase (`atomicCAS`), gather and scatter of rows, an embedding bag's forward
and its backward fused with the optimizer's update. This class is what the kernel tests and
benchmarks drive; `scratchpipe-device`'s planner uses the map and row kernels through the same
engines (scratchpipe/device_plan.py), the host planner a host array (docs/design.md).

    device (engine arrays)                        host (NumPy bookkeeping)
    slot_rows.rows   [capacity, dim] float32      slot_ids   [capacity] id in each slot, -1 = free
    slot_rows.state  [capacity, state_width]      hold_counts[capacity] batches in flight using it
    map.keys, .values [table_size] the hash map   dirty      [capacity] changed since filled

The device half is two classes with their kernels: the rows by slot (slot_rows.py) and the map
(hash_map.py); this one checks every argument and keeps the books.

The engines (twin, HOST: the `.cu` built with g++, CUPY: on a GPU) give identical results. `rows`
and `state` are also torch tensors sharing the engine arrays' memory (DLPack on a GPU). Every
method checks its input before any kernel runs (scratchkit/kernels/arguments.py). Results live
where the input came from: host input gives NumPy results, device input CuPy results
(scratchkit/kernels/engine_arrays.py moves them).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from scratchkit.backend import detect
from scratchkit.config import OptimizerKind
from scratchkit.kernels.arguments import check_offsets, check_range, check_unique
from scratchkit.kernels.engine import EngineKind, make_engine, resolve
from scratchkit.kernels.engine_arrays import EngineArrays
from scratchkit.kernels.hash_map import BUCKETS_PER_SLOT, SlotHashMap
from scratchkit.kernels.slot_rows import SlotRows

# Erased ids leave tombstones, which lengthen misses like live ids do. When live ids plus
# tombstones reach 3/4 of the table, rebuild it (clear, re-insert the live ids): with a <= 0.5
# from live ids, that happens at most once per capacity/2 erases, so its O(table) cost is cheap.
MAX_USED_FRACTION = 0.75


class Erased(NamedTuple):
    slots: np.ndarray  # [n] int64, the slot each erased id had
    was_dirty: np.ndarray  # [n] bool, whether that slot held changes not yet written back


def map_buckets(capacity: int) -> int:
    """BUCKETS_PER_SLOT per slot, up to a power of two (`& mask` replaces `% size`)."""
    return 1 << max(0, (BUCKETS_PER_SLOT * max(capacity, 1) - 1).bit_length())


class Scratchpad:
    """Device-side embedding rows addressed by slot, with an id -> slot hash map.

    Args:
        num_rows: rows of the host table this scratchpad caches; ids must be in [0, num_rows).
        capacity: number of slots.
        dim: floats per row.
        state_width: optimizer state floats per slot: 0 (SGD), 1 (row-wise Adagrad), dim (Adagrad).
        engine: EngineKind or its name: "auto", "twin", "host" or "cupy".
        device: torch device of `rows`/`state`: "cpu" or "cuda"; None = "cuda" when CuPy can run
            kernels on a GPU here, else "cpu".
        threads_per_block: CUDA block size the kernels launch with (also used by the host build).
    """

    def __init__(
        self,
        num_rows: int,
        capacity: int,
        dim: int,
        *,
        state_width: int = 0,
        engine: EngineKind | str = EngineKind.AUTO,
        device: str | None = None,
        threads_per_block: int = 256,
    ):
        for name, value, low in (
            ("num_rows", num_rows, 1),
            ("capacity", capacity, 1),
            ("dim", dim, 1),
            ("state_width", state_width, 0),
            ("threads_per_block", threads_per_block, 1),
        ):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if device is None:
            device = "cuda" if detect().cupy_gpu else "cpu"
        self.num_rows, self.capacity, self.dim = int(num_rows), int(capacity), int(dim)
        self.state_width = int(state_width)
        self.device = torch.device(device)
        self.engine_kind = resolve(engine, str(self.device))
        self.engine = make_engine(self.engine_kind, int(threads_per_block))
        xp = self.xp = self.engine.xp
        self.arrays = EngineArrays(xp, self.device)
        if self.engine_kind is EngineKind.CUPY and self.device.index not in (None, xp.cuda.Device().id):
            raise ValueError(
                f"device {device!r} is not CuPy's current device "
                f"(cuda:{xp.cuda.Device().id}); select it with cupy.cuda.Device(n).use()"
            )

        self.map = SlotHashMap(self.engine, map_buckets(self.capacity))
        self.table_size = self.map.table_size
        self.slot_rows = SlotRows(self.engine, self.arrays, self.capacity, self.dim, self.state_width)
        self.rows = self.arrays.as_torch(self.slot_rows.rows)  # [capacity, dim]
        self.state = None if self.slot_rows.state is None else self.arrays.as_torch(self.slot_rows.state)

        self._slot_ids = np.full(self.capacity, -1, dtype=np.int64)
        self._holds = np.zeros(self.capacity, dtype=np.int32)
        self._dirty = np.zeros(self.capacity, dtype=bool)

    def __repr__(self) -> str:
        return (
            f"Scratchpad(num_rows={self.num_rows}, capacity={self.capacity}, dim={self.dim}, "
            f"state_width={self.state_width}, engine={self.engine_kind.value!r}, "
            f"device={str(self.device)!r}, used={len(self)})"
        )

    # ------------------------------------------------------------------ input checking helpers
    def _check_slots(self, name: str, slots: np.ndarray) -> None:
        check_range(name, slots, 0, self.capacity)

    def _check_offsets(self, offsets: np.ndarray, nnz: int) -> None:
        check_offsets(offsets, nnz)
        if self.capacity * max(nnz, 1) >= 2**62:
            raise ValueError(f"{nnz} lookups into {self.capacity} slots overflow the coalescing key")

    # ----------------------------------------------------------------------------- the map
    def query(self, ids, *, must_hit: bool = False):
        """Slot of each id (int64), -1 for a miss; with must_hit, a miss raises."""
        on_device = self.arrays.on_device(ids)
        ids = self.arrays.host(ids, "ids")
        check_range("ids", ids, 0, self.num_rows)
        slots = self.map.query(self.arrays.to_engine(ids))
        if must_hit and ids.size:
            misses = np.flatnonzero(self.arrays.to_host(slots) < 0)
            if misses.size:
                pos = int(misses[0])
                raise ValueError(
                    f"ids[{pos}] = {ids[pos]} is not in the scratchpad ({misses.size} of {ids.size} ids miss)"
                )
        return self.arrays.result(slots, on_device)

    def insert(self, ids, slots, *, assume_unique: bool = False) -> None:
        """Map each ids[i] to the free slot slots[i]. Ids must be new and unique, slots free and unique."""
        ids, slots = self.arrays.host(ids, "ids"), self.arrays.host(slots, "slots")
        if ids.size != slots.size:
            raise ValueError(f"ids and slots differ in length: {ids.size} vs {slots.size}")
        check_range("ids", ids, 0, self.num_rows)
        if not assume_unique:  # the caller's promise saves two sorts per call (the planner's case)
            check_unique("ids", ids)
        free = self.capacity - self.map.live
        if ids.size > free:
            raise ValueError(
                f"cannot insert {ids.size} ids: only {free} of {self.capacity} slots are free (erase some first)"
            )
        self._check_slots("slots", slots)
        if not assume_unique:
            check_unique("slots", slots)
        used = np.flatnonzero(self._slot_ids[slots] >= 0)
        if used.size:
            pos = int(used[0])
            raise ValueError(f"slots[{pos}] = {slots[pos]} is already used by id {self._slot_ids[slots[pos]]}")
        device_ids = self.arrays.to_engine(ids)
        present = np.flatnonzero(self.arrays.to_host(self.map.query(device_ids)) >= 0)
        if present.size:
            pos = int(present[0])
            raise ValueError(f"ids[{pos}] = {ids[pos]} is already in the scratchpad")
        self.map.insert(device_ids, self.arrays.to_engine(slots))
        self._slot_ids[slots] = ids

    def erase(self, ids, *, assume_unique: bool = False) -> Erased:
        """Remove ids from the map and free their slots (which must not be held).

        Returns the freed slots and whether each was dirty: write those rows back first (gather)
        if the host table needs them; erase clears the dirty bits.
        """
        ids = self.arrays.host(ids, "ids")
        check_range("ids", ids, 0, self.num_rows)
        if not assume_unique:
            check_unique("ids", ids)
        device_ids = self.arrays.to_engine(ids)
        slots = self.arrays.to_host(self.map.query(device_ids))
        absent = np.flatnonzero(slots < 0)
        if absent.size:
            pos = int(absent[0])
            raise ValueError(f"ids[{pos}] = {ids[pos]} is not in the scratchpad: nothing to erase")
        held = np.flatnonzero(self._holds[slots] > 0)
        if held.size:
            pos = int(held[0])
            raise ValueError(
                f"ids[{pos}] = {ids[pos]} lives in slot {slots[pos]}, which is held by "
                f"{self._holds[slots[pos]]} batch(es) in flight: release it first"
            )
        self.map.erase(device_ids)
        was_dirty = self._dirty[slots].copy()
        self._dirty[slots] = False
        self._slot_ids[slots] = -1
        if self.map.used() > MAX_USED_FRACTION * self.table_size:
            self.rebuild()
        return Erased(slots, was_dirty)

    def rebuild(self) -> None:
        """Clear the hash map and re-insert every live id (in slot order): drops all tombstones."""
        slots = np.flatnonzero(self._slot_ids >= 0).astype(np.int64)
        self.map.rebuild(self.arrays.to_engine(self._slot_ids[slots]), self.arrays.to_engine(slots))

    @property
    def rebuilds(self) -> int:
        """How many times the hash map was rebuilt."""
        return self.map.rebuilds

    # ----------------------------------------------------------------------------- rows
    def gather(self, slots) -> tuple:
        """(rows [n, dim], state [n, state_width] or None) of the given slots (copies)."""
        on_device = self.arrays.on_device(slots)
        slots = self.arrays.host(slots, "slots")
        self._check_slots("slots", slots)
        rows, state = self.slot_rows.gather(self.arrays.to_engine(slots))
        return (self.arrays.result(rows, on_device), None if state is None else self.arrays.result(state, on_device))

    def scatter(self, slots, rows, state=None, *, dirty: bool = False, assume_unique: bool = False) -> None:
        """Write rows (and state, required when state_width > 0) into distinct slots.

        dirty=False (the default) marks the slots clean: the rows are fresh copies of the host
        table, as in ScratchPipe's Insert stage. dirty=True marks them changed.
        assume_unique=True: the caller promises distinct slots, saving a sort.
        """
        slots = self.arrays.host(slots, "slots")
        self._check_slots("slots", slots)
        if not assume_unique:
            check_unique("slots", slots)
        self.slot_rows.scatter(self.arrays.to_engine(slots), rows, state)
        self._dirty[slots] = dirty

    # ----------------------------------------------------------------------------- embedding bag
    def embedding_bag_forward(self, slots, offsets):
        """Pooled sums [num_bags, dim]: bag b sums rows[slots[offsets[b]:offsets[b+1]]]."""
        on_device = self.arrays.on_device(slots)
        slots, offsets = self.arrays.host(slots, "slots"), self.arrays.host(offsets, "offsets")
        self._check_slots("slots", slots)
        self._check_offsets(offsets, slots.size)
        pooled = self.slot_rows.bag_forward(self.arrays.to_engine(slots), self.arrays.to_engine(offsets))
        return self.arrays.result(pooled, on_device)

    def backward_update(
        self, slots, offsets, grad_pooled, optimizer: OptimizerKind | str, lr: float, eps: float = 1e-8
    ) -> None:
        """Backward of `embedding_bag_forward` fused with the optimizer step, in place.

        Each row's gradient is the sum of its lookups' bag gradients, added in lookup order;
        then the optimizer updates the row (and its state). Touched slots become dirty.
        eps=1e-8 is FBGEMM's default for row-wise Adagrad (torch.optim.Adagrad uses 1e-10).
        """
        optimizer = OptimizerKind.parse(optimizer)
        slots, offsets = self.arrays.host(slots, "slots"), self.arrays.host(offsets, "offsets")
        self._check_slots("slots", slots)
        self._check_offsets(offsets, slots.size)
        device_slots, device_offsets = self.arrays.to_engine(slots), self.arrays.to_engine(offsets)
        self.slot_rows.backward_update(device_slots, device_offsets, grad_pooled, optimizer, lr, eps)
        self._dirty[slots] = True

    # ----------------------------------------------------------------------------- bookkeeping
    @property
    def slot_ids(self) -> np.ndarray:
        """[capacity] id in each slot, -1 = free (read-only view)."""
        view = self._slot_ids.view()
        view.flags.writeable = False
        return view

    @property
    def hold_counts(self) -> np.ndarray:
        """[capacity] how many batches in flight hold each slot (read-only view)."""
        view = self._holds.view()
        view.flags.writeable = False
        return view

    def __len__(self) -> int:
        """Number of used slots (ids in the map)."""
        return self.map.live

    @property
    def tombstones(self) -> int:
        """Erased buckets not yet reused or rebuilt away."""
        return self.map.tombstones

    def free_slots(self) -> np.ndarray:
        """Slots holding no id, ascending."""
        return np.flatnonzero(self._slot_ids < 0).astype(np.int64)

    def hold(self, slots, *, assume_unique: bool = False) -> None:
        """One more batch in flight uses each distinct slot given (a slot listed twice counts once).

        assume_unique=True: the caller promises distinct slots, saving a sort.
        """
        slots = self.arrays.host(slots, "slots")
        slots = slots if assume_unique else np.unique(slots)
        self._check_slots("slots", slots)
        free = np.flatnonzero(self._slot_ids[slots] < 0)
        if free.size:
            raise ValueError(f"slot {slots[free[0]]} is free: only slots holding an id can be held")
        self._holds[slots] += 1

    def release(self, slots, *, assume_unique: bool = False) -> None:
        """Undo one `hold` of each distinct slot given (assume_unique as in `hold`)."""
        slots = self.arrays.host(slots, "slots")
        slots = slots if assume_unique else np.unique(slots)
        self._check_slots("slots", slots)
        unheld = np.flatnonzero(self._holds[slots] <= 0)
        if unheld.size:
            raise ValueError(f"slot {slots[unheld[0]]} is not held: release without a matching hold")
        self._holds[slots] -= 1

    def held_mask(self) -> np.ndarray:
        """[capacity] bool, True where some batch in flight holds the slot."""
        return self._holds > 0

    def mark_dirty(self, slots) -> None:
        """Record that these slots' rows changed (e.g. updated in place with torch ops)."""
        slots = self.arrays.host(slots, "slots")
        self._check_slots("slots", slots)
        self._dirty[slots] = True

    def clear_dirty(self, slots) -> None:
        """Record that these slots' rows were written back to the host table."""
        slots = self.arrays.host(slots, "slots")
        self._check_slots("slots", slots)
        self._dirty[slots] = False

    def dirty_mask(self) -> np.ndarray:
        """[capacity] bool copy, True where the row changed since it was filled or written back."""
        return self._dirty.copy()

    def dirty_slots(self) -> np.ndarray:
        """Dirty slots, ascending: what a flush must write back."""
        return np.flatnonzero(self._dirty).astype(np.int64)
