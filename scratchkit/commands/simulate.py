"""`scratchkit simulate`: run a cache policy on an access trace, or print its miss-ratio curves.

    scratchkit simulate --trace ids.npy --policy lru --capacity 4096 [--json]
    scratchkit simulate --trace ids.npy --policy lookahead --capacity 4096 --batch-size 2048 --depth 2
    scratchkit simulate --trace ids.npy --mrc [--capacities 64,1024] [--json]
"""
from __future__ import annotations

import json

import numpy as np


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate", help="simulate a cache policy on an access trace (.npy), or its miss-ratio curves",
        description="Simulate a cache of CAPACITY rows on a trace (1-D int64 .npy of ids, as "
                    "`scratchkit trace` writes) and print lookups, hits, misses, fetched and "
                    "written-back rows. With --mrc, print LRU hits at every capacity and OPT at "
                    "a few.")
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
    p.add_argument("--capacities", help="--mrc: comma-separated capacities for OPT "
                                        "(default: 8 spaced from 1 to the unique ids)")
    p.add_argument("--points", type=int, default=24, help="--mrc table: rows shown (default 24; "
                                                          "--json prints every capacity)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def run(args) -> int:
    from scratchkit.data.trace import read_trace

    trace = read_trace(args.trace)
    if args.mrc:
        return _run_curves(args, trace)
    from scratchkit.sim import simulate

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


def _run_curves(args, trace: np.ndarray) -> int:
    from scratchkit.sim import Policy, lru_mrc, opt_mrc

    stray = [flag for flag, value in (("--capacity", args.capacity), ("--batch-size", args.batch_size),
                                      ("--depth", args.depth), ("--horizon", args.horizon),
                                      ("--ways", args.ways), ("--prefix-share", args.prefix_share))
             if value is not None]
    if stray:
        raise ValueError(f"--mrc does not take {', '.join(stray)}")
    wanted = {Policy.LRU, Policy.OPT} if args.policy is None else {Policy.parse(args.policy)}
    if not wanted <= {Policy.LRU, Policy.OPT}:
        raise ValueError(f"--mrc draws lru and opt curves, not {args.policy}")
    if args.points < 1:
        raise ValueError(f"--points must be >= 1, got {args.points}")
    unique = int(np.unique(trace).size)
    capacities = _parse_capacities(args.capacities, unique)
    lru = lru_mrc(trace) if Policy.LRU in wanted else None
    opt = opt_mrc(trace, capacities) if Policy.OPT in wanted else None
    if args.json:
        out = {"lookups": int(trace.size), "unique_ids": unique}
        if lru is not None:
            out["lru"] = lru.to_rows()
        if opt is not None:
            out["opt"] = opt.to_rows()
        print(json.dumps(out))
        return 0
    print(f"{trace.size:,} lookups, {unique:,} unique ids")
    shown = set(_spaced(unique, args.points)) if lru is not None else set()
    shown |= set(opt.capacities.tolist()) if opt is not None else set()
    opt_hits = dict(zip(opt.capacities.tolist(), opt.hits.tolist())) if opt is not None else {}
    print(f"{'capacity':>10}  {'lru hits':>12}  {'lru rate':>8}  {'opt hits':>12}  {'opt rate':>8}")
    for c in sorted(shown):
        row = f"{c:>10}"
        if lru is not None:
            h = lru.hits_at(c)
            row += f"  {h:>12}  {_rate(h, trace.size):>8}"
        else:
            row += f"  {'':>12}  {'':>8}"
        if c in opt_hits:
            row += f"  {opt_hits[c]:>12}  {_rate(opt_hits[c], trace.size):>8}"
        print(row)
    if lru is not None:
        print(f"(LRU is known at every capacity 1..{unique:,}; --json prints all of them)")
    return 0


def _parse_capacities(text: str | None, unique: int) -> list[int]:
    if text is None:
        return _spaced(unique, 8)
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--capacities must be comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"--capacities must be integers >= 1, got {text!r}")
    return values


def _spaced(unique: int, points: int) -> list[int]:
    """Up to `points` capacities spaced evenly on a log scale from 1 to `unique`."""
    if unique < 1:
        return [1]
    return sorted({int(round(x)) for x in np.geomspace(1, unique, num=points)})


def _rate(hits: int, lookups: int) -> str:
    return f"{hits / lookups:.4f}" if lookups else "-"
