"""Sharded training on this machine: samples/s at 1, 2 and 4 ranks, side by side, in one run.

Each round runs, one after another, the one-process trainer and `scratchkit bench --world-size N`
for N in --ranks (gloo, every rank a process of this machine), each trainer on the same data, and
prints per case the median samples/s over rounds and the median of each round's ratio to the
1-rank job (cases measured seconds apart, so the machine's drift mostly cancels).

Scaling is weak by default, as production scales: every rank trains the profile's batch B, so N
ranks train global batches of N*B (`--strong`: the global batch stays B, each rank trains B/N).

What the figures mean on a small machine. This machine has os.cpu_count() cores; N ranks are N
processes, and a ScratchPipe rank forks a host process of its own, so 2 ranks of ScratchPipe are
4 busy processes. Past the core count, ranks take turns on the cores, and every collective waits
for the slowest: samples/s then measures the overhead of sharding (exchanges, the dense
all-gather, processes taking turns), not what N machines would do. The cost model
(scratchkit.distributed.sharded_cost) projects that.

    python benchmarks/bench_distributed.py --quick                  # a smoke run
    python benchmarks/bench_distributed.py --rounds 3 --steps 40    # the figures in docs/distributed.md
    python benchmarks/bench_distributed.py --projection             # the cost model's, 1 to 128 GPUs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from scratchkit.commands.bench import bench_argv, bench_command
from scratchkit.distributed.launch import launch
from scratchkit.distributed.sharded_cost import Links, scaling
from scratchkit.measure.record import RunRecord, add_record_option
from scratchkit.profiles import get_profile


def one_process(args, trainers: str) -> dict[str, float]:
    done = subprocess.run(
        bench_command(args.profile, trainers, args.steps, args.warmup), capture_output=True, text=True, check=True
    )
    return {r["trainer"]: r["samples_per_s"] for r in json.loads(done.stdout)}


def sharded(args, trainers: str, ranks: int) -> dict[str, float]:
    batch = get_profile(args.profile).data.batch_size * (1 if args.strong else ranks)
    flags = ("--batch-size", str(batch), "--sharding", args.sharding)
    result = launch(bench_argv(args.profile, trainers, args.steps, args.warmup, *flags), ranks)
    if result.returncode:
        raise SystemExit(f"{ranks} ranks failed: {result.failure}")
    return {r["trainer"]: r["samples_per_s"] for r in json.loads(result.output)}


def projection(args) -> None:
    """The sharded cost model for the profile: each trainer, both shardings, the kit's exchanges
    and TorchRec's traffic, 1 to 128 GPUs (8 per server)."""
    config = get_profile(args.profile)
    links = Links()
    print(
        f"profile {args.profile}, batch {config.data.batch_size} per GPU; {links.gpus_per_server} GPUs a "
        f"server, NVLink {links.nvlink_bw / 1e9:.0f} GB/s, NIC {links.nic_bw / 1e9:.0f} GB/s per GPU"
    )
    print(
        f"{'trainer':12s} {'sharding':8s} {'GPUs':>5s} {'servers':>7s} {'compute ms':>10s} {'kit ms':>8s} "
        f"{'kit samples/s':>14s} {'KiB sent':>9s} {'TorchRec ms':>11s} {'TorchRec KiB':>12s}"
    )
    for trainer in args.trainers.split(","):
        kit = scaling(config, trainer, links=links)
        torchrec = scaling(config, trainer, links=links, torchrec=True)
        for k, t in zip(kit, torchrec):
            print(
                f"{trainer:12s} {k.sharding:8s} {k.gpus:5d} {k.servers:7d} {1e3 * k.compute_seconds:10.3f} "
                f"{1e3 * k.step_seconds:8.3f} {k.samples_per_s:14,.0f} {sum(k.sent_bytes.values()) / 1024:9,.0f} "
                f"{1e3 * t.step_seconds:11.3f} {sum(t.sent_bytes.values()) / 1024:12,.0f}"
            )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="small")
    parser.add_argument("--trainers", default="hybrid,scratchpipe")
    parser.add_argument("--ranks", default="1,2,4", help="world sizes (default 1,2,4)")
    parser.add_argument("--sharding", default="row")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--strong", action="store_true", help="keep the global batch fixed")
    parser.add_argument("--quick", action="store_true", help="1 round of 10 steps")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--projection", action="store_true", help="print the cost model's projection only")
    add_record_option(parser, "distributed")
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    if args.projection and args.record:
        parser.error("--record keeps a measured run; --projection measures nothing")
    if args.projection:
        projection(args)
        return 0
    if args.quick:
        args.rounds, args.steps, args.warmup = 1, 10, 2
    trainers = args.trainers.split(",")
    worlds = [int(n) for n in args.ranks.split(",")]
    cases = ["1 process"] + [f"{n} ranks" for n in worlds]
    figures = {c: {t: [] for t in trainers} for c in cases}
    for _ in range(args.rounds):
        for case in cases:
            got = (
                one_process(args, args.trainers)
                if case == "1 process"
                else sharded(args, args.trainers, int(case.split()[0]))
            )
            for t in trainers:
                figures[case][t].append(got[t])
    base = f"{worlds[0]} ranks"
    scaling = "strong: global batch B" if args.strong else "weak: B per rank, N*B global"
    print(
        f"profile {args.profile}, {args.sharding}-wise, {scaling}; {args.steps} timed steps x "
        f"{args.rounds} round(s); this machine: {os.cpu_count()} cores (shared)"
    )
    print("case         " + "".join(f"{t + ' samples/s':>24s}{'/' + base:>10s}" for t in trainers))
    table = {}
    for case in cases:
        cells = ""
        for t in trainers:
            median = statistics.median(figures[case][t])
            ratio = statistics.median(a / b for a, b in zip(figures[case][t], figures[base][t]))
            table.setdefault(case, {})[t] = {"samples_per_s": median, "ratio": ratio}
            cells += f"{median:>24,.0f}{ratio:>10.2f}"
        print(f"{case:12s} {cells}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {
                    "profile": args.profile,
                    "sharding": args.sharding,
                    "strong": args.strong,
                    "steps": args.steps,
                    "rounds": args.rounds,
                    "cores": os.cpu_count(),
                    "figures": table,
                    "raw": figures,
                },
                out,
                indent=1,
            )
    record.keep(
        args.record,
        {
            "profile": args.profile,
            "sharding": args.sharding,
            "scaling": scaling,
            "steps": args.steps,
            "rounds": args.rounds,
            "cores": os.cpu_count(),
            "samples/s (median) and ratio to " + base: table,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
