"""`scratchkit bench`: train trainers on identical data; samples/s, ratios and stage breakdown."""
from __future__ import annotations

import json

from scratchkit.commands.common import add_config_args, progress, source_and_config
from scratchkit.commands.distributed import add_sharding_args, run_sharded


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("bench", help="measure trainers side by side on identical batches")
    add_config_args(p)
    p.add_argument("--trainers", default="gpu-only,hybrid", help="comma-separated (default gpu-only,hybrid)")
    p.add_argument("--steps", type=int, default=100, help="timed steps per trainer (default 100)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    p.add_argument("--quick", action="store_true", help="10 timed steps, 2 warm-up: a smoke run")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument("--project", default=None, metavar="PROFILE",
                   help="add the cost model's projection for a hardware profile: this-cpu, "
                        "v100-pcie3, h100-pcie5, a comma-separated list, or all")
    add_sharding_args(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from scratchkit.commands.tables import format_table
    from scratchkit.measure.bench import run_bench
    from scratchkit.commands.common import parse_trainer_list

    if args.world_size is not None:
        return run_sharded("bench", args)
    trainers = parse_trainer_list(args.trainers)
    profiles = None
    if args.project is not None:
        from scratchkit.measure.hardware import parse_profiles
        profiles = parse_profiles(args.project)      # bad names fail before anything trains
    steps, warmup = (10, 2) if args.quick else (args.steps, args.warmup)
    source, config, name = source_and_config(args, steps + warmup)
    results = run_bench(config, trainers, steps, warmup=warmup, source=source, device=args.device,
                        wrap=progress)
    projections = None
    if profiles:
        from scratchkit.measure.costmodel import project_bench
        projections = project_bench(config, results, profiles)
    if args.json:
        rows = [r.to_dict() for r in results]
        for row, projected in zip(rows, projections or []):
            row["projected"] = {p: {"samples_per_s": x.samples_per_s, "ratio": x.ratio,
                                    "bound_stage": x.bound_stage, "stage_seconds": x.stage_seconds,
                                    "step_seconds": x.step_seconds} for p, x in projected.items()}
        print(json.dumps(rows, indent=2))
    else:
        print(f"{name}: {len(config.data.table_sizes)} tables, batch "
              f"{config.data.batch_size}, pooling {config.data.pooling}, {steps} timed steps")
        print(format_table(results, projections))
        if projections:
            print("Projected: the cost model (scratchkit.measure.costmodel) applied to this run's work\n"
                  "per step (working sets, rows fetched and written back); ratio = samples/s relative\n"
                  "to the first trainer on the same profile; the data stage is not modelled.")
    return 0
