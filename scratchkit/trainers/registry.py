"""Which trainers there are: one entry per trainer, the one place a trainer's name is written.

An entry (`TrainerSpec`) says where the trainer's class is (imported on demand, so that reading
the names imports no trainer), how the cost model prices it (`priced_as`: one of the kit's own
trainers, whose stages costmodel/stages.py `stage_work` counts and whose step
projection/costmodel.py `project` times), and a line of help. The command line's `--trainers`,
`bench`, `verify`, the cost model and the projection read `TRAINERS`; a trainer of your own is
one `TRAINERS.register(name, TrainerSpec(...))` away (docs/design.md, "Names written once").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields, replace
from enum import Enum

from scratchkit.choices import Registry, parse_choice
from scratchkit.config import VictimPolicy


class TrainerKind(str, Enum):
    """The kit's own trainers, each also a cost model (`TrainerSpec.priced_as`): a closed set,
    since a new way to price a step is new code in costmodel/stages.py and projection/costmodel.py.
    A demand-filled cache is named after its victim rule, taken from `VictimPolicy`: "lru" is one
    rule for the caches, their trainers and the simulators (sim.POLICIES)."""

    GPU_ONLY = "gpu-only"  # every table on the device: the upper bound
    HYBRID = "hybrid"  # tables on the host: the baseline
    STATIC = "static"  # hot rows pinned on the device, profiled from a prefix
    LRU = VictimPolicy.LRU.value  # demand-filled cache, least recently used victim
    LFU = VictimPolicy.LFU.value  # demand-filled cache, least frequently used victim
    PREFETCH_LRU = "prefetch-lru"  # LRU cache filled one batch ahead (TorchRec's prefetch pipeline)
    SCRATCHPIPE = "scratchpipe"  # look-forward scratchpad, pipelined
    SCRATCHPIPE_DEVICE = "scratchpipe-device"  # the same, planned and filled by the device

    @classmethod
    def parse(cls, name: str) -> "TrainerKind":
        return parse_choice(cls, name, "trainer ")

    @property
    def pipelined(self) -> bool:
        """ScratchPipe, planned on the host or the device: plans ahead, and Train always hits."""
        return self in (TrainerKind.SCRATCHPIPE, TrainerKind.SCRATCHPIPE_DEVICE)

    @property
    def caches(self) -> bool:
        """Trains on a device cache or scratchpad of host tables (not gpu-only, not hybrid): rows
        move, and a hit rate means something."""
        return self not in (TrainerKind.GPU_ONLY, TrainerKind.HYBRID)


@dataclass(frozen=True)
class TrainerSpec:
    """One trainer: `implementation` the `Trainer` subclass whose `name` is the entry's, as
    "module:Class" (imported when first made) or the class itself (one defined in a notebook);
    `priced_as` the cost model of its steps; `help` one line for the command line; `fixed_cache`
    the `CacheParams` fields the trainer sets itself, whatever the config says, as (field, value)
    pairs (`config_for`: the trainer and the projection's counters both run with them)."""

    implementation: str | type
    priced_as: TrainerKind
    help: str
    fixed_cache: tuple[tuple[str, object], ...] = ()

    def __post_init__(self):
        from scratchkit.config import CacheParams

        if not isinstance(self.implementation, type) and (
            not isinstance(self.implementation, str) or self.implementation.count(":") != 1
        ):
            raise ValueError(f"implementation must be 'module:Class' or a class, got {self.implementation!r}")
        object.__setattr__(self, "priced_as", TrainerKind.parse(self.priced_as))
        unknown = {f for f, _ in self.fixed_cache} - {f.name for f in fields(CacheParams)}
        if unknown:
            raise ValueError(f"fixed_cache names no CacheParams field: {', '.join(sorted(unknown))}")

    def config_for(self, config):
        """`config` as this trainer runs it: its cache with the `fixed_cache` fields set."""
        if not self.fixed_cache:
            return config
        return config.replace(cache=replace(config.cache, **dict(self.fixed_cache)))

    @property
    def pipelined(self) -> bool:
        return self.priced_as.pipelined

    @property
    def caches(self) -> bool:
        return self.priced_as.caches

    def load(self) -> type:
        """The class (imported now where the entry names it by module)."""
        if isinstance(self.implementation, type):
            return self.implementation
        module, cls = self.implementation.split(":")
        return getattr(importlib.import_module(module), cls)


TRAINERS: Registry[TrainerSpec] = Registry("trainer ")
for _kind, _implementation, _help in (
    (
        TrainerKind.GPU_ONLY,
        "scratchkit.trainers.device_only:DeviceOnlyTrainer",
        "every table on the device: the upper bound",
    ),
    (TrainerKind.HYBRID, "scratchkit.trainers.hybrid:HybridTrainer", "tables on the host: the baseline"),
    (
        TrainerKind.STATIC,
        "scratchkit.trainers.static:StaticCacheTrainer",
        "hot rows pinned on the device, profiled from a prefix",
    ),
    (TrainerKind.LRU, "scratchkit.trainers.cached:LRUCacheTrainer", "demand-filled cache, least recently used victim"),
    (
        TrainerKind.LFU,
        "scratchkit.trainers.cached:LFUCacheTrainer",
        "demand-filled cache, least frequently used victim",
    ),
    (
        TrainerKind.PREFETCH_LRU,
        "scratchkit.trainers.prefetch:PrefetchLRUTrainer",
        "LRU cache filled one batch ahead (TorchRec's prefetch pipeline)",
    ),
    (
        TrainerKind.SCRATCHPIPE,
        "scratchkit.trainers.scratchpipe:ScratchPipeTrainer",
        "look-forward scratchpad, pipelined (ScratchPipe)",
    ),
    (
        TrainerKind.SCRATCHPIPE_DEVICE,
        "scratchkit.trainers.scratchpipe:DeviceScratchPipeTrainer",
        "ScratchPipe planned and filled by the device",
    ),
):
    TRAINERS.register(_kind.value, TrainerSpec(_implementation, _kind, _help))
del _kind, _implementation, _help
# The designs every other is compared with ("x hybrid", "x prefetch-lru-device"): the baseline, at
# its best on its server's cores, and the production peer, the cache people run as they run it (its
# lookup, victim choice and fill device kernels; prefetch-lru is that cache bookkept on one host core).
# The peer is ScratchPipe on the device at depth 1 with LRU victims: a cache filled one batch ahead,
# its in-flight rows held, whose lookup, victim choice and fill are device kernels.
BASELINE, PRODUCTION_PEER = TrainerKind.HYBRID.value, "prefetch-lru-device"
TRAINERS.register(
    PRODUCTION_PEER,
    TrainerSpec(
        "scratchkit.trainers.scratchpipe:PrefetchLRUDeviceTrainer",
        TrainerKind.SCRATCHPIPE_DEVICE,
        "LRU cache filled one batch ahead, looked up, chosen and filled by the device (FBGEMM/TorchRec)",
        fixed_cache=(("depth", 1), ("victim_policy", VictimPolicy.LRU)),
    ),
)
PEERS = (BASELINE, PRODUCTION_PEER)


def versus(peer: str) -> str:
    """The key of a speed over `peer`'s in the kit's records and tables: x_hybrid, x_prefetch_lru_device."""
    return "x_" + peer.replace("-", "_")


def priced_as(name: str) -> TrainerKind:
    """The cost model of trainer `name` (an unknown name: a ValueError listing the trainers)."""
    return TRAINERS[name].priced_as


def trainer_config(name: str, config):
    """`config` as trainer `name` runs it (the cache fields its entry fixes set: `TrainerSpec`)."""
    return TRAINERS[name].config_for(config)


def pipelined(name: str) -> bool:
    """Whether trainer `name` is a ScratchPipe pipeline (plans ahead; Train always hits)."""
    return TRAINERS[name].pipelined


def trainer_names() -> list[str]:
    """Every registered trainer, in order."""
    return list(TRAINERS)
