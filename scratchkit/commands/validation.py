"""`scratchkit bench --validate`: the this-cpu cost model beside this run, stage by stage.

The trainers alternate in rounds (`--rounds K`: each takes its timed steps in K parts, in turn),
so the run holds the model to two kinds of bound: the absolute ones (measure/validate.py: 25% a
stage, 15% a step; what scripts/gpu_check.sh checks on a quiet GPU server) and the run's own
spread between its rounds (measure/round_checks.py: ratios to gpu-only, bounds, stages), which a
busy machine can resolve.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import replace

from scratchkit.commands.common import config_of, parse_trainer_list, progress
from scratchkit.commands.request import DataRequest, TrainingRequest
from scratchkit.config import TrainConfig
from scratchkit.profiles import PROFILES, scalable_profiles

ROUNDS = 5  # --rounds' default: parts each trainer's timed steps are taken in, in turn


def profiles_of(data: DataRequest) -> list[str]:
    """--profile NAME (default: the command's), a comma-separated list, or all: every profile (the
    scalable ones at --scale)."""
    if data.data is not None:
        raise ValueError("--validate runs on the synthetic profiles; drop --data")
    if data.profile == "all":
        return list(PROFILES)
    names = [p.strip() for p in data.profile_name.split(",") if p.strip()]
    unknown = [p for p in names if p not in PROFILES]
    if unknown:
        raise ValueError(f"unknown profile {unknown[0]!r}; choose from {', '.join(PROFILES)} or all")
    return names


def as_calibrated(training: TrainingRequest) -> TrainingRequest:
    """The training flags a validation runs with where the command line leaves them: each stage
    alone, as `calibrate` times it (`TrainConfig.alone`); a batch made on the step's path is
    measured as `data` and added to both sides."""
    alone = TrainConfig().alone()
    given = lambda flag, default: default if getattr(training, flag) is None else getattr(training, flag)
    return replace(
        training,
        batches_ahead=given("batches_ahead", alone.batches_ahead),
        threads=given("threads", alone.threads),
    )


def run_validation(request) -> int:
    """`bench --validate`, as its BenchRequest (commands/bench.py) asks."""
    from scratchkit.commands.tables import format_round_check, format_validation
    from scratchkit.measure.record import RunRecord
    from scratchkit.measure.validate import Validation, validate_trainers
    from scratchkit.trainers import available_trainers

    record = RunRecord("scratchkit " + shlex.join(sys.argv[1:])) if request.record else None
    load = os.getloadavg()[0]  # how busy the machine was: a record of a shared VM says so
    rounds = ROUNDS if request.rounds is None else request.rounds
    if rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {rounds}")
    trainers = parse_trainer_list(request.trainers) if request.trainers else available_trainers()
    steps, warmup = request.steps, request.warmup
    training = as_calibrated(request.training)
    names = profiles_of(request.data)
    configs = []
    for name in names:  # every config built (and checked) before anything trains
        scale = request.data.scale if name in scalable_profiles() or len(names) == 1 else None  # one: checked
        data = replace(request.data, profile=name, scale=scale)
        configs.append((name, config_of(data, training, steps, warmup)))
    validation = Validation()
    for name, config in configs:
        validation += validate_trainers(
            config,
            trainers,
            steps,
            warmup=warmup,
            profile=name,
            device=request.training.device,
            rounds=rounds,
            wrap=lambda it, n, t: progress(it, n, f"{name} {t}"),
        )
    worst = validation.worst()
    checks = validation.round_check()
    out = {
        "hardware": validation.hardware,
        "verdict": validation.verdict(),
        "passed": validation.passed,
        "worst": worst.to_dict() if worst else None,
        "rows": validation.to_json(),
        "rounds": rounds,
        "steps": steps,
        "warmup": warmup,
        **checks.to_json(),
    }
    if request.json:
        print(json.dumps(out, indent=2))
    else:
        print(format_validation(validation))
        print(format_round_check(checks))
    if record is not None:
        figures = {
            "profiles": ", ".join(names),
            "scale": request.data.scale,
            "trainers": ", ".join(trainers),
            "rounds": rounds,
            "steps": steps,
            "warmup": warmup,
            "hardware": validation.hardware,
            "load": f"{load:.1f} as it started, {os.getloadavg()[0]:.1f} as it ended (the 1-minute load "
            f"average; {os.cpu_count()} cores)",
            "verdict": validation.verdict(),
            "spread_verdict": checks.verdict(),
            **recorded(checks),
        }
        print(f"recorded {record.write(request.record, figures)}", file=sys.stderr)
    return 1 if request.strict and not validation.passed else 0


def recorded(checks) -> dict[str, dict[str, dict]]:
    """The round checks as a record's tables (scripts/render_results.py renders a dict of dicts):
    every ratio, every bound, and every stage a bound applies to, figures rounded."""
    pct = lambda x: None if x is None else round(100 * x, 1)
    ratios = {
        f"{r.profile} {r.trainer} / {r.reference}": {
            "measured": round(r.measured_ratio, 3),
            "predicted": round(r.predicted_ratio, 3),
            "error %": pct(r.error),
            "spread %": pct(r.spread),
            "bound %": pct(r.bound),
            "bound from": r.bound_from.value,
            "within": r.within,
        }
        for r in checks.ratio_rows
    }
    bounds = {
        f"{b.profile} {b.trainer}": {
            "model": b.predicted_stage + (f" ({b.predicted_resource})" if b.predicted_resource else ""),
            "run": b.measured_stage + (f" ({b.measured_resource})" if b.measured_resource else ""),
            "agree": b.agree,
        }
        for b in checks.bound_rows
    }
    stages = {
        f"{r.profile} {r.trainer} {r.stage}": {
            "measured ms": round(1000 * r.measured_s, 3),
            "predicted ms": round(1000 * r.predicted_s, 3),
            "error %": pct(r.error),
            "of step %": pct(r.share),
            "spread %": pct(r.spread),
            "bound %": pct(r.bound),
            "bound from": r.bound_from.value,
            "within": r.within,
        }
        for r in checks.stage_rows
        if r.within is not None
    }
    return {"ratios": ratios, "bounds": bounds, "stages": stages}
