"""`scratchkit simulate`: run a cache policy on an access trace, or print its miss-ratio curves.

    scratchkit simulate --trace ids.npy --policy lru --capacity 4096 [--json]
    scratchkit simulate --trace ids.npy --policy lookahead --capacity 4096 [--batch-size 2048] --depth 2
    scratchkit simulate --trace ids.npy --mrc [--capacities 64,1024] [--json]
    scratchkit simulate --trace ids.npy --mrc --sample 0.1 [--sample-size 100000] [--vs-exact]
    scratchkit simulate --data criteo:train.tsv --mrc                   # via `scratchkit trace`
    scratchkit simulate --trace ids.npy --policy lru --capacity min [--batch-size 3328]

Look-ahead and `--capacity min` cut the trace into batches: by default where its batches end, which
`scratchkit trace` writes beside it (`ids.layout.json`, data/trace.py `TraceLayout`); a trace from
elsewhere needs `--batch-size`. Every flag is checked before the trace or the data is read.
`--data` writes the data's trace to a temporary `.npy` a batch at a time (`scratchkit trace`'s
writer) and simulates on that, so the trace is never held whole for the curves. `--capacity min`
is the smallest scratchpad ScratchPipe accepts at `--depth` (default 2), as in bench and verify:
the most distinct ids that D+1 consecutive batches of `--batch-size` lookups touch together
(`scratchkit/sim/window.py`), here over the trace's one id space.
"""

from __future__ import annotations

import json

from scratchkit.commands import curves
from scratchkit.commands.common import capacity_arg
from scratchkit.sim.policies import POLICIES, policy_name


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="simulate a cache policy on an access trace (.npy), or its miss-ratio curves",
        description="Simulate a cache of CAPACITY rows on a trace (1-D int64 .npy of ids, as "
        "`scratchkit trace` writes) and print lookups, hits, misses, fetched and "
        "written-back rows. With --mrc, print LRU hits at every capacity (exact, or "
        "SHARDS-sampled with --sample) and OPT at a few.",
    )
    p.add_argument("--trace", help="access trace: a 1-D int64 .npy of row ids")
    p.add_argument(
        "--data",
        metavar="KIND:PATH",
        help="simulate on a data file's trace instead "
        "(criteo:, movielens:, criteo-npy:), written by `scratchkit trace`'s writer",
    )
    p.add_argument("--steps", type=int, help="--data: batches to trace (default: all)")
    p.add_argument("--max-rows", type=int, metavar="N", help="--data: at most N rows a table")
    p.add_argument("--max-samples", type=int, metavar="N", help="--data: only the first N samples")
    p.add_argument("--cache-dir", metavar="DIR", help="--data: keep the converted columns here")
    p.add_argument(
        "--bad-lines",
        choices=("raise", "skip"),
        default="raise",
        help="--data: stop at a malformed line (raise) or skip and count it",
    )
    p.add_argument("--policy", help=f"{', '.join(POLICIES)} (with --mrc: lru or opt to print only that curve)")
    p.add_argument(
        "--capacity",
        type=capacity_arg,
        help="cache rows, or 'min': the fewest ScratchPipe accepts at --depth for batches of --batch-size lookups",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        help="lookahead, --capacity min: lookups per batch (default: the trace's own batches, "
        "from the NAME.layout.json that `scratchkit trace` writes beside NAME.npy; with --data, the data's)",
    )
    p.add_argument(
        "--depth",
        type=int,
        help="lookahead, --capacity min: look-ahead depth D >= 1, "
        "batches planned ahead of training (default 2, as in bench and verify)",
    )
    p.add_argument(
        "--horizon",
        type=int,
        help="lookahead: batches past the plan the victim choice may read (default: the whole trace; 0 = LRU)",
    )
    p.add_argument("--ways", type=int, help="setassoc: rows per set (default 32)")
    p.add_argument(
        "--prefix-share",
        type=float,
        help="static: share of the trace profiled for the hot set (default 0.1; 1.0 = oracle)",
    )
    p.add_argument("--mrc", action="store_true", help="print miss-ratio curves instead of one run")
    curves.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def run(args) -> int:
    if (args.trace is None) == (args.data is None):
        raise ValueError("give --trace FILE.npy or --data KIND:PATH (one of them)")
    if args.data is None:
        stray = [
            flag
            for flag, value in (
                ("--steps", args.steps),
                ("--max-rows", args.max_rows),
                ("--max-samples", args.max_samples),
                ("--cache-dir", args.cache_dir),
            )
            if value is not None
        ]
        if stray:
            raise ValueError(f"{', '.join(stray)} apply to --data only")
        return _simulate(args, _check_options(args))
    options = _check_options(args)  # every flag, before the data is read
    import tempfile

    from dataclasses import replace

    from scratchkit.commands.request import DataRequest
    from scratchkit.commands.trace import write_trace

    with tempfile.TemporaryDirectory(prefix="scratchkit-trace-") as folder:
        lookups = args.batch_size  # lookups, not samples: the data's own batches are the trace's layout
        data = replace(DataRequest.from_args(args), batch_size=None)
        args.trace = str(write_trace(data, args.steps, f"{folder}/trace.npy")[0])
        args.batch_size = lookups
        return _simulate(args, options)


def _check_options(args) -> dict:
    """The policy's options from the flags, or the first flag that does not belong; for --mrc,
    the curves' flags (curves.py). Reads nothing."""
    if args.mrc:
        curves.wanted_curves(args)
        return {}
    stray = [
        flag
        for flag, value in (
            ("--sample", args.sample),
            ("--sample-size", args.sample_size),
            ("--capacities", args.capacities),
        )
        if value is not None
    ]
    if stray or args.vs_exact:
        raise ValueError(f"{', '.join(stray) or '--vs-exact'} applies to --mrc curves only")
    if args.policy is None or args.capacity is None:
        raise ValueError("--policy and --capacity are required (or --mrc for the curves)")
    return _policy_options(args)


def _simulate(args, options: dict) -> int:
    from scratchkit.data.trace import check_trace_file, read_trace
    from scratchkit.sim import simulate

    check_trace_file(args.trace, hint="; a data file goes in --data KIND:PATH (criteo:, movielens:, criteo-npy:)")
    if args.mrc:
        return curves.run_curves(args)
    trace = read_trace(args.trace)
    if _takes_batches(args) and args.batch_size is None:
        args.batch_size = _batch_lookups(args, trace.size)
    if "batch_size" in POLICIES[policy_name(args.policy)].options:
        options["batch_size"] = args.batch_size
    if args.capacity == "min":
        args.capacity = _minimum_capacity(trace, args.batch_size, args.depth or 2)
    result = simulate(trace, args.policy, args.capacity, **options)
    if args.json:
        print(json.dumps(result.to_dict()))
        return 0
    fields = result.to_dict(series=False)
    width = max(len(key) for key in fields)
    for key, value in fields.items():
        shown = f"{value:.4f}" if isinstance(value, float) else ("all" if value is None else value)
        print(f"{key:<{width}}  {shown}")
    if result.batch_hits is not None:
        print(f"{'batches':<{width}}  {result.num_batches} (per-batch series: --json)")
    return 0


def _takes_batches(args) -> bool:
    return args.capacity == "min" or POLICIES[policy_name(args.policy)].batched


def _batch_lookups(args, accesses: int) -> int:
    """Lookups per batch where --batch-size is not given: the trace's own layout, which
    `scratchkit trace` writes beside it (data/trace.py TraceLayout), said on stderr."""
    import sys

    from scratchkit.data.trace import TraceLayout

    what = f"--policy {policy_name(args.policy)}" if args.capacity != "min" else "--capacity min"
    layout = TraceLayout.read(args.trace, accesses)
    if layout is None:
        raise ValueError(
            f"{what} cuts the trace into batches: give --batch-size (lookups per batch); "
            f"`scratchkit trace` writes a trace's batches beside it ({TraceLayout.path_of(args.trace).name}), "
            f"and this trace has none"
        )
    if layout.batch_lookups is None:
        raise ValueError(
            f"{what} cuts the trace into batches of one size, but this trace's batches hold "
            f"{layout.describe()} ({TraceLayout.path_of(args.trace).name}): give --batch-size"
        )
    if args.data is None:
        print(f"note: batches of {layout.describe()}, from {TraceLayout.path_of(args.trace)}", file=sys.stderr)
    return layout.batch_lookups


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _policy_options(args) -> dict:
    """The policy's options from the flags, refused in the flags' own words (`--depth`, not
    `depth`): a flag the policy does not take. (A batch size it needs and lacks comes from the
    trace's layout, once the trace is there: `_batch_lookups`.)"""
    name = policy_name(args.policy)
    spec = POLICIES[name]
    given = {
        "batch_size": args.batch_size,
        "depth": args.depth,
        "horizon": args.horizon,
        "ways": args.ways,
        "prefix_share": args.prefix_share,
    }
    for_min = ("batch_size", "depth") if args.capacity == "min" else ()
    stray = [_flag(n) for n, v in given.items() if v is not None and n not in spec.options and n not in for_min]
    if stray:
        takes = ", ".join(_flag(n) for n in spec.options) or "no options"
        raise ValueError(f"--policy {name} does not take {', '.join(stray)} (it takes {takes})")
    if "depth" in spec.needs and args.depth is None:
        args.depth = 2  # the default everywhere
    return {
        n: given[n] if n != "depth" else args.depth
        for n in spec.options
        if n != "batch_size" and (n in spec.needs or given[n] is not None)
    }


def _minimum_capacity(trace, batch_size: int, depth: int) -> int:
    import sys

    import numpy as np

    from scratchkit.sim.window import minimum_capacity

    sets = [np.unique(trace[i : i + batch_size]) for i in range(0, trace.size, batch_size)]
    need = minimum_capacity(sets, depth)
    print(
        f"capacity min = {need} rows for depth {depth} over {len(sets)} batches of {batch_size} lookups",
        file=sys.stderr,
    )
    return need
