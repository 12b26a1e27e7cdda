"""`scratchkit simulate`: run a cache policy on an access trace, or print its miss-ratio curves.

    scratchkit simulate --trace ids.npy --policy lru --capacity 4096 [--json]
    scratchkit simulate --trace ids.npy --policy lookahead --capacity 4096 --batch-size 2048 --depth 2
    scratchkit simulate --trace ids.npy --mrc [--capacities 64,1024] [--json]
    scratchkit simulate --trace ids.npy --mrc --sample 0.1 [--sample-size 100000] [--vs-exact]
"""
from __future__ import annotations

import json

from scratchkit.commands import curves


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate", help="simulate a cache policy on an access trace (.npy), or its miss-ratio curves",
        description="Simulate a cache of CAPACITY rows on a trace (1-D int64 .npy of ids, as "
                    "`scratchkit trace` writes) and print lookups, hits, misses, fetched and "
                    "written-back rows. With --mrc, print LRU hits at every capacity (exact, or "
                    "SHARDS-sampled with --sample) and OPT at a few.")
    p.add_argument("--trace", required=True, help="access trace: a 1-D int64 .npy of row ids")
    p.add_argument("--policy", help="static, lru, lfu, opt, lookahead or setassoc "
                                    "(with --mrc: lru or opt to print only that curve)")
    p.add_argument("--capacity", type=int, help="cache rows")
    p.add_argument("--batch-size", type=int, help="lookahead: lookups per batch (a trace from "
                                                  "`scratchkit trace` has samples x tables x pooling per batch)")
    p.add_argument("--depth", type=int, help="lookahead: batches planned ahead of training")
    p.add_argument("--horizon", type=int, help="lookahead: batches past the plan the victim "
                                               "choice may read (default: the whole trace; 0 = LRU)")
    p.add_argument("--ways", type=int, help="setassoc: rows per set (default 32)")
    p.add_argument("--prefix-share", type=float, help="static: share of the trace profiled for "
                                                      "the hot set (default 0.1; 1.0 = oracle)")
    p.add_argument("--mrc", action="store_true", help="print miss-ratio curves instead of one run")
    curves.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def run(args) -> int:
    from scratchkit.data.trace import read_trace
    from scratchkit.sim import simulate

    if args.mrc:
        return curves.run_curves(args)
    stray = [flag for flag, value in (("--sample", args.sample), ("--sample-size", args.sample_size),
                                      ("--capacities", args.capacities)) if value is not None]
    if stray or args.vs_exact:
        raise ValueError(f"{', '.join(stray) or '--vs-exact'} applies to --mrc curves only")
    trace = read_trace(args.trace)

    if args.policy is None or args.capacity is None:
        raise ValueError("--policy and --capacity are required (or --mrc for the curves)")
    result = simulate(trace, args.policy, args.capacity, batch_size=args.batch_size,
                      depth=args.depth, horizon=args.horizon, ways=args.ways,
                      prefix_share=args.prefix_share)
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
