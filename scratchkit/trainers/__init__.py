"""Every trainer behind one interface: `make_trainer(name, config)` builds the trainer of the design
named `name` (scratchkit/designs: each design names its trainer's class)."""

from __future__ import annotations

from scratchkit.designs import DESIGNS
from scratchkit.trainers.base import StepRecord, Trainer


def trainer_class(name: str) -> type[Trainer]:
    """The class of a design's trainer by name (a sharded rank subclasses it: scratchkit/distributed/shard.py)."""
    design = DESIGNS[name]
    cls = design.trainer_class()
    if getattr(cls, "name", name) != name:
        raise ValueError(
            f"trainer {name!r} is registered as {design.trainer}, whose "
            f"name is {cls.name!r}: a trainer's class names itself as its design does"
        )
    return cls


def available_trainers() -> list[str]:
    """Every design's trainer, in the order the command line lists them."""
    return list(DESIGNS)


def make_trainer(name: str, config, source=None, device=None, **options) -> Trainer:
    """A trainer by name; device: a torch device name or a scratchkit.device.Device (None: auto);
    `options`: the trainer's own (`where=`, `own_planner=` for scratchpipe: trainers/scratchpipe.py)."""
    return trainer_class(name)(config, source=source, device=device, **options)


__all__ = ["StepRecord", "Trainer", "available_trainers", "make_trainer", "trainer_class"]
