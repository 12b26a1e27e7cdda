"""What a training design is: one record, read by the trainers, the cost model and the command line.

A design is one way to train the embedding tables (every table on the device, the tables on the
host, a cache filled on demand or a batch ahead, ScratchPipe's scratchpad). Its `Design` says

    who runs it      name, trainer ("module:Class", imported when first made), help
    what it fixes    fixed_cache: the CacheParams fields it sets whatever the config says;
                     window_depth / plans_ahead: the batches its cache holds at once
    how it is priced count:   a step's work, stage by stage, in the cost model's units (work.py)
                     combine: how those stages' times make a step's (a sum, the larger of two
                              threads, the busiest resource of a pipeline)
                     moves:   the rows it moves a step, counted without training (None: none)

Each is a field, never a test of the design's name: a design of your own, with pricing of its
own, is one file (its `count`, `combine` and `moves`, and its `Design`) and one `register` call
(designs/__init__.py lists the kit's own). Nothing here imports torch or any machine: a `Work`
prices itself on whatever machine it is handed (costmodel/ holds the machines).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import Callable

from scratchkit.choices import Registry
from scratchkit.config import CacheParams, TrainConfig
from scratchkit.designs.step import StepWork
from scratchkit.designs.work import Work


@dataclass(frozen=True)
class Place:
    """Where a step runs, as far as counting its work cares (`Place.of(machine)`)."""

    device_is_host: bool = False  # the device is the host's CPU: its kernels are NumPy calls
    host_batched: bool = False  # the host has the table-batched C++ loops (table_batched.py)
    kernels: bool = False  # the device is a GPU whose Train runs tbe.cu's kernels (embedding/device_tbe.py)

    @property
    def device_batched(self) -> bool:
        """The embedding stages that run on the device run in those loops: the device is that CPU."""
        return self.host_batched and self.device_is_host

    @classmethod
    def of(cls, machine) -> "Place":
        """The place of `machine` (None: a GPU without the loops, every stage per-table torch ops)."""
        if machine is None:
            return cls()
        return cls(
            device_is_host=machine.device_is_host,
            host_batched=machine.batched_host,
            kernels=not machine.device_is_host,
        )


@dataclass(frozen=True)
class StepTime:
    """A step's time, combined from its stages' (what a design's `combine` returns)."""

    stage_seconds: dict[str, float]  # each stage, as the design's threads see it
    step_seconds: float
    bound_stage: str  # the stage that sets the step time
    pipelined: bool  # stages overlap: the step is the busiest resource, not their sum
    resource_seconds: dict[str, float]  # busy time per resource


Count = Callable[[StepWork, Place], dict[str, Work]]  # (the step, where it runs) -> {stage: Work}
# (each stage's Work, the step, the machine, measured seconds the model does not price) -> StepTime
Combine = Callable[[dict[str, Work], StepWork, object, float], StepTime]
# (the config as the design runs it, its batches, how many) -> (rows fetched, rows written back) a step
Moves = Callable[[TrainConfig, object, int], tuple[float, float]]


class Compared(str, Enum):
    """Where the course and its benchmarks set a design beside the others."""

    HEADLINE = "headline"  # projected at full size (bench_projections.py) and in the headline table
    PROJECTED = "projected"  # projected at full size, not in the headline
    MEASURED = "measured"  # only where it is measured (priced as another's steps but for one stage)


@dataclass(frozen=True)
class Design:
    """One design (see the module note). `trainer`: the `Trainer` subclass whose `name` is the
    design's, as "module:Class" or the class itself (one defined in a notebook)."""

    name: str
    trainer: str | type
    help: str
    stages: tuple[str, ...]  # as its StepRecords name them, in the order a batch meets them
    count: Count
    combine: Combine
    moves: Moves | None = None
    fixed_cache: tuple[tuple[str, object], ...] = ()
    window_depth: int | None = None  # a demand cache's window: batches whose rows it holds at once, less one
    plans_ahead: bool = False  # plans batches ahead and Train always hits: its window is the config's depth
    planners_on_a_cpu: int | None = None  # tables a CPU run plans at once (None: as many as StepWork says)
    compared: Compared = Compared.HEADLINE

    def __post_init__(self):
        if not isinstance(self.trainer, type) and (not isinstance(self.trainer, str) or self.trainer.count(":") != 1):
            raise ValueError(f"design {self.name!r}: trainer must be 'module:Class' or a class, got {self.trainer!r}")
        unknown = {f for f, _ in self.fixed_cache} - {f.name for f in fields(CacheParams)}
        if unknown:
            raise ValueError(
                f"design {self.name!r}: fixed_cache names no CacheParams field: {', '.join(sorted(unknown))}"
            )
        for hook in ("count", "combine"):
            if not callable(getattr(self, hook)):
                raise ValueError(f"design {self.name!r}: {hook} must be a function, got {getattr(self, hook)!r}")

    @property
    def caches(self) -> bool:
        """Trains on a device cache or scratchpad of host tables: rows move, a hit rate means something."""
        return self.moves is not None

    def config_for(self, config: TrainConfig) -> TrainConfig:
        """`config` as this design runs it: its cache with the `fixed_cache` fields set."""
        if not self.fixed_cache:
            return config
        return config.replace(cache=replace(config.cache, **dict(self.fixed_cache)))

    def window(self, config: TrainConfig) -> tuple[int, int] | None:
        """(look-ahead depth, plan stripes) of the batches its cache must hold at once under
        `config` (scratchkit.scratchpipe.capacity counts their rows); None: no cache to fill."""
        if self.plans_ahead:
            cache = self.config_for(config).cache  # the config's depth, or the one it fixes
            return cache.depth, cache.plan_stripes
        return None if self.window_depth is None else (self.window_depth, 1)

    def trainer_class(self) -> type:
        """The trainer's class (imported now where the design names it by module)."""
        if isinstance(self.trainer, type):
            return self.trainer
        module, cls = self.trainer.split(":")
        return getattr(importlib.import_module(module), cls)


DESIGNS: Registry[Design] = Registry("trainer ")  # the designs by name, named as their trainers are


def register(design: Design) -> Design:
    """Add `design` under its name (DESIGNS.registered(name, design) for a `with` block)."""
    return DESIGNS.register(design.name, design)


def design_of(name: "str | Design") -> Design:
    """The design named `name` (an unknown one: a ValueError listing them), or `name` itself."""
    return name if isinstance(name, Design) else DESIGNS[name]


def versus(peer: str, share: str | None = None) -> str:
    """The key of a speed over `peer`'s in the kit's records and tables: x_hybrid, x_prefetch_lru_device;
    over `peer` priced on another share of its server's host (costmodel/servers.py's HostShare
    values): x_hybrid_socket."""
    return "x_" + peer.replace("-", "_") + (f"_{share}" if share else "")
