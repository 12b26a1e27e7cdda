"""`scratchkit bench --validate`: the this-cpu cost model beside this run, stage by stage."""
from __future__ import annotations

import json
from argparse import Namespace

from scratchkit.commands.common import config_from_args, parse_trainer_list, progress, run_length
from scratchkit.profiles import PROFILES, scalable_profiles


def profiles_of(args) -> list[str]:
    """--profile NAME (default: the command's), or all: every profile (the scalable ones at --scale)."""
    if getattr(args, "data", None) is not None:
        raise ValueError("--validate runs on the synthetic profiles; drop --data")
    if args.profile != "all":
        return [args.profile or args.default_profile]
    return list(PROFILES)


def run_validation(args) -> int:
    from scratchkit.commands.tables import format_validation
    from scratchkit.measure.validate import Validation, validate_trainers
    from scratchkit.trainers import available_trainers

    trainers = parse_trainer_list(args.trainers) if args.trainers else available_trainers()
    steps, warmup = run_length(args)
    configs = []
    for name in profiles_of(args):      # every config built (and checked) before anything trains
        scale = args.scale if name in scalable_profiles() or args.profile != "all" else None   # one profile: checked
        configs.append((name, config_from_args(Namespace(**{**vars(args), "profile": name, "scale": scale}))))
    validation = Validation()
    for name, config in configs:
        validation += validate_trainers(config, trainers, steps, warmup=warmup, profile=name,
                                        device=args.device, wrap=lambda it, n, t: progress(it, n, f"{name} {t}"))
    if args.json:
        worst = validation.worst()
        print(json.dumps({"hardware": validation.hardware, "verdict": validation.verdict(),
                          "passed": validation.passed, "worst": worst.to_dict() if worst else None,
                          "rows": validation.to_json()}, indent=2))
    else:
        print(format_validation(validation))
    return 1 if args.strict and not validation.passed else 0
