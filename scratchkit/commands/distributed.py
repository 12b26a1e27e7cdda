"""`--world-size N` on `scratchkit bench` and `scratchkit verify`: sharded training from the command line.

It starts N ranks on this machine (scratchkit/distributed/launch.py), each running the same
command line as one rank (commands/rank.py: `python -m scratchkit.distributed ...`), and prints
rank 0's output: the same JSON rows or lines as one process, for the whole job. `--sharding`,
`--hang-timeout` and `--inject-fault` go with it. When a rank fails, the error names it and says
how long the job took to stop.
"""

from __future__ import annotations

import sys

from scratchkit.commands.request import DataRequest, ShardedRequest, TrainingRequest


def add_sharding_args(parser) -> None:
    parser.add_argument(
        "--world-size",
        type=int,
        default=None,
        metavar="N",
        help="train sharded over N ranks started on this machine (torch.distributed: "
        "gloo on a CPU, NCCL on GPUs); default: one process, unsharded",
    )
    parser.add_argument(
        "--sharding",
        default="row",
        help="with --world-size: table (each table whole on one rank) or row (each "
        "table in row blocks, one per rank) (default row)",
    )
    parser.add_argument(
        "--hang-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="with --world-size: seconds a rank waits for a silent peer before the job stops (default 60)",
    )
    parser.add_argument(
        "--inject-fault",
        default=None,
        metavar="KIND@RANK:STEP",
        help="with --world-size, for tests: raise, kill or hang rank RANK as step STEP trains, e.g. raise@1:3",
    )


def check_sharding(
    sharded: ShardedRequest, data: DataRequest, training: TrainingRequest, steps: int, warmup: int = 0, project=False
) -> None:
    """Refuse bad sharding flags in one line each, before any rank starts: a run of `steps` after
    `warmup` (`project`: --project was given, which a sharded run does not take)."""
    from scratchkit.distributed.failure import Fault
    from scratchkit.distributed.sharding import Sharding, plan_shards

    try:
        Sharding.parse(sharded.sharding)
    except ValueError as error:
        raise ValueError(f"--sharding: {error}") from None
    if sharded.inject_fault is not None:
        try:
            Fault.parse(sharded.inject_fault)
        except ValueError as error:
            raise ValueError(f"--inject-fault: {error}") from None
    if project:
        raise ValueError(
            "--project with --world-size: the sharded projection is scratchkit.distributed.sharded_cost (notebook 07)"
        )
    if sharded.world_size is not None:
        from scratchkit.commands.common import config_of

        config = config_of(data, training, steps, warmup)
        plan_shards(sharded.sharding, config.data.table_sizes, sharded.world_size)  # every rank owns rows
        if config.data.batch_size % sharded.world_size:
            raise ValueError(
                f"--world-size {sharded.world_size} does not divide the batch of "
                f"{config.data.batch_size} samples: choose a --batch-size that it divides"
            )


def run_sharded(
    command: str, sharded: ShardedRequest, data, training, steps: int, warmup: int = 0, project=False
) -> int:
    """`scratchkit COMMAND ... --world-size N`: start the ranks (each runs the command line again),
    print rank 0's output."""
    from scratchkit.distributed.launch import launch

    check_sharding(sharded, data, training, steps, warmup, project)
    result = launch(list(sharded.argv), sharded.world_size, hang_timeout=sharded.hang_timeout)
    sys.stdout.write(result.output)
    if result.failure:
        print(f"scratchkit {command}: error: {result.failure}", file=sys.stderr)
        for line in result.describe():
            print(f"  {line}", file=sys.stderr)
    return result.returncode
