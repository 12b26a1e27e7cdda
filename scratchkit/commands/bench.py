"""`scratchkit bench`: train trainers on identical data; samples/s, ratios and stage breakdown."""
from __future__ import annotations

import json

from scratchkit.commands.common import add_config_args, config_from_args, progress


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("bench", help="measure trainers side by side on identical batches")
    add_config_args(p)
    p.add_argument("--trainers", default="gpu-only,hybrid", help="comma-separated (default gpu-only,hybrid)")
    p.add_argument("--steps", type=int, default=100, help="timed steps per trainer (default 100)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    p.add_argument("--quick", action="store_true", help="10 timed steps, 2 warm-up: a smoke run")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.set_defaults(run=run)


def run(args) -> int:
    from scratchkit.bench import format_table, run_bench
    from scratchkit.trainers import parse_trainer_list

    trainers = parse_trainer_list(args.trainers)
    config = config_from_args(args)
    steps, warmup = (10, 2) if args.quick else (args.steps, args.warmup)
    results = run_bench(config, trainers, steps, warmup=warmup, device=args.device, wrap=progress)
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        print(f"profile {args.profile}: {len(config.data.table_sizes)} tables, batch "
              f"{config.data.batch_size}, pooling {config.data.pooling}, {steps} timed steps")
        print(format_table(results))
    return 0
