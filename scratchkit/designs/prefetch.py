"""The prefetching caches: an LRU cache filled one batch ahead, TorchRec's prefetch pipeline.

- prefetch-lru (trainers/prefetch.py): the demand cache's fetch for the next batch, bookkept in
  NumPy on one host core, its stages named `prefetch` / `prefetch_write_back`. On a GPU it fetches
  (the device's row kernels reading the host tables over the link) on a thread and stream of its
  own while this batch trains, and joins before the update: the step is the larger of the
  prefetch and the stages before the update, plus the update (`beside_train`). On a CPU the
  prefetch runs inline, before Train: the sum. Its rows move as a demand LRU's.
- prefetch-lru-device, the production peer: the same cache as FBGEMM's TBE cache runs under
  TorchRec's prefetch pipeline, looked up, chosen and filled by the device's kernels. The kit runs
  it as ScratchPipe planned on the device at look-ahead depth 1 with LRU victims (the batch in
  flight's rows held), so it is counted by scratchpipe_device.py's functions, on its own work:
  its Plan at LRU (no urgencies, no stamps of a horizon: the launches and the one wait a batch
  that code runs at depth 1, tests/test_prefetch_lru_device.py), its own rows moved (the planner
  at depth 1 with LRU victims, not the furthest-next-use planner's), and its pipeline's step.
  Its Train is scratchpipe-device's to the launch: both train through slots that hold every row
  the batch needs, with tbe.cu's kernels over a scratchpad of the same capacity, and a hit is a
  hit however far ahead it was planned. So where Train bounds both, the two are level
  (docs/costmodel.md, "What each peer's pricing assumes"). FBGEMM's own prefetch
  (lru_cache_populate) is fewer operations and no wait: the ids linearized and made unique, the
  uncached found (lru_cache_find_uncached) and sorted by cache set, then evicted and filled in
  one kernel (lru_cache_insert). The kit's peer pays the difference on its Plan thread, beside
  Train.
"""

from __future__ import annotations

from scratchkit.config import VictimPolicy
from scratchkit.designs.demand_cache import DemandCache, lru_moves
from scratchkit.designs.design import Design, StepTime
from scratchkit.designs.scratchpipe import STAGES, planned_moves
from scratchkit.designs.scratchpipe_device import device_pipeline_step, device_scratchpipe_stages
from scratchkit.designs.serial import TRAIN_STAGES, one_after_another
from scratchkit.designs.step import StepWork
from scratchkit.designs.work import Work

PREFETCH_STAGES = ("prefetch", "prefetch_write_back")


def beside_train(parts: dict[str, Work], w: StepWork, machine, extra_s: float) -> StepTime:
    """On a GPU, the prefetch (the device's row kernels on a stream and thread of their own) runs
    beside the step's Train and joins before its update (trainers/prefetch.py); on a CPU, inline."""
    if machine.device_is_host:
        return one_after_another(parts, w, machine, extra_s)
    stages = {name: part.seconds(machine) for name, part in parts.items()}
    ahead = sum(stages[s] for s in PREFETCH_STAGES)
    step_stages = {k: v for k, v in stages.items() if k not in PREFETCH_STAGES}
    train = sum(step_stages.values()) + extra_s
    beside = train - step_stages.get("update", 0.0)
    bound = max(PREFETCH_STAGES, key=stages.get) if ahead > beside else max(step_stages, key=step_stages.get)
    return StepTime(stages, max(beside, ahead) + train - beside, bound, True, {"train": train, "prefetch": ahead})


PREFETCH_LRU = Design(
    "prefetch-lru",
    "scratchkit.trainers.prefetch:PrefetchLRUTrainer",
    "LRU cache filled one batch ahead (TorchRec's prefetch pipeline)",
    stages=(*PREFETCH_STAGES, "transfer", *TRAIN_STAGES),
    count=DemandCache(fetch_stages=PREFETCH_STAGES),
    combine=beside_train,
    moves=lru_moves,
    window_depth=1,  # it fetches b+1 while b holds its rows
)
PREFETCH_LRU_DEVICE = Design(
    "prefetch-lru-device",
    "scratchkit.trainers.scratchpipe:PrefetchLRUDeviceTrainer",
    "LRU cache filled one batch ahead, looked up, chosen and filled by the device (FBGEMM/TorchRec)",
    stages=STAGES,
    count=device_scratchpipe_stages,  # the code it runs, on its own work (the module note)
    combine=device_pipeline_step,
    moves=planned_moves,  # at the depth and victims it fixes: LRU's, one batch ahead
    fixed_cache=(("depth", 1), ("victim_policy", VictimPolicy.LRU)),
    plans_ahead=True,
)
