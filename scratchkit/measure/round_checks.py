"""The cost model checked against what one run can resolve: its own spread between alternating rounds.

On a shared VM the same stage moves by a third from one minute to the next, so an absolute bound
(`validate.py`'s 25% a stage, 15% a step) passes or fails with the minute. Within one run whose
trainers alternate in rounds (`run_bench(rounds=K)`: every trainer takes a K-th of its timed steps
in turn), three checks are resolvable:

- **ratios**: each trainer's samples/s over the reference's (gpu-only's where it ran), per round
  and then the median over rounds, beside the model's predicted ratio. A round's load slows both
  trainers of a ratio alike, so the ratio moves less than either. Passes within 15%, or within
  twice the ratio's spread between the rounds where that is wider (the run says which applied).
- **bounds**: the stage (or, for a pipeline, the resource) the model says sets the step, beside
  the one the run's measured stage times say. Reported, not in the verdict: two stages within a
  few percent of each other swap places with the minute.
- **stages**: each stage's error (median over rounds) beside that stage's spread between the
  rounds, passing within max(25%, twice that spread), for the stages over 10% of the step.

spread(values) = the farthest any round's value is from the rounds' median, relative to it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum

import numpy as np

from scratchkit.scratchpipe.schedule import HOST_PROCESS_STAGES

RATIO_BOUND, STAGE_BOUND, SHARE = 0.15, 0.25, 0.10
SPREAD_FACTOR = 2.0  # a row passes within this many times its own spread between rounds
REFERENCE = "gpu-only"  # the ratios' denominator where it ran (else the profile's first trainer)
UNMODELLED = ("data",)


class BoundFrom(str, Enum):
    """Which limit a row was held to: the fixed one, or twice its spread between rounds (wider)."""

    FIXED = "fixed"
    SPREAD = "spread"


@dataclass(frozen=True)
class RoundTimes:
    """One trainer's timed steps within one round of an alternating run."""

    step_s: float  # seconds per step, the round's mean
    samples_per_s: float
    stage_seconds: dict[str, float]  # per step, the round's mean


@dataclass(frozen=True)
class Predicted:
    """What the model said of one trainer's step (a `Projection`'s figures that the checks use)."""

    samples_per_s: float
    stage_seconds: dict[str, float]
    bound_stage: str
    resource_seconds: dict[str, float] = field(default_factory=dict)  # pipelines: busy s per resource


def spread(values: list[float]) -> float:
    """The farthest of `values` from their median, relative to it (0.0 for one value)."""
    median = float(np.median(values)) if values else 0.0
    return max(abs(v / median - 1.0) for v in values) if median > 0 else 0.0


def limit(fixed: float, spread_: float) -> tuple[float, BoundFrom]:
    """The bound a row is held to: `fixed`, or SPREAD_FACTOR x its spread where that is wider."""
    wide = SPREAD_FACTOR * spread_
    return (wide, BoundFrom.SPREAD) if wide > fixed else (fixed, BoundFrom.FIXED)


@dataclass(frozen=True)
class RatioRow:
    """One trainer's samples/s over the reference's: measured (median of the rounds') and predicted."""

    profile: str
    trainer: str
    reference: str
    measured_ratio: float
    predicted_ratio: float
    error: float  # predicted / measured - 1
    spread: float  # of the per-round measured ratios
    bound: float  # the limit |error| is held to
    bound_from: BoundFrom
    within: bool

    def to_dict(self) -> dict:
        return asdict(self) | {"bound_from": self.bound_from.value}


@dataclass(frozen=True)
class BoundRow:
    """The stage (and resource, for a pipeline) that sets a trainer's step: the model's and the run's."""

    profile: str
    trainer: str
    predicted_stage: str
    predicted_resource: str | None  # None: the stages run one after another
    measured_stage: str
    measured_resource: str | None

    @property
    def agree(self) -> bool:
        return (self.predicted_stage, self.predicted_resource) == (self.measured_stage, self.measured_resource)

    def to_dict(self) -> dict:
        return asdict(self) | {"agree": self.agree}


@dataclass(frozen=True)
class StageTimes:
    """One stage (or `step`) of one trainer on one profile: measured and predicted seconds per
    step. What a validation's rows share (validate.ValidationRow, StageRow)."""

    profile: str
    trainer: str
    stage: str
    measured_s: float
    predicted_s: float | None  # None: not modelled (data)
    share: float  # of the measured step
    error: float | None  # predicted / measured - 1


@dataclass(frozen=True)
class StageRow(StageTimes):
    """One stage of one trainer: medians over the rounds, measured and predicted, and its spread."""

    spread: float  # of the stage's per-round measured seconds
    bound: float | None  # None: no bound applies (under 10% of the step, or not modelled)
    bound_from: BoundFrom | None
    within: bool | None

    def to_dict(self) -> dict:
        return asdict(self) | {"bound_from": None if self.bound_from is None else self.bound_from.value}


@dataclass
class RoundCheck:
    """The three checks of one or more profiles' runs."""

    ratio_rows: list[RatioRow] = field(default_factory=list)
    bound_rows: list[BoundRow] = field(default_factory=list)
    stage_rows: list[StageRow] = field(default_factory=list)

    def __add__(self, other: "RoundCheck") -> "RoundCheck":
        return RoundCheck(
            self.ratio_rows + other.ratio_rows, self.bound_rows + other.bound_rows, self.stage_rows + other.stage_rows
        )

    def failures(self) -> list:
        return [r for r in [*self.ratio_rows, *self.stage_rows] if r.within is False]

    @property
    def passed(self) -> bool:
        return not self.failures()

    def verdict(self) -> str:
        """One line: PASS or FAIL on ratios and stages, how many rows each bound held, and the bounds."""
        checked = [r for r in [*self.ratio_rows, *self.stage_rows] if r.within is not None]
        by_spread = sum(r.bound_from is BoundFrom.SPREAD for r in checked)
        failed = self.failures()
        head = "PASS" if not failed else f"FAIL ({len(failed)} of {len(checked)} rows outside)"
        agree = sum(r.agree for r in self.bound_rows)
        return (
            f"{head} against the run's own spread: ratios within {100 * RATIO_BOUND:.0f}%, stages over "
            f"{100 * SHARE:.0f}% of the step within {100 * STAGE_BOUND:.0f}%, or {SPREAD_FACTOR:g}x the "
            f"row's spread between rounds where wider ({by_spread} of {len(checked)} rows); the model "
            f"named the measured bound of {agree} of {len(self.bound_rows)} trainers"
        )

    def to_json(self) -> dict:
        return {
            "ratio_rows": [r.to_dict() for r in self.ratio_rows],
            "bound_rows": [r.to_dict() for r in self.bound_rows],
            "stage_rows": [r.to_dict() for r in self.stage_rows],
            "spread_verdict": self.verdict(),
            "spread_passed": self.passed,
        }


def measured_bound(stages: dict[str, float], predicted: Predicted) -> tuple[str, str | None]:
    """The stage (and resource) the measured stage times say sets the step, on the model's terms:
    a CPU run of ScratchPipe (resources "host process" and "train") is bound by the busier of its
    host process's stages (with the batches it reads, `data`) and Train, and by the largest stage
    in it; any other trainer by its largest modelled stage (a GPU pipeline's resources are not
    measured stage by stage: its largest stage)."""
    modelled = {s: v for s, v in stages.items() if s not in UNMODELLED}
    if not modelled:
        return "", None
    if "host process" in predicted.resource_seconds and "train" in modelled:
        host = {s: modelled[s] for s in HOST_PROCESS_STAGES if s in modelled}
        busy = sum(host.values()) + sum(stages.get(s, 0.0) for s in UNMODELLED)
        if host and busy > modelled["train"]:
            return max(host, key=host.get), "host process"
        return "train", "train"
    return max(modelled, key=modelled.get), None


def predicted_resource(predicted: Predicted) -> str | None:
    """The busiest resource of a pipeline the model priced by resources (None: a serial step)."""
    busy = {k: v for k, v in predicted.resource_seconds.items() if k != "serial"}
    return max(busy, key=busy.get) if busy else None


def check(profile: str, rounds: dict[str, list[RoundTimes]], predicted: dict[str, Predicted]) -> RoundCheck:
    """The checks of one profile's run. `rounds`: trainer -> its times in each round (every
    trainer the same rounds, in order); `predicted`: trainer -> the model's figures."""
    trainers = list(rounds)
    if not trainers:
        return RoundCheck()
    reference = REFERENCE if REFERENCE in rounds else trainers[0]
    out = RoundCheck()
    for trainer in trainers:
        times, model = rounds[trainer], predicted[trainer]
        if trainer != reference:
            per_round = [t.samples_per_s / r.samples_per_s for t, r in zip(times, rounds[reference])]
            measured = float(np.median(per_round))
            ratio = model.samples_per_s / predicted[reference].samples_per_s
            error, wobble = ratio / measured - 1.0, spread(per_round)
            bound, source = limit(RATIO_BOUND, wobble)
            out.ratio_rows.append(
                RatioRow(
                    profile, trainer, reference, measured, ratio, error, wobble, bound, source, abs(error) <= bound
                )
            )
        step = float(np.median([t.step_s for t in times]))
        names = [s for t in times for s in t.stage_seconds] + list(model.stage_seconds)
        medians = {}
        for stage in dict.fromkeys(names):  # in order, once each
            values = [t.stage_seconds.get(stage, 0.0) for t in times]
            medians[stage] = float(np.median(values))
            out.stage_rows.append(
                stage_row(
                    profile,
                    trainer,
                    stage,
                    values,
                    step,
                    None if stage in UNMODELLED else model.stage_seconds.get(stage),
                )
            )
        stage, resource = measured_bound(medians, model)
        out.bound_rows.append(BoundRow(profile, trainer, model.bound_stage, predicted_resource(model), stage, resource))
    return out


def stage_row(
    profile: str, trainer: str, stage: str, values: list[float], step_s: float, predicted: float | None
) -> StageRow:
    """One stage's row from its per-round seconds per step: bounded when modelled and over 10% of
    the step."""
    measured = float(np.median(values))
    share = measured / step_s if step_s > 0 else 0.0
    error = None if predicted is None or measured <= 0 else predicted / measured - 1.0
    wobble = spread(values)
    if error is None or share <= SHARE:
        return StageRow(profile, trainer, stage, measured, predicted, share, error, wobble, None, None, None)
    bound, source = limit(STAGE_BOUND, wobble)
    return StageRow(
        profile, trainer, stage, measured, predicted, share, error, wobble, bound, source, abs(error) <= bound
    )


def by_round(names: list[str], parts: int, wrap=None):
    """A `run_bench` progress hook that also keeps each trainer's step records by round, and
    where it keeps them: -> (hook, [per position in `names`: [per round: [StepRecord]]]).
    run_bench starts each trainer once, in turn (a name given twice: in the order given), and
    asks the hook for its `parts` rounds in order (`parts`: min(rounds, steps), one round when
    the trainers run one after another), so a name's j-th call is its (j // parts)-th
    occurrence's round j % parts."""
    taken = [[[] for _ in range(parts)] for _ in names]
    positions = {name: [i for i, n in enumerate(names) if n == name] for name in names}
    calls: dict[str, int] = {}

    def hook(records, total, name):  # called as run_bench starts the trainer, not as it drains
        j = calls[name] = calls.get(name, -1) + 1
        return keep(wrap(records, total, name) if wrap else records, taken[positions[name][j // parts]][j % parts])

    def keep(records, kept):
        for record in records:
            kept.append(record)
            yield record

    return hook, taken


def round_times(records) -> RoundTimes:
    """One trainer's steps in one round: seconds per step, samples/s and each stage's mean."""
    seconds = sum(r.seconds for r in records)
    stages: dict[str, float] = {}
    for r in records:
        for k, v in r.stage_seconds.items():
            stages[k] = stages.get(k, 0.0) + v / len(records)
    return RoundTimes(seconds / len(records), sum(r.samples for r in records) / seconds, stages)
