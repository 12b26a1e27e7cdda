"""Rows between the host tables and the scratchpad, moved by the device: `scratchpipe-device`'s stages.

The host-side design (host_stages.py) gathers missed rows on the host, copies them over the link,
and scatters them into their slots; write-backs go the other way. Each row costs host work, and a
large model's host stages are the step's bound (docs/costmodel.md). `DeviceStages` has the same
stages, run by the same drivers under the same schedule, but the device does the per-row work
with the scratchpad's row kernels (kernels/rows.cu), reading and writing the host tables where
they are:

    collect(b)     gather_rows from the host tables at the missed ids, into a device buffer
    write_back(b)  gather_rows from the victims' slots, scatter_rows into the host tables
    transfer(b)    nothing: the rows crossed the link as Collect read them
    insert(b)      scatter_rows of the buffer into the missed ids' slots, then the slots' ids

On a CPU the "device" is the CPU: the host tables are NumPy views of their torch tensors and the
engine is the NumPy twin (or the host build of the same `.cu`). On a GPU the host tables are
registered with CUDA as mapped, page-locked memory (`host_view`), so the same kernels read and
write them over the link with no staging copy (zero-copy, as FBGEMM's UVM tables do). That GPU
branch has not yet run on a GPU: scripts/gpu_check.sh runs it where one is present.

Insert keeps host_stages.py's safe order (a dirty slot always holds its id's newest row), and
`flush` is host_stages.py's.
"""

from __future__ import annotations

import numpy as np
import torch

from scratchkit.device_work import launched
from scratchkit.kernels.engine import OwnStream, SameStream
from scratchkit.scratchpipe.host_stages import HostStages, InFlight

CUDA_HOST_REGISTER_MAPPED = 2  # cudaHostRegisterMapped: give the memory a device address


class DeviceStages(HostStages):
    """HostStages whose Collect, Write-back and Insert are the device's kernels (module note)."""

    def __init__(self, tables, pads, device):
        super().__init__(tables, pads, device)
        xp = pads[0].engine.xp if pads else np
        self.host_weights = [host_view(w, xp) for w in tables.weights]  # per table [rows, dim]
        self.host_state = [None if s is None else host_view(s, xp) for s in tables.state]
        # Collect runs on its driver thread, Write-back and Insert on another: a stream each, so
        # their kernels run beside Train's; each stage waits for its own before it returns
        self.collect_stream, self.evict_stream = OwnStream(xp), OwnStream(xp)

    def collect(self, item: InFlight, written_back_upto: int) -> None:
        """The missed rows (and state), read from the host tables into device buffers."""
        for t, (pad, plan) in enumerate(zip(self.pads, item.tables)):
            if plan.wait_for_write_back > written_back_upto:  # the hazard lab's stale reads
                item.stale_reads += len(plan.miss_ids)
            gather = lambda table: None if table is None else pad.engine.gather_rows(table, plan.miss_ids)
            with self.collect_stream:
                item.staged.append((gather(self.host_weights[t]), gather(self.host_state[t])))  # [m, width]
        self.collect_stream.finish()

    def write_back(self, item: InFlight) -> None:
        """The dirty victims' rows (and state), from their slots into the host tables."""
        with self.evict_stream:
            for t, (pad, plan) in enumerate(zip(self.pads, item.tables)):
                if len(plan.victim_slots):
                    rows, state = pad.gather(plan.victim_slots)
                    pad.engine.scatter_rows(self.host_weights[t], plan.victim_ids, rows)
                    if state is not None:
                        pad.engine.scatter_rows(self.host_state[t], plan.victim_ids, state)
        self.evict_stream.finish()  # home before Collect reads them, or Insert reuses the slots

    def transfer(self, item: InFlight) -> None:
        """Nothing to copy: Collect's kernels read the rows over the link into device memory."""

    def place_rows(self, item: InFlight) -> None:
        """host_stages.py's, counted: on a GPU the slots' dirty bits and ids are device arrays,
        and writing each is an array op a table."""
        super().place_rows(item)
        if self.dev.is_cuda:  # (the books a GPU keeps beside the rows: ScratchpadRows)
            launched("slot books written", 2 * len(self.pads))

    def insert(self, item: InFlight) -> None:
        """host_stages.py's Insert, on this stage's stream (it waits for its kernels at the end)."""
        with self.evict_stream:
            super().insert(item)


class OnDemandStages(DeviceStages):
    """DeviceStages for a step that runs them all in order on the trainer's own stream, just
    before its Train (`lru-device`, a cache filled on demand: PlanIn.STEP). One stream orders
    everything a pipeline's streams and events order: Collect(b) after Write-back(b-1), Write-back(b)
    and Insert(b) after Train(b-1)'s update, Train(b) after Insert(b). So no stage waits for the
    device: the step's waits are its Plan's read of the batch's counts and the loss."""

    def __init__(self, tables, pads, device):
        super().__init__(tables, pads, device)
        self.collect_stream = self.evict_stream = SameStream()

    def insert(self, item: InFlight) -> None:
        """The rows into their slots; Train, queued next on the same stream, reads them after."""
        self.place_rows(item)

    def trained(self, b: int, event) -> None:
        """Nothing to keep: the next batch's stages are queued after Train(b) on the same stream."""


def host_view(tensor: torch.Tensor, xp):
    """A host table [rows, width] float32 as an engine array over the same memory: itself on a
    CPU; on a GPU, page-locked memory seen at its device address. A trainer on a GPU pins its host
    tables already (torch's pinned memory, which CUDA's unified addressing maps at the same
    address); other memory is registered as mapped here, and stays so while the trainer lives."""
    if xp is np:
        return tensor.numpy()
    pointer, nbytes = tensor.data_ptr(), tensor.numel() * tensor.element_size()
    if tensor.is_pinned():
        device_pointer = pointer
    else:
        xp.cuda.runtime.hostRegister(pointer, nbytes, CUDA_HOST_REGISTER_MAPPED)
        device_pointer = xp.cuda.runtime.hostGetDevicePointer(pointer, 0)
    memory = xp.cuda.UnownedMemory(device_pointer, nbytes, tensor)
    return xp.ndarray(tuple(tensor.shape), dtype=xp.float32, memptr=xp.cuda.MemoryPointer(memory, 0))


__all__ = ["DeviceStages", "OnDemandStages", "host_view"]
