"""`scratchkit simulate --mrc`: LRU hits at every capacity (exact or SHARDS-sampled), OPT at a few.

    scratchkit simulate --trace ids.npy --mrc                       # LRU curve + OPT at 8 sizes
    scratchkit simulate --trace ids.npy --mrc --sample 0.1 --vs-exact --json

The LRU curve streams the `.npy` (memory-mapped, a chunk at a time, a progress bar on a terminal),
so its memory follows the distinct ids, not the trace; OPT needs the whole future and loads it.
With `--sample R` (fixed rate) or `--sample-size S` (at most S ids; starts at R, default 1) the
LRU curve is SHARDS's estimate; `--vs-exact` computes the exact curve too and reports the mean
and largest hit-rate error at capacities >= 1/R, where the sample is to be trusted.
"""

from __future__ import annotations

import json
import math

import numpy as np

# The two POLICIES entries whose whole curves --mrc draws (sim.lru_mrc, sim.opt_mrc)
LRU, OPT = "lru", "opt"


def add_arguments(p) -> None:
    p.add_argument(
        "--capacities", help="--mrc: comma-separated capacities for OPT (default: 8 spaced from 1 to the unique ids)"
    )
    p.add_argument(
        "--points", type=int, default=24, help="--mrc table: rows shown (default 24; --json prints every capacity)"
    )
    p.add_argument(
        "--sample",
        type=float,
        help="--mrc: SHARDS sampling rate R in (0, 1] for the LRU curve (about 1/R times less work)",
    )
    p.add_argument(
        "--sample-size",
        type=int,
        help="--mrc: SHARDS with at most this many ids kept (constant memory); starts at --sample",
    )
    p.add_argument(
        "--vs-exact", action="store_true", help="--mrc with --sample: also compute the exact curve and report the error"
    )


def wanted_curves(args) -> set[str]:
    """The curves the flags ask for, or the flag that does not belong (before any trace is read)."""
    from scratchkit.sim import policy_name

    _refuse_stray(args)
    sampled = args.sample is not None or args.sample_size is not None
    if args.policy is None:
        wanted = {LRU} if sampled else {LRU, OPT}
    else:
        wanted = {policy_name(args.policy)}
    if not wanted <= {LRU, OPT}:
        raise ValueError(f"--mrc draws {LRU} and {OPT} curves, not {args.policy}")
    if sampled and OPT in wanted:
        raise ValueError(
            "--sample and --sample-size sample the LRU curve; OPT needs the whole "
            "trace (drop --sample, or use --policy lru)"
        )
    return wanted


def run_curves(args) -> int:
    wanted = wanted_curves(args)
    lru, exact, error = _lru_curves(args) if LRU in wanted else (None, None, None)
    unique = (exact or lru).unique_ids if lru is not None else None
    opt = _opt_curve(args, unique) if OPT in wanted else None
    unique = opt.unique_ids if unique is None else unique
    lookups = (lru or opt).lookups
    if args.json:
        print(_dumps(_json(lookups, unique, lru, opt, error, args)))
        return 0
    _table(lookups, unique, lru, opt, args.points)
    if error is not None:
        print(
            f"sampled vs exact LRU hit rate at {error['from_capacity']:,}..{error['to_capacity']:,}"
            f" rows: mean |error| {error['mae']:.5f}, largest {error['max']:.5f}"
        )
    return 0


def _refuse_stray(args) -> None:
    stray = [
        flag
        for flag, value in (
            ("--capacity", args.capacity),
            ("--batch-size", args.batch_size),
            ("--depth", args.depth),
            ("--horizon", args.horizon),
            ("--ways", args.ways),
            ("--prefix-share", args.prefix_share),
        )
        if value is not None
    ]
    if stray:
        raise ValueError(f"--mrc does not take {', '.join(stray)}")
    if args.vs_exact and args.sample is None and args.sample_size is None:
        raise ValueError("--vs-exact compares a sampled curve with the exact one: add --sample or --sample-size")


def _lru_curves(args):
    """(the LRU curve asked for, the exact one if computed, the error dict if both)."""
    from scratchkit.commands.common import progress_counter
    from scratchkit.sim import curve_error, profile_lru, trace_chunks
    from scratchkit.sim.sampling import smallest_trusted_capacity

    total = trace_chunks(args.trace).total
    sampled = args.sample is not None or args.sample_size is not None
    with progress_counter(total, "lru curve (sampled)" if sampled else "lru curve") as bar:
        lru = profile_lru(args.trace, rate=args.sample, size=args.sample_size, on_chunk=bar.update)
    if not sampled:
        return lru, lru, None
    if not args.vs_exact:
        return lru, None, None
    with progress_counter(total, "lru curve (exact)") as bar:
        exact = profile_lru(args.trace, on_chunk=bar.update)
    return lru, exact, curve_error(lru, exact, smallest_trusted_capacity(lru.rate))


def _opt_curve(args, unique: int | None):
    from scratchkit.data.trace import read_trace
    from scratchkit.sim import opt_mrc

    trace = read_trace(args.trace)
    if unique is None:
        unique = int(np.unique(trace).size)
    return opt_mrc(trace, _parse_capacities(args.capacities, unique))


def _json(lookups, unique, lru, opt, error, args) -> dict:
    out = {"lookups": int(lookups), "unique_ids": int(unique)}
    if lru is not None:
        out["lru"] = lru
        if lru.rate < 1.0 or args.sample_size is not None:
            out["sample"] = {
                "rate": lru.rate,
                "requested_rate": args.sample,
                "size": args.sample_size,
                "estimated_unique_ids": lru.unique_ids,
            }
    if error is not None:
        out["error_vs_exact"] = error
    if opt is not None:
        out["opt"] = opt
    return out


def _dumps(out: dict) -> str:
    """`json.dumps(out)`, with each `Curve` written as `Curve.to_rows()` would be, but without
    building a dict per capacity (a million of them took 2 of the command's 7 s)."""
    from scratchkit.sim import Curve

    def rows(curve) -> str:
        lines = zip(curve.capacities.tolist(), curve.hits.tolist(), curve.hit_rate.tolist())
        return "[" + ", ".join(f'{{"capacity": {c}, "hits": {h}, "hit_rate": {r!r}}}' for c, h, r in lines) + "]"

    def text(value) -> str:
        return rows(value) if isinstance(value, Curve) else json.dumps(value)

    return "{" + ", ".join(f"{json.dumps(key)}: {text(value)}" for key, value in out.items()) + "}"


def _table(lookups, unique, lru, opt, points) -> None:
    print(f"{lookups:,} lookups, {unique:,} unique ids")
    if lru is not None and lru.rate < 1.0:
        print(
            f"LRU sampled by SHARDS at rate {lru.rate:.4g}: estimates, trusted from "
            f"{math.ceil(1 / lru.rate):,} rows ({lru.unique_ids:,} unique ids estimated)"
        )
    shown = set(_spaced(unique, points)) if lru is not None else set()
    shown |= set(opt.capacities.tolist()) if opt is not None else set()
    opt_hits = dict(zip(opt.capacities.tolist(), opt.hits.tolist())) if opt is not None else {}
    print(f"{'capacity':>10}  {'lru hits':>12}  {'lru rate':>8}  {'opt hits':>12}  {'opt rate':>8}")
    for c in sorted(shown):
        row = f"{c:>10}"
        if lru is not None:
            h = int(lru.hits_over([c])[0])
            row += f"  {h:>12}  {_rate(h, lookups):>8}"
        else:
            row += f"  {'':>12}  {'':>8}"
        if c in opt_hits:
            row += f"  {opt_hits[c]:>12}  {_rate(opt_hits[c], lookups):>8}"
        print(row)
    if lru is not None and lru.rate < 1.0:
        print(f"(LRU is estimated at every capacity, a step function; --json prints its {lru.capacities.size:,} steps)")
    elif lru is not None:
        print(f"(LRU is known at every capacity 1..{lru.unique_ids:,}; --json prints all of them)")


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
