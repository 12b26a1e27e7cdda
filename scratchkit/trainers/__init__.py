"""All trainers share one interface; `make_trainer(name, config)` builds one by name."""
from __future__ import annotations

import importlib
from enum import Enum

from scratchkit.choices import parse_choice
from scratchkit.trainers.base import StepRecord, Trainer


class TrainerKind(str, Enum):
    GPU_ONLY = "gpu-only"       # every table on the device: the upper bound
    HYBRID = "hybrid"           # tables on the host: the baseline
    STATIC = "static"           # hot rows pinned on the device, profiled from a prefix
    LRU = "lru"                 # demand-filled cache, least recently used victim
    LFU = "lfu"                 # demand-filled cache, least frequently used victim
    PREFETCH_LRU = "prefetch-lru"  # LRU cache filled one batch ahead (TorchRec's prefetch pipeline)
    SCRATCHPIPE = "scratchpipe" # look-forward scratchpad, pipelined
    SCRATCHPIPE_DEVICE = "scratchpipe-device"  # the same, planned and filled by the device

    @classmethod
    def parse(cls, name: str) -> "TrainerKind":
        return parse_choice(cls, name, "trainer ")


# ScratchPipe planned on the host or on the device: the same plans, and Train always hits
SCRATCHPIPE_TRAINERS = (TrainerKind.SCRATCHPIPE.value, TrainerKind.SCRATCHPIPE_DEVICE.value)

# module, class: imported on demand so a trainer still being built never breaks the others
_IMPLEMENTATIONS = {
    TrainerKind.GPU_ONLY: ("scratchkit.trainers.device_only", "DeviceOnlyTrainer"),
    TrainerKind.HYBRID: ("scratchkit.trainers.hybrid", "HybridTrainer"),
    TrainerKind.STATIC: ("scratchkit.trainers.static", "StaticCacheTrainer"),
    TrainerKind.LRU: ("scratchkit.trainers.cached", "LRUCacheTrainer"),
    TrainerKind.LFU: ("scratchkit.trainers.cached", "LFUCacheTrainer"),
    TrainerKind.PREFETCH_LRU: ("scratchkit.trainers.prefetch", "PrefetchLRUTrainer"),
    TrainerKind.SCRATCHPIPE: ("scratchkit.trainers.scratchpipe", "ScratchPipeTrainer"),
    TrainerKind.SCRATCHPIPE_DEVICE: ("scratchkit.trainers.scratchpipe", "DeviceScratchPipeTrainer"),
}


def available_trainers() -> list[str]:
    names = []
    for kind, (module, _) in _IMPLEMENTATIONS.items():
        if importlib.util.find_spec(module) is not None:
            names.append(kind.value)
    return names


def trainer_class(name: str) -> type[Trainer]:
    """The class of a trainer by name (a sharded rank subclasses it: scratchkit/distributed/shard.py)."""
    kind = TrainerKind.parse(name)
    module, cls = _IMPLEMENTATIONS[kind]
    if importlib.util.find_spec(module) is None:
        raise ValueError(f"trainer {name!r} is not built yet; available: {', '.join(available_trainers())}")
    return getattr(importlib.import_module(module), cls)


def make_trainer(name: str, config, source=None, device=None, **options) -> Trainer:
    """A trainer by name; device: a torch device name or a scratchkit.device.Device (None: auto);
    `options`: the trainer's own (`planner=` for scratchpipe: trainers/scratchpipe.py)."""
    return trainer_class(name)(config, source=source, device=device, **options)


__all__ = ["SCRATCHPIPE_TRAINERS", "StepRecord", "Trainer", "TrainerKind", "make_trainer", "trainer_class", "available_trainers"]
