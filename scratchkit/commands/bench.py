"""`scratchkit bench`: train trainers on identical data; samples/s, ratios and stage breakdown."""

from __future__ import annotations

import json

from scratchkit.commands.common import (
    BENCH_STEPS,
    BENCH_WARMUP,
    QUICK,
    add_config_args,
    fitted_run,
    progress,
    run_length,
)
from scratchkit.commands.distributed import add_sharding_args, run_sharded
from scratchkit.projection.hardware import hardware_names

DEFAULT_TRAINERS = "gpu-only,hybrid"  # --validate's default is every trainer


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("bench", help="measure trainers side by side on identical batches")
    add_config_args(p)
    p.add_argument(
        "--trainers",
        default=None,
        help="comma-separated, or all (default gpu-only,hybrid; with --validate every trainer)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"timed steps per trainer (default {BENCH_STEPS}; fewer where the data has fewer batches, said on stderr)",
    )
    p.add_argument("--warmup", type=int, default=None, help=f"untimed steps first (default {BENCH_WARMUP})")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK[0]} timed steps, {QUICK[1]} warm-up: a smoke run (not with --steps or --warmup)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument(
        "--project",
        default=None,
        metavar="MACHINE",
        help=f"add the cost model's projection for a machine: "
        f"{', '.join(hardware_names())}, a comma-separated list, or all",
    )
    p.add_argument(
        "--validate",
        action="store_true",
        help="compare the this-cpu cost model with this run, stage by stage, and say PASS or "
        "FAIL against the bounds (25%% per stage over 10%% of the step, 15%% on the "
        "step); --profile all validates every profile (--scale for the scalable ones)",
    )
    p.add_argument("--strict", action="store_true", help="with --validate: exit 1 when it FAILs")
    p.add_argument(
        "--rounds",
        type=int,
        default=None,
        metavar="K",
        help="with --validate: the trainers alternate, each taking its timed steps in K parts "
        "(default 5); ratios and stages are held to their spread between those rounds",
    )
    p.add_argument(
        "--record",
        default=None,
        metavar="PATH",
        help="with --validate: also keep the run as a record (command, commit, date, machine) at PATH",
    )
    add_sharding_args(p)
    p.set_defaults(run=run)


def run(args) -> int:
    if args.validate:
        if args.world_size is not None:
            raise ValueError("--validate runs on one process; drop --world-size")
        from scratchkit.commands.validation import run_validation

        return run_validation(args)
    if args.profile == "all" or "," in (args.profile or ""):
        raise ValueError("--profile all needs --validate (so does a list of profiles); bench one profile at a time")
    for flag, given in (("--rounds", args.rounds is not None), ("--record", args.record is not None)):
        if given:
            raise ValueError(f"{flag} applies to --validate runs; add --validate or drop {flag}")
    from scratchkit.commands.tables import format_table
    from scratchkit.measure.bench import run_bench
    from scratchkit.commands.common import parse_trainer_list

    if args.world_size is not None:
        return run_sharded("bench", args)
    trainers = parse_trainer_list(args.trainers or DEFAULT_TRAINERS)
    machines = None
    if args.project is not None:
        from scratchkit.projection.hardware import parse_hardware

        machines = parse_hardware(args.project)  # bad names fail before anything trains
    source, config, name, steps, warmup = fitted_run(args, trainers, *run_length(args))
    results = run_bench(config, trainers, steps, warmup=warmup, source=source, device=args.device, wrap=progress)
    projections = None
    if machines:
        from scratchkit.projection.costmodel import project_bench

        projections = project_bench(config, results, machines)
    if args.json:
        rows = [r.to_dict() for r in results]
        for row, projected in zip(rows, projections or []):
            row["projected"] = {
                p: {
                    "samples_per_s": x.samples_per_s,
                    "ratio": x.ratio,
                    "bound_stage": x.bound_stage,
                    "stage_seconds": x.stage_seconds,
                    "step_seconds": x.step_seconds,
                }
                for p, x in projected.items()
            }
        print(json.dumps(rows, indent=2))
    else:
        print(
            f"{name}: {len(config.data.table_sizes)} tables, batch "
            f"{config.data.batch_size}, pooling {config.data.pooling}, {steps} timed steps"
        )
        print(format_table(results, projections))
        if projections:
            print(
                "Projected: the cost model (scratchkit.projection.costmodel) applied to this run's work\n"
                "per step (working sets, rows fetched and written back); ratio = samples/s relative\n"
                "to the first trainer on the same machine; the data stage is not modelled."
            )
    return 0
