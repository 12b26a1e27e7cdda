"""Train's embedding work on a GPU: every table's lookup, backward and update as a few kernels of
`kernels/tbe.cu`, as FBGEMM's table-batched embedding (TBE) runs them, and nothing the host waits for.

On a CPU the trainers call the C++ loops (table_batched.py, fused_sgd.py: PyTorch's result bit for
bit). Where the trainer's device runs CUDA (`Device.is_cuda`: a GPU, or the stand-in runtime in
CI) they call `DeviceTBE` instead. The per-table torch ops of optim.py, which the CPU's loops
replace, are no way to train on a GPU: a dozen small launches per table, and a sparse COO tensor
whose coalesce reads its distinct count back to the host, a wait per table per step. Here a step is

    lookups   ids, bag offsets (and slots) of every table packed on the host, one pinned copy over
    forward   `tbe_forward`: every bag of every table, one launch           -> pooled [B, T, dim]
    sort      torch.sort(stable) of each lookup's global id (the table's first row + its id): a
              key's lookups stay in lookup order                             (the backward stage)
    update    `tbe_backward_<optimizer>`: per distinct id, the first of its sorted lookups sums the
              run's gradients in lookup order and updates the row (and its state), one launch
    hits      (ScratchPipe) `tbe_count_hits`: the lookups whose slot holds their id, a device
              counter the host reads with the loss (Device.read_later)

Summation order: each id's gradients are added in lookup order, one thread per row and column, as
the CPU's `SummationOrder.BY_ID`; PyTorch's coalesce adds them in its sort's order. So on CUDA the
result is PyTorch's to rounding (measure/verify.py's GPU_TOLERANCE), and with SGD it is bit for
bit the CPU's by-id run (tests/test_device_tbe.py holds the two together).

The kernels run on the engine the Device names (`Device.kernels`: a stand-in's in tests), else CuPy
on a GPU and the NumPy twins elsewhere, on torch's current stream (`Device.kernel_stream`), so
they are ordered with torch's own ops without a wait. Torch tensors reach them as engine arrays
over the same memory (DLPack on a GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from scratchkit.config import OptimizerConfig, OptimizerKind
from scratchkit.device import Device
from scratchkit.device_work import launched
from scratchkit.kernels.engine import EngineKind, make_engine


@dataclass
class DeviceLookups:
    """One batch's lookups on the device, every table's one after the other (tbe.cu's layout), as
    torch tensors and as the engine's arrays over the same memory (`arrays`)."""

    keys: torch.Tensor  # [N] each lookup's global id: its table's first row + its id
    index: torch.Tensor  # [N] the row each lookup reads: its global id, or its slot
    index_base: torch.Tensor  # [T] what index loses to be the table's row: the first row, or 0
    starts: torch.Tensor  # [T+1] table t's lookups are starts[t] .. starts[t+1]
    offsets: torch.Tensor  # [T * B] table t's bag b starts at lookup starts[t] + offsets[t*B + b]
    num_bags: int
    arrays: dict  # the same, as engine arrays
    sorted_keys: torch.Tensor | None = None  # [N] after `DeviceTBE.sort`
    sorted_at: torch.Tensor | None = None  # [N] the lookup at each sorted position


class DeviceTBE:
    """The kernels of tbe.cu for tables of `table_sizes` rows, on `dev`."""

    def __init__(self, dev: Device, table_sizes: list[int]):
        self.dev = dev
        kind = EngineKind.CUPY if dev.torch.type == "cuda" else EngineKind.TWIN
        self.engine = dev.kernels if dev.kernels is not None else make_engine(kind)
        self.xp = self.engine.xp
        self.row_base = np.concatenate([[0], np.cumsum(table_sizes)]).astype(np.int64)  # [T+1]
        self.num_tables = len(table_sizes)
        bases = torch.from_numpy(np.concatenate([self.row_base[:-1], np.zeros(self.num_tables, np.int64)]))
        self.id_base, self.slot_base = dev.to_device_together([bases])[0].split(self.num_tables)
        with dev.kernel_stream():
            self._id_base = self._array(self.id_base)  # the hit count's, as the engine's array
        self._views: dict[tuple, list] = {}  # tables' data pointers -> their engine arrays

    # --- the batch --------------------------------------------------------------------------------
    def lookups(self, ids, offsets, slots=None) -> DeviceLookups:
        """Every table's ids [n_t] and bag starts [B] (host arrays or tensors) and, for a cache or a
        scratchpad, the slot of each lookup [n_t] (on the host, or already on the device), on the
        device in one copy. Without slots each lookup reads its id's row of its table."""
        ids = [np.asarray(i, dtype=np.int64) for i in ids]
        keys = np.concatenate([i + base for i, base in zip(ids, self.row_base)])
        starts = np.concatenate([[0], np.cumsum([len(i) for i in ids])]).astype(np.int64)
        host = [keys, np.concatenate([np.asarray(o, dtype=np.int64) for o in offsets]), starts]
        on_host = slots is not None and not _on_device(slots[0])
        if on_host:
            host.append(np.concatenate([np.asarray(s, dtype=np.int64) for s in slots]))
        moved = self.dev.to_device_together([torch.from_numpy(a) for a in host])
        keys, offsets_flat, starts = moved[:3]
        if slots is None:
            index, base = keys, self.id_base
        else:
            index = moved[3] if on_host else torch.cat([_as_torch(s) for s in slots])
            base = self.slot_base
        num_bags = len(offsets[0]) if len(offsets) else 0
        lookups = DeviceLookups(keys, index, base, starts, offsets_flat, num_bags, {})
        with self.dev.kernel_stream():
            lookups.arrays = {k: self._array(getattr(lookups, k)) for k in ("keys", "index", "index_base", "starts")}
            lookups.arrays["offsets"] = self._array(offsets_flat)
        return lookups

    # --- forward, backward, update ----------------------------------------------------------------
    def forward(self, tables: list[torch.Tensor], lookups: DeviceLookups) -> torch.Tensor:
        """pooled [B, T, dim]: every bag of every table, its rows summed in lookup order."""
        dim = tables[0].shape[1]
        pooled = torch.empty(lookups.num_bags, self.num_tables, dim, device=tables[0].device)
        a = lookups.arrays
        with self.dev.kernel_stream():
            self.engine.tbe_forward(
                self._tables(tables), a["index"], a["index_base"], a["starts"], a["offsets"], self._array(pooled)
            )
        return pooled

    def sort(self, lookups: DeviceLookups) -> DeviceLookups:
        """The lookups sorted by global id, stably: what the update walks. Changes no weight."""
        lookups.sorted_keys, lookups.sorted_at = torch.sort(lookups.keys, stable=True)
        return lookups

    def update(
        self,
        tables: list[torch.Tensor],
        states: list[torch.Tensor | None],
        lookups: DeviceLookups,
        grad: torch.Tensor,
        optimizer: OptimizerConfig,
    ) -> None:
        """Each distinct looked-up row updated in place with its summed gradient (`grad` [B, T, dim],
        the pooled vectors'), and its optimizer state: one launch for every table."""
        if lookups.sorted_keys is None:
            raise ValueError("DeviceTBE.update: sort the lookups first (DeviceTBE.sort)")
        a = lookups.arrays
        with self.dev.kernel_stream():
            sorted_run = (self._array(lookups.sorted_keys), self._array(lookups.sorted_at))
            batch = (a["index"], a["index_base"], a["starts"], a["offsets"])
            common = (self._array(grad.contiguous()), *sorted_run, *batch)
            if optimizer.kind is OptimizerKind.SGD:
                self.engine.tbe_backward_sgd(self._tables(tables), *common, optimizer.lr)
            else:
                update = getattr(self.engine, f"tbe_backward_{optimizer.kind.value}")
                update(self._tables(tables), self._tables(states), *common, optimizer.lr, optimizer.eps)

    def count_hits(self, slot_ids: list, lookups: DeviceLookups) -> torch.Tensor:
        """A device scalar: the lookups whose slot holds their id, given each table's slot ids
        (engine arrays of this engine). Nothing waits: read it with the loss (Device.read_later)."""
        a = lookups.arrays
        with self.dev.kernel_stream():
            hits = self.xp.zeros(1, dtype=np.uint64)  # a memset on a GPU
            launched("hit counter zeroed")
            self.engine.tbe_count_hits(list(slot_ids), a["index"], a["keys"], self._id_base, a["starts"], hits)
        return _as_torch(hits.view(np.int64))[0]

    def reads_books(self, books) -> bool:
        """Whether this engine's kernels can read `books` (a row store's slot ids) where they are."""
        return isinstance(books, np.ndarray) == (self.xp is np)

    # --- torch tensors as engine arrays ---------------------------------------------------------
    def _array(self, tensor: torch.Tensor):
        """The engine's array over a tensor's memory (a view: no copy)."""
        tensor = tensor.detach()
        return tensor.numpy() if self.xp is np else self.xp.from_dlpack(tensor)

    def _tables(self, tensors: list[torch.Tensor]) -> list:
        """Tables as engine arrays, kept while they stay where they are (a trainer's tables do)."""
        key = tuple(t.data_ptr() for t in tensors)
        if key not in self._views:
            if len(self._views) >= 16:  # row stores made and dropped (a scratchpad's reset)
                self._views.clear()
            self._views[key] = [self._array(t) for t in tensors]
        return self._views[key]


def _on_device(array) -> bool:
    """Whether an array lives on the GPU (a CUDA tensor, or a CuPy array): not NumPy, not a CPU tensor."""
    if isinstance(array, torch.Tensor):
        return array.device.type != "cpu"
    return not isinstance(array, np.ndarray)


def _as_torch(array) -> torch.Tensor:
    """A NumPy or device array as a torch tensor over the same memory."""
    if isinstance(array, torch.Tensor):
        return array
    return torch.from_numpy(array) if isinstance(array, np.ndarray) else torch.from_dlpack(array)
