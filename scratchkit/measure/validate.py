"""Validation: the `this-cpu` cost model beside what the trainers measure here, stage by stage.

For each trainer, the timed steps (after a warm-up in the same `train()` call) give each stage's
seconds per step (the mean over the steps) and the step's; the model predicts the same run from
its work (the working sets of the very batches measured, the rows fetched and written back that
the run counted) on `this-cpu` (the saved calibration, else one measured now). A row per trainer
and stage carries `measured_s`, `predicted_s` and `error` (predicted / measured - 1).

The bounds (the issue's): every stage that takes more than 10% of the step within 25%, and the
step within 15%. `data` (the wait for the batch the loader made ahead) is not modelled: its measured seconds enter the
predicted step where the trainer spends them (`costmodel.project(extra=...)`), so the step row
compares like with like. The verdict names the worst stage among those the bound applies to.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

from scratchkit.measure.round_checks import Predicted, RoundCheck, RoundTimes, StageTimes, by_round, check, round_times
from scratchkit.costmodel.hardware import median_hardware
from scratchkit.designs import DESIGNS, StepWork
from scratchkit.projection.machines import get_machine
from scratchkit.projection.project import project

STAGE_BOUND, STEP_BOUND, SHARE = 0.25, 0.15, 0.10
UNMODELLED = ("data",)
AGAIN = " (again)"  # the label of a trainer's second run beside the others (`again=True`)


@dataclass(frozen=True)
class ValidationRow(StageTimes):
    """One trainer's stage (or `step`) on one profile, against the absolute bounds."""

    bounded: bool  # whether a bound applies: the step, or a stage over 10% of it
    within: bool | None  # inside its bound (None where none applies)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Validation:
    """Rows of one or more validation runs, and the verdict against the bounds."""

    rows: list[ValidationRow] = field(default_factory=list)
    hardware: str = ""  # where this-cpu came from (`Hardware.origin`)
    # the first trainer of each profile run a second time beside the others (`again=True`): the
    # same code on the same batches in the same minutes, so how far its stages differ from the
    # first run's is the machine's own repeatability (no model in it). Not in the verdict's rows
    again: list[ValidationRow] = field(default_factory=list)
    # (profile, trainer, stage) -> how far the calibrations just before and just after the
    # trainers (`calibrate=`) predicted the row from their median, the farther: the calibration's
    # own repeatability over those minutes
    calibration_spread: dict[tuple[str, str, str], float] = field(default_factory=dict)
    calibrations: list = field(default_factory=list, repr=False)  # those calibrations, in order
    # (profile, trainer) -> its times in each round of the alternating run, and the model's figures
    # for it: what round_checks.py holds the model to (the run's own spread between rounds)
    times: dict[tuple[str, str], list[RoundTimes]] = field(default_factory=dict)
    predicted: dict[tuple[str, str], Predicted] = field(default_factory=dict)

    def __add__(self, other: "Validation") -> "Validation":
        return Validation(
            self.rows + other.rows,
            self.hardware or other.hardware,
            self.again + other.again,
            self.calibration_spread | other.calibration_spread,
            self.calibrations + other.calibrations,
            self.times | other.times,
            self.predicted | other.predicted,
        )

    def round_check(self) -> RoundCheck:
        """Ratios, bounds and stages against the run's own spread between rounds, per profile."""
        out = RoundCheck()
        for profile in dict.fromkeys(named for named, _ in self.times):
            rounds = {t: times for (named, t), times in self.times.items() if named == profile}
            out += check(profile, rounds, {t: self.predicted[(profile, t)] for t in rounds})
        return out

    def bounded(self) -> list[ValidationRow]:
        return [r for r in self.rows if r.bounded]

    def worst(self) -> ValidationRow | None:
        """The stage (not step) with the largest error among those over 10% of their step."""
        stages = [r for r in self.bounded() if r.stage != "step" and r.error is not None]
        return max(stages, key=lambda r: abs(r.error) / STAGE_BOUND, default=None)

    def failures(self) -> list[ValidationRow]:
        return [r for r in self.rows if r.within is False]

    @property
    def passed(self) -> bool:
        return not self.failures()

    def verdict(self) -> str:
        """One line: PASS or FAIL against the bounds, and the worst stage."""
        worst = self.worst()
        named = (
            ""
            if worst is None
            else f"; worst stage: {worst.trainer} {worst.stage} on {worst.profile} "
            f"{100 * worst.error:+.0f}% ({100 * worst.share:.0f}% of its step)"
        )
        steps = [r for r in self.rows if r.stage == "step" and r.error is not None]
        worst_step = max(steps, key=lambda r: abs(r.error), default=None)
        step = (
            ""
            if worst_step is None
            else (f"; worst step: {worst_step.trainer} on {worst_step.profile} {100 * worst_step.error:+.0f}%")
        )
        failed = self.failures()
        head = "PASS" if not failed else f"FAIL ({len(failed)} of {len(self.bounded())} bounded rows outside)"
        return (
            f"{head}: bounds {100 * STAGE_BOUND:.0f}% per stage over {100 * SHARE:.0f}% of the step, "
            f"{100 * STEP_BOUND:.0f}% on the step{named}{step}"
        )

    def dense_spread(self) -> dict[str, tuple[float, float, int]]:
        """The machine's noise, measured without the model: per profile, the fastest and slowest
        `mlp` stage among the trainers that report one, and how many. Every such trainer runs
        the very same dense step on the same shapes, so their spread is the machine's, not the
        model's: an error inside it says nothing of the model. -> {profile: (min s, max s, n)}."""
        found: dict[str, list[float]] = {}
        for r in self.rows:
            if r.stage == "mlp" and r.measured_s > 0:
                found.setdefault(r.profile, []).append(r.measured_s)
        return {profile: (min(xs), max(xs), len(xs)) for profile, xs in found.items() if len(xs) > 1}

    def noise(self) -> list[str]:
        """One line per profile: dense_spread in words."""
        return [
            f"{profile}: the same dense step (mlp) measured {1000 * lo:.3f}-{1000 * hi:.3f} ms across "
            f"{n} trainers ({100 * (hi / lo - 1):+.0f}%)"
            for profile, (lo, hi, n) in self.dense_spread().items()
        ]

    def repeatability(self) -> dict[tuple[str, str], float]:
        """(profile, stage) -> how far the second run of a profile's first trainer measured that
        stage (and the step) from the first run: again / first - 1."""
        first = {(r.profile, r.trainer, r.stage): r.measured_s for r in self.rows}
        return {
            (r.profile, r.stage): r.measured_s / first[(r.profile, base, r.stage)] - 1.0
            for r in self.again
            for base in [r.trainer.removesuffix(AGAIN)]
            if first.get((r.profile, base, r.stage), 0.0) > 0 and r.measured_s > 0
        }

    def beyond_the_machine(self) -> list[ValidationRow]:
        """The rows outside their bound by more than the machine's own repeatability there: how
        far the same trainer measured twice disagreed on that stage (else on the step) of that
        profile, plus how far the calibrations around those minutes predicted that row from their
        median. A row inside that cannot tell a model's error from the machine's. Without
        either, every row outside."""
        again, calibrated = self.repeatability(), self.calibration_spread
        if not again and not calibrated:
            return self.failures()
        noise = lambda r: (
            abs(again.get((r.profile, r.stage), again.get((r.profile, "step"), 0.0)))
            + abs(calibrated.get((r.profile, r.trainer, r.stage), 0.0))
        )
        return [r for r in self.failures() if abs(r.error) > noise(r)]

    def repeatability_lines(self) -> list[str]:
        """One line per profile: the repeated trainer's largest difference from its first run."""
        by_profile: dict[str, list[tuple[float, str]]] = {}
        for (profile, stage), diff in self.repeatability().items():
            by_profile.setdefault(profile, []).append((diff, stage))
        lines = []
        for profile, diffs in by_profile.items():
            diff, stage = max(diffs, key=lambda d: abs(d[0]))
            step = next(d for d, s in diffs if s == "step") if any(s == "step" for _, s in diffs) else None
            lines.append(
                f"{profile}: the same trainer run twice differed by up to {100 * diff:+.0f}% ({stage})"
                + ("" if step is None else f", {100 * step:+.0f}% on the step")
            )
        bounded = {(r.profile, r.trainer, r.stage) for r in self.bounded()}
        by_profile_calibrated: dict[str, list[tuple[float, str]]] = {}
        for (profile, trainer, stage), diff in self.calibration_spread.items():
            if (profile, trainer, stage) in bounded:
                by_profile_calibrated.setdefault(profile, []).append((diff, f"{trainer} {stage}"))
        for profile, diffs in by_profile_calibrated.items():
            diff, where = max(diffs)
            lines.append(
                f"{profile}: the calibrations before and after its trainers predicted a bounded row "
                f"up to {100 * diff:.0f}% from their median ({where})"
            )
        return lines

    def to_json(self) -> list[dict]:
        return [r.to_dict() for r in self.rows]


def make_row(
    profile: str, trainer: str, stage: str, measured: float, predicted: float | None, step_seconds: float
) -> ValidationRow:
    """One row: its error, its share of the measured step, and whether a bound applies."""
    is_step = stage == "step"
    share = measured / step_seconds if step_seconds > 0 else 0.0
    error = None if predicted is None or measured <= 0 else predicted / measured - 1.0
    bounded = error is not None and (is_step or share > SHARE)
    bound = STEP_BOUND if is_step else STAGE_BOUND
    return ValidationRow(
        profile, trainer, stage, measured, predicted, share, error, bounded, abs(error) <= bound if bounded else None
    )


def compare(
    profile: str, trainer: str, stage_seconds: dict[str, float], step_seconds: float, projection
) -> list[ValidationRow]:
    """The rows of one trainer: each measured or predicted stage, then the step."""
    predicted = projection.stage_seconds
    stages = list(stage_seconds) + [s for s in predicted if s not in stage_seconds]
    rows = [
        make_row(
            profile, trainer, s, stage_seconds.get(s, 0.0), None if s in UNMODELLED else predicted.get(s), step_seconds
        )
        for s in stages
    ]
    return rows + [make_row(profile, trainer, "step", step_seconds, projection.step_seconds, step_seconds)]


def median_of_rounds(rounds: list[Validation]) -> Validation:
    """Rounds of the same validation (each calibrated afresh, or not) as one: each row's measured
    and predicted seconds the medians over the rounds, so that a round the machine ran slow in,
    on either side, moves no row (the way this project times anything: alternating rounds,
    medians). A row missing from a round counts in the others'."""

    def combined(rows_of) -> list[ValidationRow]:
        runs: dict[tuple, list[ValidationRow]] = {}
        for validation in rounds:
            for r in rows_of(validation):
                runs.setdefault((r.profile, r.trainer, r.stage), []).append(r)
        median = lambda xs: float(np.median(xs))
        measured = {key: median([r.measured_s for r in rows]) for key, rows in runs.items()}
        predicted = {
            key: None if any(r.predicted_s is None for r in rows) else median([r.predicted_s for r in rows])
            for key, rows in runs.items()
        }
        return [make_row(*key, measured[key], predicted[key], measured.get((*key[:2], "step"), 0.0)) for key in runs]

    origins = sorted({v.hardware for v in rounds if v.hardware})
    hardware = origins[0] if len(origins) == 1 else f"{len(rounds)} rounds: " + "; ".join(origins)
    spreads: dict[tuple, list[float]] = {}
    for validation in rounds:
        for key, spread in validation.calibration_spread.items():
            spreads.setdefault(key, []).append(spread)
    times: dict[tuple[str, str], list[RoundTimes]] = {}
    predictions: dict[tuple[str, str], list[Predicted]] = {}
    for validation in rounds:  # each table's rounds are rounds of the whole run
        for key, taken in validation.times.items():
            times.setdefault(key, []).extend(taken)
            predictions.setdefault(key, []).append(validation.predicted[key])
    middle = lambda ps: sorted(ps, key=lambda predicted: predicted.samples_per_s)[(len(ps) - 1) // 2]  # the median one
    return Validation(
        combined(lambda v: v.rows),
        hardware,
        combined(lambda v: v.again),
        {key: float(np.median(values)) for key, values in spreads.items()},
        times=times,
        predicted={key: middle(ps) for key, ps in predictions.items()},
    )


def validate_trainers(
    config,
    trainers: list[str],
    steps: int,
    *,
    warmup: int = 3,
    profile: str = "",
    source=None,
    device: str | None = None,
    wrap=None,
    rounds: int = 1,
    again: bool = False,
    machine=None,
    calibrate=None,
    before=None,
) -> Validation:
    """Train each of `trainers` here on the same batches (`warmup` untimed steps, then `steps`
    timed ones, in one `train()` call: scratchkit.measure.bench.run_bench; `rounds` > 1: the
    trainers alternate, each taking its steps in that many parts), predict each with `this-cpu`,
    and compare. `again`: the first trainer runs a second time beside them (its rows in
    `Validation.again`, labelled with AGAIN: the machine's repeatability). `machine`: the
    machine to predict with (None: this-cpu). `calibrate()`, a function that calibrates this
    machine, runs just before the trainers (unless `before`, a calibration just made, stands
    for it) and just after them instead: the rows are priced by the median of the two
    (hardware.median_hardware), measured on either side of the steps' minutes (not between the
    trainers' turns: a turn after a calibration starts on caches the calibration swept, and ran
    up to 3x slow on criteo-skew), and `Validation.calibration_spread` says how far each
    predicted each row from that median."""
    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.measure.bench import run_bench

    if steps <= 0 or warmup < 0:
        raise ValueError(f"steps must be positive and warmup >= 0, got steps={steps}, warmup={warmup}")
    source = source if source is not None else SyntheticSource(config.data)
    base = StepWork.from_config(config, source, batches=min(steps, 8), start=warmup)
    names = trainers + trainers[:1] if again else trainers
    passes = [] if calibrate is None else [before if before is not None else calibrate()]
    collect, taken = by_round(names, min(rounds, steps), wrap)
    results = run_bench(config, names, steps, warmup=warmup, source=source, device=device, wrap=collect, rounds=rounds)
    if calibrate is not None:
        passes.append(calibrate())
    machine = median_hardware(passes) if passes else machine if machine is not None else get_machine("this-cpu")
    validation = Validation(
        hardware=machine.origin + (f" (median of {len(passes)}: before and after)" if passes else ""),
        calibrations=passes,
    )
    for i, result in enumerate(results):
        work, extra, projection = predicted(result, base, machine)
        label, step = result.trainer + (AGAIN if i >= len(trainers) else ""), result.seconds / result.steps
        rows = compare(profile, label, result.stage_seconds, step, projection)
        (validation.again if i >= len(trainers) else validation.rows).extend(rows)
        if i < len(trainers):
            validation.times[(profile, label)] = [round_times(records) for records in taken[i]]
            validation.predicted[(profile, label)] = Predicted(
                projection.samples_per_s, projection.stage_seconds, projection.bound_stage, projection.resource_seconds
            )
        if len(passes) > 1 and i < len(trainers):
            validation.calibration_spread |= spread_of(
                profile,
                label,
                projection,
                [project(result.trainer, work, calibrated, extra=extra) for calibrated in passes],
            )
    return validation


def predicted(result, base: StepWork, machine):
    """The model's prediction of one measured `run_bench` result on `machine`: the run's working
    sets (`base`), the rows it moved and the tables that chose victims, planned as the run planned
    (`Design.planners_on_a_cpu`), its unmodelled seconds where it spent them. -> (work, extra,
    projection)."""
    work = base.with_counters(
        result.fetched_rows_per_step, result.written_back_rows_per_step, result.evicting_tables_per_step
    )
    planners = DESIGNS[result.trainer].planners_on_a_cpu
    if planners is not None and machine.device_is_host:
        work = replace(work, planners=planners)
    extra = {k: v for k, v in result.stage_seconds.items() if k in UNMODELLED}
    return work, extra, project(result.trainer, work, machine, extra=extra)


def validate_bench(config, results: list, machine=None, profile: str = "", source=None) -> Validation:
    """A `run_bench` run already made, beside the model's prediction of it on `machine` (None:
    this-cpu), a row per trainer and stage (notebook 05); `validate_trainers` runs its own."""
    machine = machine if machine is not None else get_machine("this-cpu")
    base = StepWork.from_config(config, source)
    validation = Validation(hardware=machine.origin)
    for result in results:
        projection = predicted(result, base, machine)[2]
        validation.rows += compare(
            profile, result.trainer, result.stage_seconds, result.seconds / result.steps, projection
        )
    return validation


def spread_of(profile: str, trainer: str, median, projections) -> dict[tuple[str, str, str], float]:
    """Per stage (and the step) of one trainer: the farthest any calibration's projection is from
    the median profile's, relative to it."""
    stages = {**median.stage_seconds, "step": median.step_seconds}
    out = {}
    for stage, at_median in stages.items():
        if at_median > 0:
            values = [
                other.step_seconds if stage == "step" else other.stage_seconds.get(stage, 0.0) for other in projections
            ]
            out[(profile, trainer, stage)] = max(abs(v / at_median - 1.0) for v in values)
    return out
