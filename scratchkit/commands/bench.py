"""`scratchkit bench`: train trainers on identical data; samples/s, ratios and stage breakdown.

Its flags become one `BenchRequest` as it starts (`BenchRequest.from_args`), which the run, the
validation (validation.py) and the sharded run (distributed.py) read. `bench_command` builds the
command line that runs it (the benchmarks that run bench in a fresh process use it).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from scratchkit.commands.common import (
    BENCH_STEPS,
    BENCH_WARMUP,
    QUICK,
    add_config_args,
    fitted_run,
    parse_trainer_list,
    progress,
    run_length,
)
from scratchkit.commands.distributed import add_sharding_args, run_sharded
from scratchkit.commands.request import DataRequest, ShardedRequest, TrainingRequest
from scratchkit.projection.machines import machine_names

DEFAULT_TRAINERS = "gpu-only,hybrid"  # --validate's default is every trainer


@dataclass(frozen=True)
class BenchRequest:
    """What `scratchkit bench` was asked: the batches, the training, the trainers and the run's
    length; where to project it; whether to validate the model against it (and how); sharded."""

    data: DataRequest
    training: TrainingRequest
    trainers: str | None  # as given: validation's default is every trainer, bench's gpu-only,hybrid
    steps: int
    warmup: int
    machines: tuple[str, ...] = ()  # --project, each name checked
    json: bool = False
    validate: bool = False
    strict: bool = False
    rounds: int | None = None
    record: str | None = None
    sharded: ShardedRequest = ShardedRequest()

    @classmethod
    def from_args(cls, args) -> "BenchRequest":
        """The flags as a request, refusing the ones that do not go together, before anything trains."""
        from scratchkit.projection.machines import parse_machines

        if args.validate and args.world_size is not None:
            raise ValueError("--validate runs on one process; drop --world-size")
        if not args.validate:
            if args.profile == "all" or "," in (args.profile or ""):
                raise ValueError(
                    "--profile all needs --validate (so does a list of profiles); bench one profile at a time"
                )
            for flag, given in (("--rounds", args.rounds is not None), ("--record", args.record is not None)):
                if given:
                    raise ValueError(f"{flag} applies to --validate runs; add --validate or drop {flag}")
        steps, warmup = run_length(args)
        return cls(
            DataRequest.from_args(args),
            TrainingRequest.from_args(args),
            args.trainers,
            steps,
            warmup,
            tuple(parse_machines(args.project)) if args.project is not None else (),  # bad names fail first
            args.json,
            args.validate,
            args.strict,
            args.rounds,
            args.record,
            ShardedRequest.from_args(args),
        )


def bench_command(profile: str, trainers: str, steps: int, warmup: int | None = None, *flags: str) -> list[str]:
    """`scratchkit bench --json` of `trainers` on `profile`, as the argv of a fresh interpreter
    (`flags`: more of bench's, e.g. "--batch-size", "64"); its stdout is a JSON list of results."""
    return [sys.executable, "-m", "scratchkit.commands.cli", *bench_argv(profile, trainers, steps, warmup, *flags)]


def bench_argv(profile: str, trainers: str, steps: int, warmup: int | None = None, *flags: str) -> list[str]:
    """bench's own command line (`bench_command` without the interpreter: what ranks are given)."""
    length = ["--steps", str(steps)] + ([] if warmup is None else ["--warmup", str(warmup)])
    return ["bench", "--profile", profile, "--trainers", trainers, *length, *flags, "--json"]


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
        f"{', '.join(machine_names())}, a comma-separated list, or all",
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
    return bench(BenchRequest.from_args(args))


def bench(request: BenchRequest) -> int:
    if request.validate:
        from scratchkit.commands.validation import run_validation

        return run_validation(request)
    if request.sharded.world_size is not None:
        return run_sharded(
            "bench",
            request.sharded,
            request.data,
            request.training,
            request.steps,
            request.warmup,
            bool(request.machines),
        )
    from scratchkit.commands.tables import format_table
    from scratchkit.measure.bench import run_bench

    trainers = parse_trainer_list(request.trainers or DEFAULT_TRAINERS)
    source, config, name, steps, warmup = fitted_run(
        "bench", request.data, request.training, trainers, request.steps, request.warmup
    )
    results = run_bench(
        config, trainers, steps, warmup=warmup, source=source, device=request.training.device, wrap=progress
    )
    projections = None
    if request.machines:
        from scratchkit.projection.project import figures, project_bench

        projections = project_bench(config, results, list(request.machines))
    if request.json:
        rows = [r.to_dict() for r in results]
        if projections:
            shown = {m: figures([row[m] for row in projections]) for m in request.machines}
            for row in rows:
                row["projected"] = {m: shown[m][row["trainer"]] for m in request.machines}
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{name}: {len(config.data.table_sizes)} tables, batch "
        f"{config.data.batch_size}, pooling {config.data.pooling}, {steps} timed steps"
    )
    print(format_table(results, projections))
    if projections:
        print(
            "Projected: the cost model (scratchkit.projection.project) applied to this run's work\n"
            "per step (working sets, rows fetched and written back); ratio = samples/s relative\n"
            "to the first trainer on the same machine; the data stage is not modelled."
        )
    return 0
