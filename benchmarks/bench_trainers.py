"""Trainers side by side, in one run: samples/s measured here and projected to GPU servers.

For the `small` and `criteo-like` profiles, each at low (Zipf 0.5) and high (Zipf 1.2) locality,
train gpu-only, hybrid, lru and scratchpipe on the same batches (scratchkit.measure.bench.run_bench),
and print per case:

- measured samples/s (the median round) and the ratio to gpu-only: the median over rounds of each
  round's ratio, trainers measured seconds apart (on a CPU-only machine "device" is the CPU, so
  gpu-only is the kit's upper bound here, and scratchpipe/gpu-only measures the pipeline's overhead);
- the cost model's projection (scratchkit.projection.project) of the same work per step, rows fetched and
  written back as measured, on the GPU server: samples/s, the ratio to gpu-only and the stage
  that bounds each trainer.

Cache size: `(D+1)*B*L` rows per table unless --capacity/--load-factor say otherwise. That is
ScratchPipe's worst-case minimum at depth D (no reuse between the batches in flight), and more
than one batch's working set, which lru needs: every trainer runs at the same capacity.

Machines here are noisy: compare ratios within one run, never absolute numbers across runs.

    python benchmarks/bench_trainers.py --quick          # a smoke run, ~10 s on 2 cores
    python benchmarks/bench_trainers.py                  # 3 rounds of 50 steps, ~30 s
    python benchmarks/bench_trainers.py --steps 150 --rounds 5   # the README's figures
"""

from __future__ import annotations

import argparse
import json
import sys

from scratchkit.measure.bench import run_bench
from scratchkit.config import CacheParams
from scratchkit.projection.project import project_bench
from scratchkit.measure.record import RunRecord, add_record_option
from scratchkit.profiles import get_profile
from scratchkit.designs import BASELINE, UPPER_BOUND
from scratchkit.designs.demand_cache import LRU
from scratchkit.designs.scratchpipe import SCRATCHPIPE

CASES = [("small", 0.5), ("small", 1.2), ("criteo-like", 0.5), ("criteo-like", 1.2)]
TRAINERS = [UPPER_BOUND, BASELINE, LRU.name, SCRATCHPIPE.name]
GPU_SERVERS = ["v100-pcie3", "h100-pcie5"]


def case_config(profile: str, zipf: float, args):
    config = get_profile(profile, zipf=zipf)
    d = config.data
    if args.capacity is None and args.load_factor is None:
        cache = CacheParams(capacity=(args.depth + 1) * d.batch_size * d.pooling, depth=args.depth)
    else:
        cache = CacheParams(capacity=args.capacity, load_factor=args.load_factor, depth=args.depth)
    return config.replace(cache=cache)


def run_case(profile: str, zipf: float, trainers: list[str], args) -> dict:
    config = case_config(profile, zipf, args)
    rounds = [
        run_bench(config, trainers, args.steps, warmup=args.warmup, device=args.device) for _ in range(args.rounds)
    ]
    # the median round of each trainer: robust to one noisy round
    middle = len(rounds) // 2
    results = [sorted((rnd[i] for rnd in rounds), key=lambda r: r.samples_per_s)[middle] for i in range(len(trainers))]
    # ratios: the median over rounds of each round's ratio, so that each ratio compares trainers
    # measured seconds apart (this machine's speed drifts by 10% over minutes)
    ratios = [
        sorted(rnd[i].samples_per_s / rnd[0].samples_per_s for rnd in rounds)[middle] for i in range(len(trainers))
    ]
    projections = project_bench(config, results, ["this-cpu", *GPU_SERVERS])
    rows = []
    for r, ratio, projected in zip(results, ratios, projections):
        rows.append(
            {
                "trainer": r.trainer,
                "samples_per_s": r.samples_per_s,
                "ratio_to_gpu_only": ratio,
                "hit_rate": r.hit_rate,
                "projected": {
                    p: {"samples_per_s": x.samples_per_s, "ratio_to_gpu_only": x.ratio, "bound_stage": x.bound_stage}
                    for p, x in projected.items()
                },
            }
        )
    return {
        "profile": profile,
        "zipf": zipf,
        "capacity": config.cache.capacity,
        "depth": config.cache.depth,
        "steps": args.steps,
        "rounds": args.rounds,
        "trainers": rows,
    }


def print_case(case: dict) -> None:
    print(
        f"\n== {case['profile']}, zipf {case['zipf']}: capacity {case['capacity']} rows/table, "
        f"depth {case['depth']}, {case['steps']} timed steps x {case['rounds']} round(s)"
    )
    head = f"{'trainer':12s} {'samples/s':>10s} {'/gpu-only':>9s} {'hit rate':>8s}"
    for p in GPU_SERVERS:
        head += f" | {p + ' proj':>16s} {'/gpu-only':>9s} {'bound':>18s}"
    print(head)
    for row in case["trainers"]:
        hit = "-" if row["hit_rate"] is None else f"{row['hit_rate']:.3f}"
        line = f"{row['trainer']:12s} {row['samples_per_s']:10,.0f} {row['ratio_to_gpu_only']:9.2f} {hit:>8s}"
        for p in GPU_SERVERS:
            x = row["projected"][p]
            line += f" | {x['samples_per_s']:16,.0f} {x['ratio_to_gpu_only']:9.2f} {x['bound_stage']:>18s}"
        print(line)


def summary(cases: list[dict], trainers: list[str]) -> None:
    target = "scratchpipe" if "scratchpipe" in trainers else trainers[-1]
    print(f"\n== {target}/gpu-only: measured here, and projected for GPU servers")
    print(f"{'case':24s} {'measured':>9s} " + " ".join(f"{p:>11s}" for p in GPU_SERVERS) + f" {'vs hybrid':>10s}")
    for case in cases:
        rows = {r["trainer"]: r for r in case["trainers"]}
        t = rows[target]
        vs_hybrid = t["ratio_to_gpu_only"] / rows["hybrid"]["ratio_to_gpu_only"] if "hybrid" in rows else float("nan")
        print(
            f"{case['profile'] + ' zipf ' + str(case['zipf']):24s} {t['ratio_to_gpu_only']:9.2f} "
            + " ".join(f"{t['projected'][p]['ratio_to_gpu_only']:11.2f}" for p in GPU_SERVERS)
            + f" {vs_hybrid:10.2f}"
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 timed steps, 2 warm-up, one round")
    parser.add_argument("--steps", type=int, default=50, help="timed steps per trainer (default 50)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="repeat each case; report the median round and ratio (default 3)"
    )
    parser.add_argument("--capacity", type=int, default=None, help="cache/scratchpad rows per table")
    parser.add_argument("--load-factor", type=float, default=None, help="cache rows as a share of each table")
    parser.add_argument("--depth", type=int, default=2, help="ScratchPipe look-ahead depth D (default 2)")
    parser.add_argument("--device", default=None, help="torch device (default: cuda if present, else cpu)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the results as JSON")
    add_record_option(parser, "trainers")
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    if args.quick:
        args.steps, args.warmup, args.rounds = 10, 2, 1
    for name in ("steps", "rounds"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive, got {getattr(args, name)}")

    trainers = TRAINERS
    cases = []
    for profile, zipf in CASES:
        try:
            case = run_case(profile, zipf, trainers, args)
        except ValueError as error:  # e.g. a capacity too small for this case's working sets
            print(f"\n== {profile}, zipf {zipf}: skipped: {error}")
            continue
        print_case(case)
        cases.append(case)
    if cases:
        summary(cases, trainers)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(cases, f, indent=2)
    record.keep(args.record, {f"{c['profile']}, zipf {c['zipf']}": case_figures(c) for c in cases})
    return 0


def case_figures(case: dict) -> dict:
    """One case's figures for its record: a row per trainer, its projections flattened."""
    return {
        row["trainer"]: {
            "samples/s": row["samples_per_s"],
            "/gpu-only": row["ratio_to_gpu_only"],
            "hit rate": row["hit_rate"],
            **{f"{p} /gpu-only": x["ratio_to_gpu_only"] for p, x in row["projected"].items()},
        }
        for row in case["trainers"]
    }


if __name__ == "__main__":
    sys.exit(main())
