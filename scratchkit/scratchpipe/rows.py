"""The scratchpad's row store: `capacity` slots of one table's rows, and what each slot holds.

    rows         [capacity, dim] float32    on the device: what Train reads and updates
    state        [capacity, width] float32  the optimizer state beside each row (None for SGD)
    slot_ids     [capacity] int64           the id in each slot, -1 = free
    dirty        [capacity] bool            changed since it was filled: evicting it needs a write-back
    last_trained [capacity] int64           the batch that last trained it: the planner's LRU clock

This is all the pipeline keeps between `train()` calls; the planner starts each call from it
(scratchkit/scratchpipe/plan_ahead.py, `PlanSetup`). The id -> slot map is the planner's own,
kept on the host; a map on the device, with holds and its own gather, is the kernels' scratchpad
(scratchkit/kernels/scratchpad.py), where the hash map is taught.

Its callers keep the planner's promises (distinct slots in range, ids in range), so nothing here
re-checks them on the hot path: the exactness tests (every lookup a hit, every parameter the
reference's) are what catch a caller that broke one.

On a CPU run that gives the host stages a process of their own, the store lives in shared memory
(`shared=True`, made before the fork), so both processes read and write the same slots. On a GPU
the rows are CuPy arrays (Insert's scatter is the `.cu` kernel) seen by torch through DLPack.
"""

from __future__ import annotations

import numpy as np
import torch

from scratchkit.embedding.shared_memory import shared_array
from scratchkit.kernels.engine import EngineKind, make_engine


class ScratchpadRows:
    """The slots of one table of `num_rows` rows. `engine`: a concrete EngineKind (twin or host
    on a CPU, cupy on a GPU)."""

    def __init__(
        self,
        num_rows: int,
        capacity: int,
        dim: int,
        state_width: int,
        engine: EngineKind,
        shared: bool = False,
        bookkeeping_on_device: bool = False,
    ):
        self.num_rows, self.capacity, self.dim, self.state_width = num_rows, capacity, dim, state_width
        if shared and EngineKind(engine) is EngineKind.CUPY:
            raise ValueError("a shared row store lives in host memory: a CPU engine, not CuPy")
        self.engine = make_engine(engine)
        xp = self.engine.xp
        host_zeros = shared_array if shared else np.zeros
        zeros = host_zeros if xp is np else xp.zeros
        self._rows = zeros((capacity, dim), dtype=np.float32)
        self._state = zeros((capacity, state_width), dtype=np.float32) if state_width else None
        self.rows = as_tensor(self._rows)  # [capacity, dim]
        self.state = as_tensor(self._state) if self._state is not None else None
        # the bookkeeping: host arrays for the host planner; beside the rows for the device
        # planner's stages (device_moves.py), so no step waits on a copy to the host
        books = zeros if bookkeeping_on_device else host_zeros
        self.slot_ids = books(capacity, dtype=np.int64)  # [capacity]
        self.slot_ids.fill(-1)
        self.dirty = books(capacity, dtype=bool)  # [capacity]
        self.last_trained = books(capacity, dtype=np.int64)  # [capacity]
        self.last_trained.fill(-1)
        # every page written now, not at its slot's first Insert: np.zeros and a fresh shared
        # mapping get their pages from the kernel at the first write, so a scratchpad still
        # filling would pay those faults inside Insert's clock, unevenly from step to step
        # (tests/test_scratchpipe_rows.py)
        for array in (self._rows, self._state, self.dirty):
            if isinstance(array, np.ndarray):  # (CuPy's zeros are written already)
                array.fill(0)

    def scatter(self, slots: np.ndarray, rows, state) -> None:
        """Fetched rows (and their state) into distinct `slots`: Insert's kernel."""
        device_slots = slots if self.engine.xp is np else self.engine.xp.asarray(slots)
        self.engine.scatter_rows(self._rows, device_slots, _as_engine(rows, self.engine.xp))
        if self._state is not None:
            self.engine.scatter_rows(self._state, device_slots, _as_engine(state, self.engine.xp))

    def gather(self, slots) -> tuple:
        """(rows [n, dim], state [n, width] or None) of `slots`, as new engine arrays."""
        rows = self.engine.gather_rows(self._rows, slots)
        return rows, (self.engine.gather_rows(self._state, slots) if self._state is not None else None)

    def place(self, slots: np.ndarray, ids: np.ndarray) -> None:
        """Record that slots[i] now holds ids[i]."""
        self.slot_ids[slots] = ids

    def mark_trained(self, slots: np.ndarray, batch: int) -> None:
        """Train(batch) updated these slots' rows: dirty, and most recently trained."""
        self.dirty[slots] = True
        self.last_trained[slots] = batch

    def clear_dirty(self, slots: np.ndarray) -> None:
        """These slots' rows are in the host table now (written back, or about to be replaced)."""
        self.dirty[slots] = False

    def dirty_slots(self) -> np.ndarray:
        """Dirty slots, ascending: what a flush must write back."""
        xp = self.engine.xp if self.books_on_device else np
        return xp.flatnonzero(self.dirty)

    def host_arrays(self) -> list[np.ndarray]:
        """Every array of the store in host memory: what a forked host process maps in."""
        arrays = (self._rows, self._state, self.slot_ids, self.dirty, self.last_trained)
        return [array for array in arrays if isinstance(array, np.ndarray)]

    @property
    def books_on_device(self) -> bool:
        """Whether slot_ids, dirty and last_trained are device arrays (CuPy), not NumPy."""
        return not isinstance(self.slot_ids, np.ndarray)

    def used(self) -> int:
        """How many slots hold an id."""
        return int((self.slot_ids >= 0).sum())


def as_tensor(array) -> torch.Tensor:
    """A tensor sharing the engine array's memory (no copy): NumPy directly, CuPy through DLPack."""
    return torch.from_numpy(array) if isinstance(array, np.ndarray) else torch.from_dlpack(array)


def _as_engine(tensor, xp):
    """A tensor (or an engine array already) as the engine's float32 array (a view where it can be)."""
    if not isinstance(tensor, torch.Tensor):
        return tensor
    if xp is np:
        return tensor.numpy()
    return xp.ascontiguousarray(xp.from_dlpack(tensor), dtype=xp.float32)


__all__ = ["ScratchpadRows", "as_tensor"]
