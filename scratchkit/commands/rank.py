"""One rank's command line: `python -m scratchkit.distributed bench|verify|train ...`.

What the launcher (`--world-size N`) starts, and what `torchrun --nproc-per-node N -m
scratchkit.distributed ...` starts. It takes bench's and verify's flags (`build_rank_parser` builds
their very parsers) and runs the job on this rank (scratchkit/distributed/job.py); rank 0 prints
the results as one process would. `train` trains one trainer with per-shard checkpoints
(`--checkpoint-dir`, `--checkpoint-every`, `--resume`). Exit status: 0 done; 1 done, but verify found a
difference (rank 0); 2 bad input; 3 this rank failed (one line on stderr, the report in the job's
store: scratchkit/distributed/failure.py). The launcher tells a failure from a verdict by it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from scratchkit.commands import bench, verify
from scratchkit.commands.common import add_config_args
from scratchkit.commands.distributed import add_sharding_args, check_sharding
from scratchkit.commands.flags import check_flags
from scratchkit.commands.request import DataRequest, ShardedRequest, TrainingRequest


def build_rank_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scratchkit.distributed",
        description="One rank of a sharded job (start it with torchrun, "
        "or with scratchkit bench/verify --world-size N).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    bench.add_parser(subparsers)
    verify.add_parser(subparsers)
    train = subparsers.add_parser("train", help="train one trainer sharded, with checkpoints per shard")
    add_config_args(train)
    train.add_argument("--trainers", default="scratchpipe", help="the trainer (default scratchpipe)")
    train.add_argument("--steps", type=int, default=100, help="steps to train (default 100)")
    train.add_argument("--checkpoint-dir", default=None, help="folder of the per-shard checkpoints")
    train.add_argument(
        "--checkpoint-every", type=int, default=0, metavar="K", help="save every K steps (default: only at the end)"
    )
    train.add_argument("--resume", action="store_true", help="start from the newest complete checkpoint")
    train.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_sharding_args(train)
    for name in ("bench", "verify", "train"):
        subparsers.choices[name].set_defaults(run=run_rank_command)
    return parser


FAILED = 3  # this rank failed (a verdict of verify's is 1)


def main(argv: list[str] | None = None) -> int:
    """`python -m scratchkit.distributed COMMAND ...` as one rank -> its exit status (the module
    note). The rank's process then leaves with `os._exit` (scratchkit/distributed/__main__.py)."""
    args = build_rank_parser().parse_args(argv)
    try:
        check_flags(args)
        status = run_rank_command(args)
    except (ValueError, FileNotFoundError) as error:
        print(f"scratchkit.distributed {args.command}: error: {error}", file=sys.stderr)
        return 2
    except Exception:  # noqa: BLE001 - not a verdict: say so by the status, keep the traceback
        traceback.print_exc()
        status = FAILED
    return status


def run_rank_command(args) -> int:
    from dataclasses import replace

    from scratchkit.commands.common import config_of, parse_trainer_list, run_length
    from scratchkit.distributed.failure import Fault
    from scratchkit.distributed.group import RankEnv, rank_device
    from scratchkit.distributed.job import JobSpec, RankFailed, run_rank
    from scratchkit.distributed.sharding import Sharding

    env = RankEnv.from_environ()
    if args.world_size is not None and args.world_size != env.world_size:
        raise ValueError(f"--world-size {args.world_size}, but this job has {env.world_size} ranks")
    data, training = DataRequest.from_args(args), TrainingRequest.from_args(args)
    sharded = replace(ShardedRequest.from_args(args), world_size=env.world_size)
    steps, warmup = run_length(args)
    check_sharding(sharded, data, training, steps, warmup, bool(getattr(args, "project", None)))
    spec = JobSpec(
        config=config_of(data, training, steps, warmup),
        trainers=parse_trainer_list(args.trainers or bench.DEFAULT_TRAINERS),
        sharding=Sharding.parse(sharded.sharding),
        steps=steps,
        warmup=warmup,
        device=rank_device(training.device, env.local_rank),
        tolerance=getattr(args, "tolerance", None),
        hang_timeout=sharded.hang_timeout,
        fault=Fault.parse(sharded.inject_fault) if sharded.inject_fault else None,
        checkpoint_dir=getattr(args, "checkpoint_dir", None),
        checkpoint_every=getattr(args, "checkpoint_every", 0),
        resume=getattr(args, "resume", False),
    )
    try:
        result = run_rank(args.command, spec, env)
    except RankFailed as failed:
        print(f"scratchkit.distributed rank {env.rank}: error: {failed}", file=sys.stderr)
        if "TORCHELASTIC_ERROR_FILE" in os.environ:  # torchrun's summary then quotes it
            record_for_torchrun(failed, os.environ["TORCHELASTIC_ERROR_FILE"])
        return FAILED
    return 0 if result is None else show(args.command, data.profile_name, args.json, spec, result)


def record_for_torchrun(failed, path: str) -> None:
    """Write this rank's error where torchrun reads it. torchrun names as root cause the failure
    with the earliest timestamp, in whole seconds, the lowest rank on a tie: a rank stopped by a
    peer's failure (`blame`) noticed it in the same second or later, so its file says one second
    later than its clock, and the rank that failed first is the one named."""
    from torch.distributed.elastic.multiprocessing.errors.error_handler import ErrorHandler

    ErrorHandler().record_exception(failed)
    if failed.entry.get("blame"):
        with open(path) as file:
            data = json.load(file)
        info = data["message"]["extraInfo"]
        info["timestamp"] = str(int(info["timestamp"]) + 1)
        with open(path, "w") as file:
            json.dump(data, file)


def show(command: str, profile: str, as_json: bool, spec, result) -> int:
    """Rank 0 prints the job's result as the one-process command would."""
    if command == "verify":
        return verify.show(result, as_json)
    if as_json:
        print(json.dumps(result, indent=2))
        return 0
    if command == "train":
        print(
            f"trained {result['trainer']} on {result['world_size']} ranks ({result['sharding']}-wise): "
            f"batches {result['from_batch']}..{result['to_batch'] - 1}, last loss {result['loss'][-1]:.4f}"
            + (f"; checkpoints in {', '.join(result['checkpoints'])}" if result["checkpoints"] else "")
        )
        return 0
    from scratchkit.commands.tables import format_table
    from scratchkit.measure.bench import BenchResult

    fields = BenchResult.__dataclass_fields__
    rows = [BenchResult(**{k: v for k, v in row.items() if k in fields}) for row in result]
    config, first = spec.config, result[0]
    print(
        f"profile {profile}: {len(config.data.table_sizes)} tables, global batch "
        f"{config.data.batch_size} over {first['world_size']} ranks ({first['sharding']}-wise, "
        f"{first['backend']}), pooling {config.data.pooling}, {spec.steps} timed steps"
    )
    print(format_table(rows))
    print(
        "samples/s: the whole job's (global batch / step time of the slowest rank); stage ms: "
        "the mean over ranks; all_to_all_* and all_gather_dense run inside the trainers' mlp "
        "(or train) stage. Bytes sent between ranks per step: "
        + ", ".join(f"{r['trainer']} {r['sent_bytes_per_step']:,.0f}" for r in result)
    )
    return 0
