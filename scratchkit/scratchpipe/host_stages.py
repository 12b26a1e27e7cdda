"""ScratchPipe's host stages: the work that moves rows between the host tables and the scratchpad.

`HostStages` owns the host tables, one row store per table (rows.py) and the device, and does one
stage of one batch per call; the drivers decide when (schedule.py) and where (threads.py,
host_process.py). Per batch b, with Plan(b)'s decisions in hand (`InFlight`):

    collect(b)      missed rows (and their optimizer state) gathered from the host tables
    write_back(b)   dirty victims' rows copied from their slots into the host tables
    transfer(b)     the collected rows to the device (a side stream on a GPU; nothing on a CPU)
    insert(b)       the collected rows into their slots

and between steps, `flush()`: every dirty row home. Write-back comes before Insert: once the
victims' newest rows are home, their slots may be overwritten. Insert clears a slot's dirty bit,
then writes the row, then names the slot's new id; a failure between any two of these (or a
SIGKILL of the process running them) leaves every dirty slot holding its id's newest row, which
is all a flush needs to make the host tables complete.

`lock` is held through Write-back, Transfer and Insert of a batch (by the drivers) and through a
flush, so a flush between two steps sees the slots at a batch boundary. It is a semaphore made
before any fork, so a forked host process shares it.
"""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass, field

import torch

from scratchkit.device import Device
from scratchkit.embedding.shared_memory import map_in
from scratchkit.embedding.tables import HostTables
from scratchkit.scratchpipe.events import Stage
from scratchkit.scratchpipe.rows import ScratchpadRows, as_tensor


@dataclass
class InFlight:
    """One planned batch moving through the host stages."""

    index: int
    batch: object
    tables: list  # Plan(b)'s TablePlan per table
    staged: list = field(default_factory=list)  # per table (rows, state) collected, then on the device
    stale_reads: int = 0  # misses collected before their write-back (hazard lab)
    inserted: bool = False  # Insert(b) is done: Train(b) may start


class HostStages:
    """The host tables and the scratchpads' row stores, and the stages that move rows between them."""

    def __init__(self, tables: HostTables, pads: list[ScratchpadRows], device: Device):
        self.tables, self.pads, self.dev = tables, pads, device
        self.stream = device.new_stream()  # Transfer's side stream on a GPU, so Train keeps going
        self.lock = multiprocessing.Lock()
        self.train_events: dict[int, object] = {}  # batch -> the end of its Train, queued (`trained`)

    def trained(self, b: int, event) -> None:
        """Train(b) is queued on the device up to `event` (Device.record_event; None on a CPU,
        where it is done): the evicting stages that wait for Train(b) wait for the event
        (`wait_for_train`) before they read a slot's row or reuse the slot, so Train's own thread
        never waits for its update."""
        self.train_events[b] = event

    def wait_for_train(self, b: int) -> None:
        """Wait, on the calling stage's thread, until Train(b) and every earlier Train are done on
        the device (their events: one stream, so b's covers the earlier ones)."""
        done = [k for k in list(self.train_events) if k <= b]
        if done:
            event = self.train_events[max(done)]
            for k in done:
                self.train_events.pop(k, None)
            self.dev.wait_event(event, "train's update")

    def evicting(self, stage: Stage):
        """The method that runs `stage`, one of schedule.EVICTING_STAGES, for one batch."""
        return {Stage.WRITE_BACK: self.write_back, Stage.TRANSFER: self.transfer, Stage.INSERT: self.insert}[stage]

    def collect(self, item: InFlight, written_back_upto: int) -> None:
        """Gather each table's missed rows and state (pinned on a GPU, for Transfer). A miss whose
        evicting batch has not written back yet would read a stale row: counted (hazard lab)."""
        for t, plan in enumerate(item.tables):
            if plan.wait_for_write_back > written_back_upto:
                item.stale_reads += len(plan.miss_ids)
            index = torch.from_numpy(plan.miss_ids)
            rows = self.tables.weights[t].index_select(0, index)  # [m, dim]
            state = self.tables.state[t]
            state = state.index_select(0, index) if state is not None else None  # [m, width]
            item.staged.append((self.dev.pin(rows), self.dev.pin(state)))

    def write_back(self, item: InFlight) -> None:
        """The dirty victims' rows (and state), from their slots into the host tables."""
        for t, (pad, plan) in enumerate(zip(self.pads, item.tables)):
            if len(plan.victim_slots):
                self._copy_home(t, pad, plan.victim_slots, torch.from_numpy(plan.victim_ids))

    def transfer(self, item: InFlight) -> None:
        """The collected rows to the device, on the side stream; done before Insert reads them."""
        dev = self.dev
        with dev.use_stream(self.stream):
            item.staged = [
                (dev.to_device(rows, non_blocking=True), dev.to_device(state, non_blocking=True))
                for rows, state in item.staged
            ]
        dev.synchronize_stream(self.stream)

    def insert(self, item: InFlight) -> None:
        """The collected rows into their slots (`place_rows`), done before Train reads them."""
        self.place_rows(item)
        self.dev.synchronize_kernels()  # Insert's scatter done before Train reads

    def place_rows(self, item: InFlight) -> None:
        """The collected rows into their slots, in the safe order (module docstring)."""
        for pad, plan, (rows, state) in zip(self.pads, item.tables, item.staged):
            pad.clear_dirty(plan.miss_slots)  # the victims among them are home by now
            pad.scatter(plan.miss_slots, rows, state)
            pad.place(plan.miss_slots, plan.miss_ids)

    def flush(self) -> int:
        """Write every dirty row back, so the host tables are complete. -> rows written. The
        caller holds `lock`, or knows no stage runs (after a driver has stopped)."""
        self.dev.synchronize_current_stream()  # Train's queued updates and marks done first
        written = 0
        for t, pad in enumerate(self.pads):
            dirty = pad.dirty_slots()
            if len(dirty):
                self._copy_home(t, pad, dirty, self.dev.to_host(as_tensor(pad.slot_ids[dirty])))
                pad.clear_dirty(dirty)
                written += len(dirty)
        return written

    def map_in(self) -> int:
        """In a forked host process, before its first stage: every page of the row stores mapped in
        at once (shared_memory.map_in), not faulted in one by one inside Insert's clock, whose
        scatter writes them page by page: a fork copies no page-table entries of a shared
        mapping, so each page's first write after it faults (tests/test_shared_memory.py). Not
        the host tables: Collect only reads them, and a read fault maps the pages around it too,
        so mapping them in as well saves no faults and costs time at every start.
        -> pages mapped in."""
        return map_in([array for pad in self.pads for array in pad.host_arrays()])

    def _copy_home(self, t: int, pad: ScratchpadRows, slots, ids: torch.Tensor) -> None:
        """Rows (and state) of `slots` (NumPy, or the pad's device array) into host table t at `ids`."""
        where = self.dev.to_device(as_tensor(slots))
        self.tables.weights[t].index_copy_(0, ids, self.dev.to_host(pad.rows.index_select(0, where)))
        if pad.state is not None:
            self.tables.state[t].index_copy_(0, ids, self.dev.to_host(pad.state.index_select(0, where)))
