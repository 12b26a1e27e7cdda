"""One table's device-side cache: rows by slot in device memory, the id -> slot map on the host.

    device (engine arrays, seen by torch)        host (NumPy bookkeeping)
    rows  [capacity + spare, dim]                slot_of_id [num_rows] slot of each id, -1 = not cached
    state [capacity + spare, width] or None      id_of_slot [capacity] id in each slot, -1 = free
                                                 dirty      [capacity] changed since fetched

Slots `0 .. capacity-1` are the cache proper. The `spare` slots after them are a per-step
*transient* area: the static cache fetches the rows it does not pin there for one step and returns
them to the host after the update (see `cached.py`). Every row always travels with its optimizer
state: a row without its state would be stale.

How rows move: as production caches move them (FBGEMM's table-batched embedding with a managed
cache, TorchRec's prefetch), the host table is mapped into the device and the *device* reads a
missed row over the link and writes a dirty victim back over it, with the scratchpad's row kernels
(kernels/rows.cu: `gather_rows`, `scatter_rows`), the very ones `scratchpipe-device` uses
(scratchpipe/device_moves.py). No host core gathers, stages or scatters a row. The caller hands in
the host table as the engine sees it (`host_view`: on a GPU page-locked memory at its device
address, CuPy kernels; on a CPU the table's own memory, the NumPy twin), so on a CPU the same code
path runs with the CPU as the device.

The engine's kernels run on the caller's current stream (a CuPy stream on a GPU: the default one,
ordered with torch's, or a prefetch's own); `finish()` waits for them, which a write-back to the
host needs before the host reads the table.

Why not `scratchkit.kernels.scratchpad.Scratchpad`? Its open-addressing hash map is what ScratchPipe needs
on a GPU at scale. The backward-looking caches need per-slot policy metadata beside the map and
run their bookkeeping on the host; a dense `slot_of_id` array (8 bytes per table row) is the
simplest exact map there is, O(1) and vectorised in NumPy. What a map lookup costs on real
hardware is the cost model's business (`scratchkit.projection.project`), not this bookkeeping's.
"""

from __future__ import annotations

import numpy as np
import torch


class DeviceCache:
    """`capacity` slots of one table's rows (+ optimizer state), moved by `engine`'s row kernels.

    host_weight [num_rows, dim], host_state [num_rows, width] or None: the host table and its
    optimizer state as `engine` sees them (engine arrays over the host tables' memory)."""

    def __init__(self, host_weight, host_state, capacity: int, engine):
        num_rows, dim = host_weight.shape
        if not 1 <= capacity <= num_rows:
            raise ValueError(f"cache capacity must be in [1, {num_rows}] rows, got {capacity}")
        self.num_rows, self.capacity, self.dim = num_rows, capacity, dim
        self.engine, self.xp = engine, engine.xp
        self.host_weight, self.host_state = host_weight, host_state
        self._rows = self.xp.zeros((capacity, dim), dtype=np.float32)
        self._state = None if host_state is None else self.xp.zeros((capacity, host_state.shape[1]), dtype=np.float32)
        self._expose()
        self.slot_of_id = np.full(num_rows, -1, dtype=np.int64)
        self.id_of_slot = np.full(capacity, -1, dtype=np.int64)
        self.dirty = np.zeros(capacity, dtype=bool)

    def _expose(self) -> None:
        """`rows` and `state`: torch's views of the engine arrays (no copy), what Train reads and updates."""
        self.rows = as_tensor(self._rows)  # [slots, dim]
        self.state = None if self._state is None else as_tensor(self._state)  # [slots, width]

    # ----------------------------------------------------------------------------- the map
    def free_slots(self) -> np.ndarray:
        return np.flatnonzero(self.id_of_slot < 0)

    def occupied_slots(self) -> np.ndarray:
        return np.flatnonzero(self.id_of_slot >= 0)

    def __len__(self) -> int:
        return int((self.id_of_slot >= 0).sum())

    # ----------------------------------------------------------------------------- moving rows
    def fill(self, ids: np.ndarray, slots: np.ndarray) -> None:
        """Read host rows `ids` (and their state) into free `slots`; they arrive clean."""
        if len(ids) == 0:
            return
        self._read_in(ids, slots)
        self.slot_of_id[ids] = slots
        self.id_of_slot[slots] = ids
        self.dirty[slots] = False

    def evict(self, slots: np.ndarray) -> int:
        """Empty `slots`, writing the dirty ones back to the host first. -> rows written back."""
        written = self.write_back(slots)
        self.slot_of_id[self.id_of_slot[slots]] = -1
        self.id_of_slot[slots] = -1
        return written

    def write_back(self, slots: np.ndarray) -> int:
        """Write the dirty ones of `slots` to the host and mark them clean. -> rows written back."""
        slots = slots[self.dirty[slots]]
        if len(slots):
            self._write_out(slots, self.id_of_slot[slots])
            self.dirty[slots] = False
        return len(slots)

    def flush(self) -> int:
        """Write every dirty row back, and wait for the writes: the host tables are complete after
        it. A second flush finds nothing dirty and moves nothing."""
        written = self.write_back(np.flatnonzero(self.dirty))
        self.finish()
        return written

    def finish(self) -> None:
        """Wait for the row kernels issued on the current stream (nothing to wait for on a CPU)."""
        if self.xp is not np:
            self.xp.cuda.get_current_stream().synchronize()

    # ----------------------------------------------------------------------------- transient slots
    def load_transient(self, ids: np.ndarray) -> np.ndarray:
        """Read rows `ids` into the spare slots after the cache for one step. -> their slots."""
        need = self.capacity + len(ids)
        if need > self._rows.shape[0]:  # grow the spare area (rare: a bigger working set)
            grow = need - self._rows.shape[0]
            more = lambda array: self.xp.concatenate([array, self.xp.zeros((grow, array.shape[1]), dtype=np.float32)])
            self._rows = more(self._rows)
            self._state = None if self._state is None else more(self._state)
            self._expose()
        slots = np.arange(self.capacity, need, dtype=np.int64)
        if len(ids):
            self._read_in(ids, slots)
        return slots

    def return_transient(self, ids: np.ndarray) -> None:
        """Write the transient rows of this step (loaded for `ids`, in order) back to the host."""
        if len(ids):
            self._write_out(np.arange(self.capacity, self.capacity + len(ids), dtype=np.int64), ids)

    # ----------------------------------------------------------------------------- the kernels
    def _read_in(self, ids: np.ndarray, slots: np.ndarray) -> None:
        """gather_rows from the host table at `ids` (over the link), scatter_rows into `slots`."""
        ids, slots = self._on_device(ids), self._on_device(slots)
        for host, cached in ((self.host_weight, self._rows), (self.host_state, self._state)):
            if host is not None:
                self.engine.scatter_rows(cached, slots, self.engine.gather_rows(host, ids))  # [m, width]

    def _write_out(self, slots: np.ndarray, ids: np.ndarray) -> None:
        """gather_rows from `slots`, scatter_rows into the host table at `ids` (over the link)."""
        ids, slots = self._on_device(ids), self._on_device(slots)
        for host, cached in ((self.host_weight, self._rows), (self.host_state, self._state)):
            if host is not None:
                self.engine.scatter_rows(host, ids, self.engine.gather_rows(cached, slots))  # [v, width]

    def _on_device(self, index: np.ndarray):
        """A host int64 index array as the engine's (a copy to the device on a GPU)."""
        index = np.ascontiguousarray(index, dtype=np.int64)
        return index if self.xp is np else self.xp.asarray(index)


def as_tensor(array) -> torch.Tensor:
    """A tensor over an engine array's memory (no copy): NumPy directly, CuPy through DLPack."""
    return torch.from_numpy(array) if isinstance(array, np.ndarray) else torch.from_dlpack(array)
