"""`lru-device`: a device cache filled on demand inside each step, bookkept on the device.

The backward-looking baseline of the ScratchPipe paper at its best, as FBGEMM's TBE cache runs
without TorchRec's prefetch pipeline. A step of batch b, every part in the trainer's thread:

    Plan(b)        look the batch's ids up in the cache's map, find the uncached ones, choose as
                   many LRU victims among the rows b does not use; one read of the counts
    Collect(b)     the misses' rows read from the host tables over the link
    Write-back(b)  the dirty victims' rows written into the host tables
    Insert(b)      the misses' rows into their slots
    Train(b)       forward, backward and update through the slots (tbe.cu's kernels on a GPU)

A miss stalls the step: its row is read in before Train, not beside it.

Why it is the device planner at look-ahead depth 0, and not a cache of its own: what a demand
cache does each step is what ScratchPipe's Plan does for one batch when no other batch is in
flight. At depth 0 the planner holds no batch's slots but the one being planned (a victim is
never a row this batch uses), looks at no later batch (LRU victims: least recently trained, then
lowest slot), and its one read of the batch's counts is the one wait the fill needs, since the
host must know how many rows move. So the kit's device pieces serve it unchanged (the hash map,
plan.cu's kernels, the row moves of device_moves.py, tbe.cu's Train) and it is exact the way
scratchpipe-device is (docs/design.md). What it does not have is the pipeline: its stages run
in order inside the step (drivers.PlanIn.STEP, inline.py) on the trainer's own stream
(device_moves.OnDemandStages), so nothing overlaps Train and no stage waits for the device but
Plan's read; every launch and both waits are counted on Train's path (device_work.py).

`lru` (trainers/cached.py) is the same cache bookkept in NumPy on one host core;
`prefetch-lru-device` (trainers/scratchpipe.py) is it filled one batch ahead.
"""

from __future__ import annotations

from scratchkit.designs.lru_device import LRU_DEVICE, ON_DEMAND
from scratchkit.scratchpipe.device_moves import OnDemandStages
from scratchkit.scratchpipe.drivers import PlanIn
from scratchkit.trainers.scratchpipe import DeviceScratchPipeTrainer


class LRUDeviceTrainer(DeviceScratchPipeTrainer):
    """`lru-device` (module note): scratchpipe-device at look-ahead depth 0 with LRU victims,
    whatever the config's depth and victim policy, every stage on the step's path."""

    name = LRU_DEVICE.name
    row_stages = OnDemandStages
    look_ahead = ON_DEMAND

    def __init__(self, config, source=None, device=None, **options):
        super().__init__(LRU_DEVICE.config_for(config), source, device, **options)
        self.plan_in = PlanIn.STEP  # every stage inside the step, on a GPU too

    def plan_setup(self, threads: int = 1):
        """The device planner as part of the step (`PlanSetup.on_step`): on the trainer's stream,
        counted on Train's path."""
        from dataclasses import replace

        return replace(super().plan_setup(threads), on_step=True)

    def plan_ahead(self, where, start: int, stop: int):
        """The call's planner, its first arrays queued on the trainer's stream too."""
        with self.dev.kernel_stream():
            return super().plan_ahead(where, start, stop)

    def reserved_cores(self) -> int:
        """No stage runs beside Train: the host's cores are all the step's."""
        return 0
