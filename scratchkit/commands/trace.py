"""`scratchkit trace`: write the access trace of a profile's batches as a `.npy` of int64 ids."""
from __future__ import annotations

from scratchkit.commands.common import add_config_args, config_from_args


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("trace", help="write an access trace (.npy int64 ids) for the simulators")
    add_config_args(p)
    p.add_argument("--steps", type=int, default=100, help="batches to include (default 100)")
    p.add_argument("--out", required=True, help="output path, e.g. ids.npy")
    p.set_defaults(run=run)


def run(args) -> int:
    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.data.trace import make_trace, write_trace

    config = config_from_args(args)
    trace = make_trace(SyntheticSource(config.data), args.steps)
    path = write_trace(trace, args.out)
    print(f"wrote {len(trace):,} accesses ({len(set(trace.tolist())) if len(trace) < 5_000_000 else '?'} "
          f"distinct ids) of {args.steps} batches to {path}")
    return 0
