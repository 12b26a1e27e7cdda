"""A step is all or nothing: refuse a batch, or fail part way through a step, then repair and go on.

Every trainer takes the same three kinds of case (`StepFaultCase`), on `STEPS` batches of a small
profile with the fault at batch `BAD_BATCH`:

    spoiled batch    the source hands out batch BAD_BATCH spoiled (`SPOILERS`: ids of another
                     dtype, no samples, ...). The door refuses it with one line, the same from
                     every trainer; the source is repaired and training goes on.
    planted failure  a `PlantedFault` raised as the trainer enters one part of step BAD_BATCH
                     (`fault_points`: each stage it times, its dense step, its embedding
                     backward). Nothing of the step may have changed; the plant is removed and
                     training goes on.
    torn update      a failure after the dense optimizer's step, before the tables' update: the
                     one place a step is half done. The trainer must say so and refuse to train
                     on (`StepTornError`), never train the batch a second time.

After going on to STEPS batches, the tables, their optimizer state and the dense model must equal
plain PyTorch (scratchkit.measure.reference) trained on STEPS batches, bit for bit (`Snapshots`).
`benchmarks/bench_faults.py --kinds steps` runs every case; tests/test_all_or_nothing.py runs them.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from scratchkit.config import CacheParams, DataConfig, OptimizerConfig, OptimizerKind, TrainConfig
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.measure.faults import Snapshots
from scratchkit.measure.reference import ReferenceRun
from scratchkit.profiles import get_profile
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.scratchpipe.events import Stage
from scratchkit.designs import DESIGNS
from scratchkit.trainers import make_trainer
from scratchkit.trainers.base import StepTornError

STEPS, BAD_BATCH, BAD_TABLE = 6, 3, 1
TORN = "torn update"  # the fault point inside the update (after the dense optimizer's step)
INSIDE_UPDATE = {TORN, "stage update"}  # where a failure leaves part of the step applied


class PlantedFault(RuntimeError):
    """The failure a case plants inside a step."""


# --- spoiled batches: what a user's own source might hand out ----------------------------------------
def _ids_as(dtype):
    def spoil(batch):
        ids = list(batch.ids)
        ids[BAD_TABLE] = ids[BAD_TABLE].astype(dtype)
        return replace(batch, ids=tuple(ids))

    return spoil


def _no_samples(batch):
    return replace(
        batch,
        dense=batch.dense[:0],
        labels=batch.labels[:0],
        ids=tuple(i[:0] for i in batch.ids),
        offsets=tuple(o[:0] for o in batch.offsets),
    )


def _dense_as_float64(batch):
    return replace(batch, dense=batch.dense.astype(np.float64))


def _offsets_decreasing(batch):
    offsets = list(batch.offsets)
    offsets[BAD_TABLE] = offsets[BAD_TABLE][::-1].copy()
    return replace(batch, offsets=tuple(offsets))


# name -> (spoil(batch) -> batch, the door's message for batch BAD_BATCH of `tiny`)
SPOILERS: dict[str, tuple[Callable, str]] = {
    "uint64 ids": (
        _ids_as(np.uint64),
        "batch 3, table 1: ids are uint64, not int64 (ids.astype(np.int64) converts ids in range exactly)",
    ),
    "uint32 ids": (
        _ids_as(np.uint32),
        "batch 3, table 1: ids are uint32, not int64 (ids.astype(np.int64) converts ids in range exactly)",
    ),
    "int32 ids": (
        _ids_as(np.int32),
        "batch 3, table 1: ids are int32, not int64 (ids.astype(np.int64) converts ids in range exactly)",
    ),
    "no samples": (_no_samples, "batch 3: the batch has no samples; a batch needs at least one"),
    "float64 dense": (_dense_as_float64, "batch 3: dense values are float64, not float32 (dense.astype(np.float32))"),
    "offsets decreasing": (
        _offsets_decreasing,
        "batch 3, table 1: offsets must start at 0, never decrease and stay within the 64 ids; offset 62 at sample 0",
    ),
}


class RepairableSource(SyntheticSource):
    """A synthetic source whose batch BAD_BATCH comes out spoiled until `repair()`."""

    def __init__(self, data, spoil: Callable):
        super().__init__(data)
        self.spoil = spoil

    def repair(self) -> None:
        self.spoil = None

    def batch(self, index):
        batch = super().batch(index)
        return self.spoil(batch) if index == BAD_BATCH and self.spoil is not None else batch


# --- planted failures ------------------------------------------------------------------------------
def fault_points(trainer_name: str) -> list[str]:
    """Where a failure can be planted in step BAD_BATCH of `trainer_name`: each stage that step
    times (found by training it), then its dense step and its embedding backward, then the torn
    update. (prefetch-lru's step BAD_BATCH fetches nothing: its batch was prefetched the step
    before, in `prefetch`.)"""
    trainer = make_trainer(trainer_name, case_config("sgd"))
    stages = sorted(list(trainer.train(BAD_BATCH + 1))[BAD_BATCH].stage_seconds)
    trainer.close()
    if hasattr(trainer, "stage_hook"):  # a failure is planted through ScratchPipe's stages' hook
        stages = [s for s in stages if s in {stage.value for stage in Stage}]
    return [f"stage {s}" for s in stages] + ["dense_step", "embedding_backward", TORN]


@contextmanager
def planted(trainer, point: str, batch: int):
    """While inside: `trainer` raises PlantedFault as it reaches `point` (a `fault_points` name)
    on step `batch`. The plant is gone afterwards, so the next step goes through."""

    def strike(where):
        raise PlantedFault(f"planted failure: {where} of step {batch}")

    if point.startswith("stage ") and hasattr(trainer, "stage_hook"):
        stage = Stage(point.removeprefix("stage "))  # ScratchPipe's stages report to its hook
        trainer.stage_hook = lambda s, b: strike(point) if (s is stage and b == batch) else None
        try:
            yield
        finally:
            trainer.stage_hook = None
        return
    if point.startswith("stage "):
        name, timed = point.removeprefix("stage "), trainer.timer.stage

        @contextmanager
        def stage(s):
            if s == name and trainer.next_batch == batch:
                strike(point)
            with timed(s):
                yield

        trainer.timer.stage = stage
        restore = lambda: delattr(trainer.timer, "stage")
    elif point == TORN:
        owner, original = trainer.dense_optimizer, trainer.dense_optimizer.step

        def step(*args, **kwargs):
            original(*args, **kwargs)
            if trainer.next_batch == batch:
                strike(point)

        owner.step = step
        restore = lambda: delattr(owner, "step")
    else:
        original = getattr(trainer, point)

        def method(*args, **kwargs):
            if trainer.next_batch == batch:
                strike(point)
            return original(*args, **kwargs)

        setattr(trainer, point, method)
        restore = lambda: delattr(trainer, point)
    try:
        yield
    finally:
        restore()


# --- one case --------------------------------------------------------------------------------------
def case_config(optimizer: str, profile: str = "tiny") -> TrainConfig:
    return get_profile(profile).replace(optimizer=OptimizerConfig(kind=OptimizerKind.parse(optimizer), lr=0.1))


@dataclass(frozen=True)
class StepFaultCase:
    trainer: str
    fault: str  # a SPOILERS name, or a fault_points name
    optimizer: str = "adagrad"


@dataclass
class StepFaultResult:
    case: StepFaultCase
    error: str  # what the faulted step raised ("" if it raised nothing)
    one_line: bool
    refused_after: str  # a torn update: what the next train() said ("" if it trained)
    exact: bool  # equal to the reference after going on (or, torn, at the refusal)
    lost_rows: int


def run_case(case: StepFaultCase, snapshots: Snapshots | None = None) -> StepFaultResult:
    config = case_config(case.optimizer)
    snapshots = snapshots or Snapshots(config, STEPS)
    spoiled = case.fault in SPOILERS
    source = RepairableSource(config.data, SPOILERS[case.fault][0] if spoiled else None)
    error, refused, trainer = "", "", None
    try:
        trainer = make_trainer(case.trainer, config, source=source)  # static profiles batch 3 here
        with _planted_unless(spoiled, trainer, case.fault):
            list(trainer.train(STEPS))
    except (ValueError, RuntimeError) as raised:
        error = str(raised)
    source.repair()
    if trainer is None:  # refused while it was made: made again from the repaired source
        trainer = make_trainer(case.trainer, config, source=source)
    try:
        list(trainer.train(STEPS - trainer.next_batch))
    except StepTornError as raised:
        refused = str(raised)
    lost, exact = snapshots.lost_rows(trainer, trainer.next_batch if refused else STEPS)
    trainer.close()
    return StepFaultResult(case, error, error.count("\n") == 0, refused, exact, lost)


@contextmanager
def _planted_unless(spoiled: bool, trainer, point: str):
    if spoiled:
        yield
    else:
        with planted(trainer, point, BAD_BATCH):
            yield


def all_cases(optimizer: str = "adagrad") -> list[StepFaultCase]:
    """Every trainer x (every spoiler, every fault point)."""
    cases = []
    for name in DESIGNS:
        faults = [*SPOILERS, *fault_points(name)]
        cases += [StepFaultCase(name, fault, optimizer) for fault in faults]
    return cases


# --- prefetch-lru at the capacity its error names ----------------------------------------------------
@dataclass
class CapacityResult:
    seed: int
    steps: int
    capacity: int
    error: str  # what train(steps) raised at that capacity ("" if it trained them all)
    exact: bool  # equal to plain PyTorch after those steps


def prefetch_capacity_case(seed: int) -> CapacityResult:
    """A random small configuration, prefetch-lru at the capacity its error message names for a
    call of `steps` steps (the largest working set of two consecutive batches of the call):
    train(steps) must train them all, exactly."""
    rng = np.random.default_rng(seed)
    tables = tuple(int(n) for n in rng.integers(20, 400, size=int(rng.integers(1, 4))))
    data = DataConfig(
        table_sizes=tables,
        pooling=int(rng.integers(1, 5)),
        batch_size=int(rng.integers(4, 48)),
        num_dense=3,
        zipf=float(rng.choice([0.0, 0.8, 1.2])),
        seed=seed,
    )
    steps = int(rng.integers(2, 10))
    source = SyntheticSource(data)
    capacity = max(minimum_capacities(source, 1, 0, steps))
    config = case_config("sgd").replace(data=data, cache=CacheParams(capacity=capacity))
    trainer = make_trainer("prefetch-lru", config, source=source)
    try:
        list(trainer.train(steps))
        error = ""
    except ValueError as raised:
        error = str(raised)
    reference = ReferenceRun(config, source)
    reference.train(trainer.next_batch)
    exact = all(bool((a == b).all()) for a, b in zip(trainer.embedding_weights(), reference.embedding_weights()))
    return CapacityResult(seed, steps, capacity, error, exact)
