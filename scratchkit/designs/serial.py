"""The serial designs: every table on the device (`gpu-only`, the upper bound) and every table on the
host (`hybrid`, the baseline). Nothing moves between a cache and the tables; each stage runs after
the one before it, so a step is the **sum** of its stages.

- gpu-only: the tables on the device; the ids cross (transfer), then train_stages (train.py), on a
  CPU with SGD the backward fused into the update.
- hybrid: the embedding stages on the host (`Work.on_host`), pooled vectors up and their gradients
  down (transfer); the host stages run on the host's threads, capped by its memory
  (host_threads.py), and `bound_stage` is "host memory" where the cap holds the largest stage.

`one_after_another` is also how every design that runs its stages in one thread combines them
(the demand caches; prefetch and ScratchPipe planned on the device, where the device is a CPU).
"""

from __future__ import annotations

from scratchkit.designs.design import Design, Place, StepTime
from scratchkit.designs.host_threads import HOST_MEMORY, hybrid_stage_seconds
from scratchkit.designs.step import StepWork
from scratchkit.designs.train import id_transfer, train_stages
from scratchkit.designs.work import Work

TRAIN_STAGES = ("embedding_forward", "mlp", "embedding_backward", "update")


def summed(stages: dict[str, float], extra_s: float) -> StepTime:
    """Stages one after another: the step is their sum, plus the measured seconds not priced."""
    step = sum(stages.values()) + extra_s
    return StepTime(stages, step, max(stages, key=stages.get), False, {"serial": step})


def one_after_another(parts: dict[str, Work], w: StepWork, machine, extra_s: float) -> StepTime:
    """Each stage priced alone on `machine`, then summed (`summed`)."""
    return summed({name: part.seconds(machine) for name, part in parts.items()}, extra_s)


def gpu_only_stages(w: StepWork, place: Place) -> dict[str, Work]:
    """The ids to the device, then every stage on the tables there (on a CPU with SGD, the
    backward and the update fused: trainers/device_only.py)."""
    batched = place.device_batched
    return {
        "transfer": id_transfer(w, arrays=1, kernels=place.kernels),
        **train_stages(w, footprint="table", by_slot=False, batched=batched, kernels=place.kernels, fused=batched),
    }


def hybrid_stages(w: StepWork, place: Place) -> dict[str, Work]:
    """The embedding stages on the host (in the C++ loops where it has them), the MLP on the device."""
    device = train_stages(w, footprint="table", by_slot=False, batched=place.host_batched)
    pooled = w.batch_size * w.num_tables * w.row_bytes
    return {
        "embedding_forward": device["embedding_forward"].on_host(),
        "transfer": Work(pcie=2 * pooled, pcie_copies=2),  # pooled up, their gradients down
        "mlp": device["mlp"],
        "embedding_backward": device["embedding_backward"].on_host(),
        "update": device["update"].on_host(),
    }


def hybrid_step(parts: dict[str, Work], w: StepWork, machine, extra_s: float) -> StepTime:
    """Its stages one after another, the host embedding stages spread over the host's threads and
    capped by its memory (host_threads.py). The bound is HOST_MEMORY where the largest stage is
    held by the memory system, not the cores."""
    stages, spreads = hybrid_stage_seconds(parts, w, machine)
    step = sum(stages.values()) + extra_s
    bound = max(stages, key=stages.get)
    if bound in spreads and spreads[bound].memory_bound:
        bound = HOST_MEMORY
    resources = {
        "serial": step,
        "host cores": sum(x.cores_seconds for x in spreads.values()),
        HOST_MEMORY: sum(x.memory_seconds for x in spreads.values()),
    }
    return StepTime(stages, step, bound, False, resources)


GPU_ONLY = Design(
    "gpu-only",
    "scratchkit.trainers.device_only:DeviceOnlyTrainer",
    "every table on the device: the upper bound",
    stages=("transfer", *TRAIN_STAGES),
    count=gpu_only_stages,
    combine=one_after_another,
)
HYBRID = Design(
    "hybrid",
    "scratchkit.trainers.hybrid:HybridTrainer",
    "tables on the host: the baseline",
    stages=("embedding_forward", "transfer", "mlp", "embedding_backward", "update"),
    count=hybrid_stages,
    combine=hybrid_step,
)
