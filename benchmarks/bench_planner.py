"""ScratchPipe's Plan stage alone: the NumPy twin, the C++ loop, and the loop on several cores.

    .venv/bin/python benchmarks/bench_planner.py [--profile embedding-bound] [--scale 1]
        [--batches 40] [--rounds 3] [--setups twin,1x1,1x2,2x2] [--json FILE]

A setup `SxT` plans each table in S stripes (`CacheParams.plan_stripes`) on T threads. Batches are
made once, before timing, and planned from an empty scratchpad; the first `depth + 4` plans (the
scratchpad filling, nothing to evict) are left out. Each setup's rounds alternate with the
others' (ABAB...), and the median round is reported. Per setup:

    ms/batch        wall time to plan one batch (every table)
    cpu ms/batch    CPU time of the process for it (all threads)
    ids/s/core      lookups planned per CPU-second: the rate the cost model's `host_plan_rate`
                    stands for. A GPU server plans a batch in ids / (rate x cores given to Plan).

On a 2-core machine T = 2 takes the core Train would use: this measures Plan alone. Take the
figures on a quiet machine (a busy neighbour halves a core).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from scratchkit.config import VictimPolicy
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.measure.record import RunRecord, add_record_option
from scratchkit.profiles import get_profile
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.scratchpipe.plan_ahead import PlanAhead, PlanSetup


class Batches:
    """The batches made once, served by index: so timing sees planning only."""

    def __init__(self, source, count: int):
        self.table_sizes = source.table_sizes
        self._batches = [source.batch(i) for i in range(count)]

    def __len__(self) -> int:
        return len(self._batches)

    def batch(self, index: int):
        return self._batches[index]


def parse_setup(text: str) -> tuple[str, int, int]:
    """'twin' | 'SxT' -> (engine, stripes, threads)."""
    if text == "twin":
        return "twin", 1, 1
    stripes, _, threads = text.partition("x")
    if not (stripes.isdigit() and threads.isdigit() and int(stripes) >= 1 and int(threads) >= 1):
        raise ValueError(f"a setup is 'twin' or SHARDSxTHREADS, e.g. 2x2; got {text!r}")
    return "native", int(stripes), int(threads)


def plan_all(
    source, config, capacity: int, engine: str, stripes: int, threads: int, skip: int, horizon: int
) -> tuple[float, float, int]:
    """Plan every batch; -> (wall s, cpu s, lookups) over the batches after the first `skip`."""
    sizes, depth = config.data.table_sizes, config.cache.depth
    caps = [min(capacity, n) for n in sizes]
    setup = PlanSetup(
        tuple(sizes),
        tuple(caps),
        depth,
        VictimPolicy.FURTHEST,
        True,
        horizon,
        False,
        tuple(np.full(c, -1, np.int64) for c in caps),
        tuple(np.zeros(c, bool) for c in caps),
        tuple(np.full(c, -1, np.int64) for c in caps),
        threads,
        engine == "native",
        stripes,
    )
    planner = PlanAhead(setup, source)
    wall = cpu = 0.0
    lookups = 0
    for b in range(len(source)):
        w, c = time.perf_counter(), time.process_time()
        planned = planner.plan(b)
        if b >= skip:
            wall += time.perf_counter() - w
            cpu += time.process_time() - c
            lookups += sum(len(ids) for ids in planned.batch.ids)
    return wall, cpu, lookups


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="embedding-bound")
    parser.add_argument("--scale", type=float, default=None)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--setups", default="twin,1x1,1x2,2x2")
    parser.add_argument("--json", default=None, help="write the rows here")
    add_record_option(parser, "planner")
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    setups = [parse_setup(s.strip()) for s in args.setups.split(",")]
    config = get_profile(args.profile, scale=args.scale)
    horizon = 4 * (config.cache.depth + 1)
    print(f"making {args.batches + horizon} batches of {args.profile} ...", file=sys.stderr)
    source = Batches(SyntheticSource(config.data), args.batches + horizon)
    capacity = config.cache.capacity_for(max(config.data.table_sizes))
    most_stripes = max(s for _, s, _ in setups)
    need = max(minimum_capacities(source, config.cache.depth, 0, len(source), most_stripes))
    if capacity < need:
        raise SystemExit(
            f"the profile's capacity {capacity} is below the minimum {need} at "
            f"{most_stripes} stripes: lower --scale or the stripes"
        )
    skip = config.cache.depth + 4
    rounds: dict[str, list[tuple[float, float, int]]] = {}
    for r in range(args.rounds):
        order = setups if r % 2 == 0 else setups[::-1]
        for engine, stripes, threads in order:
            name = "twin" if engine == "twin" else f"{stripes}x{threads}"
            print(f"round {r + 1}/{args.rounds}: {name}", file=sys.stderr)
            rounds.setdefault(name, []).append(
                plan_all(source, config, capacity, engine, stripes, threads, skip, horizon)
            )
    planned = len(source) - skip
    rows = []
    for name, runs in rounds.items():
        wall = statistics.median(w for w, _, _ in runs)
        cpu = statistics.median(c for _, c, _ in runs)
        lookups = runs[0][2]
        rows.append(
            {
                "setup": name,
                "ms_per_batch": 1e3 * wall / planned,
                "cpu_ms_per_batch": 1e3 * cpu / planned,
                "lookups_per_batch": lookups / planned,
                "ids_per_s_per_core": lookups / cpu,
            }
        )
    base = next((r for r in rows if r["setup"] == "twin"), rows[0])
    print(
        f"{args.profile} (scale {args.scale or 'default'}), capacity {capacity}, depth "
        f"{config.cache.depth}, horizon {horizon}; {planned} batches of "
        f"{rows[0]['lookups_per_batch']:,.0f} lookups; medians of {args.rounds} rounds"
    )
    print(f"{'setup':>6} {'ms/batch':>9} {'cpu ms/batch':>13} {'ids/s/core':>12} {'speed-up':>9}")
    for row in rows:
        print(
            f"{row['setup']:>6} {row['ms_per_batch']:9.1f} {row['cpu_ms_per_batch']:13.1f} "
            f"{row['ids_per_s_per_core'] / 1e6:10.2f} M {base['ms_per_batch'] / row['ms_per_batch']:8.1f}x"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"profile": args.profile, "scale": args.scale, "rows": rows}, f, indent=1)
    record.keep(
        args.record,
        {
            "profile": args.profile,
            "scale": args.scale,
            "capacity": capacity,
            "rounds": args.rounds,
            "setups": {r["setup"]: r for r in rows},
        },
    )


if __name__ == "__main__":
    main()
