"""scratchkit: embedding caches and ScratchPipe, to learn and to measure.

The few names a notebook or a script needs, importable from here:

    from scratchkit import get_profile, make_trainer, verify, run_bench
    config = get_profile("small")
    records = list(make_trainer("scratchpipe", config).train(100))

    source, config = scratchkit.data.open("criteo", "train.tsv")   # your own data
    need = max(scratchkit.minimum_capacities(source, depth=2, stop=100))

They are loaded on first use, so `import scratchkit` stays light (no torch, never CuPy) until one
is asked for. docs/design.md maps the package.
"""

from __future__ import annotations

import importlib

# name -> the module that defines it
_EXPORTS = {
    "TrainConfig": "scratchkit.config",
    "DataConfig": "scratchkit.config",
    "ModelConfig": "scratchkit.config",
    "OptimizerConfig": "scratchkit.config",
    "OptimizerKind": "scratchkit.config",
    "CacheParams": "scratchkit.config",
    "VictimPolicy": "scratchkit.config",
    "get_profile": "scratchkit.profiles",
    "criteo_like": "scratchkit.profiles",
    "SyntheticSource": "scratchkit.data.synthetic",
    "make_trainer": "scratchkit.trainers",
    "available_trainers": "scratchkit.trainers",
    "verify": "scratchkit.measure.verify",
    "run_bench": "scratchkit.measure.bench",
    "detect": "scratchkit.backend",
    "minimum_capacities": "scratchkit.scratchpipe.capacity",
    "config_for": "scratchkit.data.open_data",
}
_SUBPACKAGES = ("data",)  # `scratchkit.data.open(...)` after a plain `import scratchkit`

__all__ = list(sorted(_EXPORTS))


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"scratchkit.{name}")
    if name not in _EXPORTS:
        raise AttributeError(f"module 'scratchkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
