"""One table's device-side cache: rows by slot on the device, the id -> slot map on the host.

    device (torch)                               host (NumPy bookkeeping)
    rows  [capacity + spare, dim]                slot_of_id [num_rows] slot of each id, -1 = not cached
    state [capacity + spare, width] or None      id_of_slot [capacity] id in each slot, -1 = free
                                                 dirty      [capacity] changed since fetched

Slots `0 .. capacity-1` are the cache proper. The `spare` slots after them are a per-step
*transient* area: the static cache fetches the rows it does not pin there for one step and returns
them to the host after the update (see `cached.py`). Every row always travels with its optimizer
state: a row without its state would be stale.

Why not `scratchkit.kernels.scratchpad.Scratchpad`? Its open-addressing hash map is what ScratchPipe needs
on a GPU at scale. The backward-looking caches need per-slot policy metadata beside the map and
run their bookkeeping on the host; a dense `slot_of_id` array (8 bytes per table row) is the
simplest exact map there is, O(1) and vectorised in NumPy. What a map lookup costs on real
hardware is the cost model's business (`scratchkit.projection.costmodel`), not this bookkeeping's.
"""
from __future__ import annotations

import numpy as np
import torch

from scratchkit.device import Device


class DeviceCache:
    """`capacity` slots of one table's rows (+ optimizer state) on `dev`'s device."""

    def __init__(self, num_rows: int, capacity: int, dim: int, state_width: int, dev: Device):
        if not 1 <= capacity <= num_rows:
            raise ValueError(f"cache capacity must be in [1, {num_rows}] rows, got {capacity}")
        self.num_rows, self.capacity, self.dim = num_rows, capacity, dim
        self.dev, self.device = dev, dev.torch
        self.rows = torch.zeros(capacity, dim, device=self.device)
        self.state = torch.zeros(capacity, state_width, device=self.device) if state_width else None
        self.slot_of_id = np.full(num_rows, -1, dtype=np.int64)
        self.id_of_slot = np.full(capacity, -1, dtype=np.int64)
        self.dirty = np.zeros(capacity, dtype=bool)

    # ----------------------------------------------------------------------------- the map
    def free_slots(self) -> np.ndarray:
        return np.flatnonzero(self.id_of_slot < 0)

    def occupied_slots(self) -> np.ndarray:
        return np.flatnonzero(self.id_of_slot >= 0)

    def __len__(self) -> int:
        return int((self.id_of_slot >= 0).sum())

    # ----------------------------------------------------------------------------- moving rows
    def fill(self, ids: np.ndarray, slots: np.ndarray, weight: torch.Tensor, state) -> None:
        """Fetch host rows `ids` (and their state) into free `slots`; they arrive clean."""
        if len(ids) == 0:
            return
        self._copy_in(torch.from_numpy(ids), torch.from_numpy(slots), weight, state)
        self.slot_of_id[ids] = slots
        self.id_of_slot[slots] = ids
        self.dirty[slots] = False

    def evict(self, slots: np.ndarray, weight: torch.Tensor, state) -> int:
        """Empty `slots`, writing the dirty ones back to the host first. -> rows written back."""
        written = self.write_back(slots, weight, state)
        self.slot_of_id[self.id_of_slot[slots]] = -1
        self.id_of_slot[slots] = -1
        return written

    def write_back(self, slots: np.ndarray, weight: torch.Tensor, state) -> int:
        """Copy the dirty ones of `slots` to the host and mark them clean. -> rows written back."""
        slots = slots[self.dirty[slots]]
        if len(slots):
            self._copy_out(torch.from_numpy(slots), torch.from_numpy(self.id_of_slot[slots]), weight, state)
            self.dirty[slots] = False
        return len(slots)

    def flush(self, weight: torch.Tensor, state) -> int:
        """Write every dirty row back. A second flush finds nothing dirty and moves nothing."""
        return self.write_back(np.flatnonzero(self.dirty), weight, state)

    # ----------------------------------------------------------------------------- transient slots
    def load_transient(self, ids: np.ndarray, weight: torch.Tensor, state) -> np.ndarray:
        """Fetch rows `ids` into the spare slots after the cache for one step. -> their slots."""
        need = self.capacity + len(ids)
        if need > self.rows.shape[0]:            # grow the spare area (rare: a bigger working set)
            grow = need - self.rows.shape[0]
            self.rows = torch.cat([self.rows, self.rows.new_zeros(grow, self.dim)])
            if self.state is not None:
                self.state = torch.cat([self.state, self.state.new_zeros(grow, self.state.shape[1])])
        slots = np.arange(self.capacity, need, dtype=np.int64)
        if len(ids):
            self._copy_in(torch.from_numpy(ids), torch.from_numpy(slots), weight, state)
        return slots

    def return_transient(self, ids: np.ndarray, weight: torch.Tensor, state) -> None:
        """Write the transient rows of this step (loaded for `ids`, in order) back to the host."""
        if len(ids):
            slots = torch.arange(self.capacity, self.capacity + len(ids))
            self._copy_out(slots, torch.from_numpy(ids), weight, state)

    def _copy_in(self, ids: torch.Tensor, slots: torch.Tensor, weight, state) -> None:
        slots = self.dev.to_device(slots)
        self.rows.index_copy_(0, slots, self.dev.to_device(weight.index_select(0, ids), non_blocking=True))
        if self.state is not None:
            self.state.index_copy_(0, slots, self.dev.to_device(state.index_select(0, ids), non_blocking=True))

    def _copy_out(self, slots: torch.Tensor, ids: torch.Tensor, weight, state) -> None:
        slots = self.dev.to_device(slots)
        weight.index_copy_(0, ids, self.dev.to_host(self.rows.index_select(0, slots)))
        if self.state is not None:
            state.index_copy_(0, ids, self.dev.to_host(self.state.index_select(0, slots)))
