"""What a busy neighbour does to each trainer: the same runs alone and beside a process that spins.

    .venv/bin/python benchmarks/bench_neighbour.py [--profile small] [--steps 60] [--rounds 3]
        [--trainers gpu-only,hybrid,scratchpipe] [--json FILE]

On a CPU-only machine the "device" is the CPU: gpu-only and hybrid run on one core (the kit's
`cpu_threads` = 1), while ScratchPipe runs Train on one core and its host stages (Plan, Collect,
Write-back) on another, in a process of their own. On a 2-core machine that second core is all
there is: a neighbour that keeps one core busy takes half of it from ScratchPipe's host stages and
from Train in turn, while the one-core trainers only share their core now and then. So
scratchpipe / gpu-only is about 1 on a quiet 2-core machine and well below 1 beside a busy process.

Rounds alternate quiet and busy (and the trainers within each), the median round is reported.
The neighbour is a plain Python loop in a child process (`--busy N`: N of them). Run it on an
otherwise quiet machine: other load makes the "quiet" rows busy too.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys

from scratchkit.measure.bench import run_bench
from scratchkit.measure.record import RunRecord, add_record_option
from scratchkit.profiles import get_profile


def spin() -> None:
    while True:
        pass


def measure(config, trainers, steps: int, busy: int) -> dict[str, float]:
    """samples/s of each trainer, with `busy` spinning processes beside it."""
    spinners = [multiprocessing.get_context("spawn").Process(target=spin, daemon=True) for _ in range(busy)]
    for p in spinners:
        p.start()
    try:
        return {r.trainer: r.samples_per_s for r in run_bench(config, trainers, steps, warmup=3)}
    finally:
        for p in spinners:
            p.terminate()
            p.join()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="small")
    parser.add_argument("--scale", type=float, default=None)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", type=int, default=1, help="spinning processes beside the busy runs")
    parser.add_argument("--trainers", default="gpu-only,hybrid,scratchpipe")
    parser.add_argument("--json", default=None)
    add_record_option(parser, "neighbour")
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    trainers = [t.strip() for t in args.trainers.split(",")]
    config = get_profile(args.profile, scale=args.scale)
    runs: dict[str, list[dict[str, float]]] = {"quiet": [], "busy": []}
    for r in range(args.rounds):
        for mode in ("quiet", "busy") if r % 2 == 0 else ("busy", "quiet"):
            print(f"round {r + 1}/{args.rounds}: {mode}", file=sys.stderr)
            runs[mode].append(measure(config, trainers, args.steps, args.busy if mode == "busy" else 0))
    rows = []
    for mode, rounds in runs.items():
        for t in trainers:
            rows.append(
                {
                    "mode": mode,
                    "trainer": t,
                    "samples_per_s": statistics.median(x[t] for x in rounds),
                    "ratio_to_first": statistics.median(x[t] / x[trainers[0]] for x in rounds),
                }
            )
    print(
        f"{args.profile}: {args.steps} steps x {args.rounds} rounds, busy = {args.busy} spinning process(es); medians"
    )
    print(f"{'mode':6s} {'trainer':12s} {'samples/s':>10s} {'/' + trainers[0]:>10s}")
    for row in rows:
        print(f"{row['mode']:6s} {row['trainer']:12s} {row['samples_per_s']:10.0f} {row['ratio_to_first']:10.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"profile": args.profile, "steps": args.steps, "rounds": args.rounds, "busy": args.busy, "rows": rows},
                f,
                indent=1,
            )
    record.keep(
        args.record,
        {
            "profile": args.profile,
            "steps": args.steps,
            "rounds": args.rounds,
            "busy": args.busy,
            "medians": {f"{r['mode']} {r['trainer']}": r for r in rows},
        },
    )


if __name__ == "__main__":
    main()
