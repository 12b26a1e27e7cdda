"""`scratchkit bench --validate`: the this-cpu cost model beside this run, stage by stage.

The trainers alternate in rounds (`--rounds K`: each takes its timed steps in K parts, in turn),
so the run holds the model to two kinds of bound: the absolute ones (measure/validate.py: 25% a
stage, 15% a step; what scripts/gpu_check.sh checks on a quiet GPU server) and the run's own
spread between its rounds (measure/round_checks.py: ratios to gpu-only, bounds, stages), which a
busy machine can resolve.
"""
from __future__ import annotations

import json
import shlex
import sys
from argparse import Namespace

from scratchkit.commands.common import config_from_args, parse_trainer_list, progress, run_length
from scratchkit.profiles import PROFILES, SCALABLE

ROUNDS = 5          # --rounds' default: parts each trainer's timed steps are taken in, in turn


def profiles_of(args) -> list[str]:
    """--profile NAME (default: the command's), a comma-separated list, or all: every profile (the
    scalable ones at --scale)."""
    if getattr(args, "data", None) is not None:
        raise ValueError("--validate runs on the synthetic profiles; drop --data")
    if args.profile == "all":
        return list(PROFILES)
    names = [p.strip() for p in (args.profile or args.default_profile).split(",") if p.strip()]
    unknown = [p for p in names if p not in PROFILES]
    if unknown:
        raise ValueError(f"unknown profile {unknown[0]!r}; choose from {', '.join(PROFILES)} or all")
    return names


def run_validation(args) -> int:
    from scratchkit.commands.tables import format_round_check, format_validation
    from scratchkit.measure.record import RunRecord
    from scratchkit.measure.validate import Validation, validate_trainers
    from scratchkit.trainers import available_trainers

    record = RunRecord("scratchkit " + shlex.join(sys.argv[1:])) if args.record else None
    rounds = ROUNDS if args.rounds is None else args.rounds
    if rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {rounds}")
    trainers = parse_trainer_list(args.trainers) if args.trainers else available_trainers()
    steps, warmup = run_length(args)
    names = profiles_of(args)
    configs = []
    for name in names:      # every config built (and checked) before anything trains
        scale = args.scale if name in SCALABLE or len(names) == 1 else None   # one profile: checked
        configs.append((name, config_from_args(Namespace(**{**vars(args), "profile": name, "scale": scale}))))
    validation = Validation()
    for name, config in configs:
        validation += validate_trainers(config, trainers, steps, warmup=warmup, profile=name, device=args.device,
                                        rounds=rounds, wrap=lambda it, n, t: progress(it, n, f"{name} {t}"))
    worst = validation.worst()
    checks = validation.round_check()
    out = {"hardware": validation.hardware, "verdict": validation.verdict(), "passed": validation.passed,
           "worst": worst.to_dict() if worst else None, "rows": validation.to_json(),
           "rounds": rounds, "steps": steps, "warmup": warmup, **checks.to_json()}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(format_validation(validation))
        print(format_round_check(checks))
    if record is not None:
        path = record.write(args.record, {"profiles": names, "scale": args.scale, "trainers": trainers, **out})
        print(f"recorded {path}", file=sys.stderr)
    return 1 if args.strict and not validation.passed else 0
