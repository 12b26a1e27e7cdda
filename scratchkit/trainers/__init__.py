"""All trainers share one interface; `make_trainer(name, config)` builds one by name (the names:
trainers/registry.py)."""

from __future__ import annotations

from scratchkit.trainers.base import StepRecord, Trainer
from scratchkit.trainers.registry import (
    BASELINE,
    PEERS,
    PRODUCTION_PEER,
    TRAINERS,
    TrainerKind,
    TrainerSpec,
    pipelined,
    priced_as,
    trainer_config,
    trainer_names,
    versus,
)


def available_trainers() -> list[str]:
    """Every registered trainer, in order."""
    return trainer_names()


def trainer_class(name: str) -> type[Trainer]:
    """The class of a trainer by name (a sharded rank subclasses it: scratchkit/distributed/shard.py)."""
    cls = TRAINERS[name].load()
    if getattr(cls, "name", name) != name:
        raise ValueError(
            f"trainer {name!r} is registered as {TRAINERS[name].implementation}, whose "
            f"name is {cls.name!r}: a trainer's class names itself as its entry does"
        )
    return cls


def make_trainer(name: str, config, source=None, device=None, **options) -> Trainer:
    """A trainer by name; device: a torch device name or a scratchkit.device.Device (None: auto);
    `options`: the trainer's own (`planner=` for scratchpipe: trainers/scratchpipe.py)."""
    return trainer_class(name)(config, source=source, device=device, **options)


__all__ = [
    "BASELINE",
    "PEERS",
    "PRODUCTION_PEER",
    "TRAINERS",
    "StepRecord",
    "Trainer",
    "TrainerKind",
    "TrainerSpec",
    "available_trainers",
    "make_trainer",
    "pipelined",
    "priced_as",
    "trainer_class",
    "trainer_config",
    "trainer_names",
    "versus",
]
