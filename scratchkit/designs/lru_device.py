"""The backward-looking cache the ScratchPipe paper measured against, at its best (`lru-device`,
trainers/lru_device.py): FBGEMM's TBE cache without TorchRec's prefetch pipeline. Inside each
step, before Train: look the batch's ids up in the device's cache map, find the rows not cached,
choose LRU victims among the rows this batch does not use, write the dirty ones home, fill the
misses from the host tables, then train through the slots. A miss stalls the step: that is the
design the paper's "backwards-looking" baseline is.

It is bookkept on the device with the kit's own device pieces: the device planner
(scratchpipe/device_plan.py: the hash map, plan.cu's kernels, one read of every table's counts)
at look-ahead depth 0 with LRU victims, the row moves of scratchpipe-device (device_moves.py),
and tbe.cu's Train. Depth 0 is exactly a demand cache: no batch is in flight beside the one
being filled, its victims are the least recently trained of the rows it does not use, and it
looks at no batch but its own. So it is counted as scratchpipe-device's stages are
(scratchpipe_device.py: Plan without next uses, Collect, Write-back, Insert, Train), with the
rows the planner moves at depth 0 (`on_demand_moves`), and its step is their **sum**
(`one_after_another`): the stages run one after another in the trainer's thread, on its stream
(scratchpipe/inline.py, PlanIn.STEP), where a pipeline would overlap them with Train. Its waits a
step: Plan's read of the batch's counts (the fill must know how many rows it moves) and the loss
(tests/test_lru_device.py holds both, and its launches to the cost model's count).

`lru` (demand_cache.py) is the same cache bookkept in NumPy on one host core.
"""

from __future__ import annotations

from scratchkit.config import TrainConfig, VictimPolicy
from scratchkit.designs.design import Design
from scratchkit.designs.scratchpipe import STAGES, planned_moves
from scratchkit.designs.scratchpipe_device import device_scratchpipe_stages
from scratchkit.designs.serial import one_after_another

ON_DEMAND = 0  # look-ahead depth: no batch planned ahead of the one training


def on_demand_moves(config: TrainConfig, source, batches: int) -> tuple[float, float]:
    """(misses, dirty victims) a step of the device planner at depth 0 with LRU victims: what the
    trainer moves (CacheParams cannot say depth 0: the planner is told it)."""
    return planned_moves(config, source, batches, depth=ON_DEMAND)


LRU_DEVICE = Design(
    "lru-device",
    "scratchkit.trainers.lru_device:LRUDeviceTrainer",
    "demand-filled LRU cache run by the device inside the step (FBGEMM's TBE cache)",
    stages=STAGES,
    count=device_scratchpipe_stages,
    combine=one_after_another,
    moves=on_demand_moves,
    fixed_cache=(("victim_policy", VictimPolicy.LRU),),
    window_depth=ON_DEMAND,  # its cache holds one batch's rows at once
)
