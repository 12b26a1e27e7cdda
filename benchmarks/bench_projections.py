"""Projected samples/s of the embedding-bound profiles at full size on every GPU server, each
trainer against its peers: "x hybrid" (the baseline at its best, its host work on every core the
server gives a GPU, capped by the host's memory; "x hybrid_socket": on a whole socket of it), "x
lru-device" (the backward-looking cache the ScratchPipe paper measured against: filled on demand
inside the step, bookkept on the device) and "x prefetch-lru-device" (the production peer: an LRU
cache filled one batch ahead, bookkept on the device, as FBGEMM's cache under TorchRec's prefetch
pipeline; `lru` and `prefetch-lru` are those caches bookkept in NumPy on one host core).

A laptop cannot train 8 tables of a million rows, so nothing here trains: the cost model
(scratchkit.projection.counters.project_config) takes each profile's working sets from its first
batches and the rows each trainer moves from the kit's own decisions on them (ScratchPipe's
planner, a batch-granular LRU), and prices the step on each GPU server. Then, for the
embedding-bound profile on the H100 server, it says how ScratchPipe (planned on the host,
`scratchpipe`, and on the device, `scratchpipe-device`) stands against its peers and gpu-only,
and whether Plan bounds it.

    python benchmarks/bench_projections.py                     # the four profiles, ~2-3 min on 2 cores
    python benchmarks/bench_projections.py --profiles embedding-bound --batches 8
    python benchmarks/bench_projections.py --profiles embedding-bound --record results/projections.json
    python benchmarks/bench_projections.py --sensitivity [--record results/projection-sensitivity.json]
                                                               # scratchpipe-device's assumptions, one at a time

`--json PATH` writes {profile: {trainer: {server: projection}}}: each projection's samples/s,
bound_stage ("host memory" where the memory cap bounds hybrid), stages, resources, its speed over
each peer's (`x_hybrid`, `x_hybrid_socket`, `x_lru_device`, `x_prefetch_lru_device`: `versus`),
and hybrid's host_threads and host_memory_line_rate, at one GPU's share and under `socket` at a
whole socket; `--record PATH` the same inside a run record (scratchkit/measure/record.py:
command, commit, date, machine).
"""

from __future__ import annotations

import argparse
import json
import time

from dataclasses import replace

from scratchkit.costmodel.hardware import calls_from_ops
from scratchkit.costmodel.servers import SERVERS
from scratchkit.designs import BASELINE, DESIGNS, PEERS, Compared, StepWork, versus
from scratchkit.measure.record import RunRecord
from scratchkit.profiles import get_profile
from scratchkit.projection.counters import project_config, simulated_counters
from scratchkit.projection.machines import get_machine
from scratchkit.projection.project import SOCKET_SHARE, figures, project

PROFILES = ("embedding-bound", "embedding-bound-skewed", "embedding-bound-wide", "criteo-skew")
# every design projected at full size (static and lfu: priced as lru's steps but for the fetch)
TRAINERS = tuple(name for name, d in DESIGNS.items() if d.compared is not Compared.MEASURED)
TARGET = ("embedding-bound", "h100-pcie5")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--scale", type=float, default=None, help="the profiles' scale (default: full size)")
    parser.add_argument("--batches", type=int, default=12, help="batches the counters run over (default 12)")
    parser.add_argument("--json", default=None, metavar="PATH", help="the projections as JSON")
    parser.add_argument(
        "--record",
        default=None,
        metavar="PATH",
        help="the projections in a run record (command, commit, date, machine)",
    )
    parser.add_argument(
        "--sensitivity",
        action="store_true",
        help="scratchpipe-device on the H100 profile with one assumption changed at a time",
    )
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    if args.sensitivity:
        ratios = sensitivity(
            [p.strip() for p in args.profiles.split(",") if p.strip().startswith("embedding-bound")],
            args.batches,
            args.scale,
        )
        if args.record:
            print(f"recorded in {record.write(args.record, ratios)}")
        return 0
    machines = list(SERVERS)
    report = {}
    for name in [p.strip() for p in args.profiles.split(",") if p.strip()]:
        started = time.perf_counter()
        config = get_profile(name, scale=args.scale)
        # the embedding-bound family's tables are alike: one table's rows moved stand for all
        sample = 1 if name.startswith("embedding-bound") else None
        rows = project_config(config, list(TRAINERS), machines, args.batches, sample_tables=sample)
        # the baseline again, its host a whole socket of the same server (x hybrid at both shares)
        (socket,) = project_config(config, [BASELINE], [f"{m}:{SOCKET_SHARE}" for m in machines], 2)
        d = config.data
        print(
            f"\n{name}: {len(d.table_sizes)} tables of up to {max(d.table_sizes):,} rows, batch {d.batch_size}, "
            f"pooling {d.pooling}, dim {config.model.dim}, cache/scratchpad {config.cache.capacity:,} rows a "
            f"table ({time.perf_counter() - started:.0f} s)"
        )
        shown = {m: figures([row[m] for row in rows], socket[f"{m}:{SOCKET_SHARE}"]) for m in machines}
        report[name] = {trainer: {m: shown[m][trainer] for m in machines} for trainer in shown[machines[0]]}
        head = "".join(f"  x {peer}" for peer in PEERS)
        print(
            f"  {'trainer':20s}"
            + "".join(f"{m + ': samples/s' + head + '  bound by':>{37 + len(head)}s}" for m in machines)
        )
        for trainer, by_server in report[name].items():
            print(
                f"  {trainer:20s}"
                + "".join(
                    f"{x['samples_per_s']:>23,.0f}"
                    + "".join(f"{x[versus(peer)]:{len(peer) + 4}.2f}" for peer in PEERS)
                    + f" {x['bound_stage']:>13s}"
                    for x in by_server.values()
                )
            )
        print(
            "  hybrid's host work: "
            + "; ".join(
                f"{m} {x['host_threads']} cores, memory {x['host_memory_line_rate'] / 1e6:,.0f}M lines/s "
                f"(a whole socket: {x[SOCKET_SHARE]['host_threads']} cores, "
                f"{x[SOCKET_SHARE]['samples_per_s']:,.0f} samples/s, {x[SOCKET_SHARE]['bound_stage']})"
                for m, x in report[name][BASELINE].items()
            )
        )
    profile, machine = TARGET
    if profile in report:
        p = {t: report[profile][t][machine] for t in TRAINERS}
        print(f"\nScratchPipe against its peers, {profile} on {machine}:")
        for name in ("scratchpipe", "scratchpipe-device"):
            sp, bound = p[name]["samples_per_s"], p[name]["bound_stage"]
            resources = p[name]["resource_seconds"]
            busiest = max(resources, key=resources.get)
            print(
                f"  {name}: {sp:,.0f} samples/s = "
                + "".join(f"{p[name][versus(peer)]:.2f}x {peer}, " for peer in PEERS)
                + f"{sp / p['gpu-only']['samples_per_s']:.2f}x "
                f"gpu-only; bound by {bound} ({busiest}{', not Plan' if bound != 'plan' else ''}); stages (ms): "
                + ", ".join(f"{k} {1000 * v:.2f}" for k, v in p[name]["stage_seconds"].items())
                + "; resources (ms): "
                + ", ".join(f"{k} {1000 * v:.2f}" for k, v in resources.items())
            )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    if args.record:
        print(f"recorded in {record.write(args.record, report)}")
    return 0


def sensitivity(profiles: list[str], batches: int, scale: float | None) -> dict:
    """scratchpipe-device / gpu-only on h100-pcie5 as profiled, with the link at half its rate
    (random 256 B reads), with 8 us a launch, both, and with no overlap between its stages:
    {profile: {case: {"x_gpu_only": ratio, "bound_stage": stage}}}, printed as it goes."""
    ratios = {}
    machine = get_machine(TARGET[1])
    cases = {
        "as profiled": machine,
        "link at half rate": replace(machine, pcie_bw=machine.pcie_bw / 2),
        "8 us a launch": replace(machine, device_calls=calls_from_ops(8e-6)),
        "both": replace(machine, pcie_bw=machine.pcie_bw / 2, device_calls=calls_from_ops(8e-6)),
    }
    print(f"scratchpipe-device / gpu-only on {machine.name}, one assumption changed at a time")
    for name in profiles:
        config = get_profile(name, scale=scale)
        fetched, written = simulated_counters(config, "scratchpipe-device", batches, sample_tables=1)
        work = StepWork.from_config(config, batches=2).with_counters(fetched, written)
        ratios[name] = {}
        for label, priced_on in cases.items():
            p, g = project("scratchpipe-device", work, priced_on), project("gpu-only", work, priced_on)
            ratios[name][label] = {"x_gpu_only": p.samples_per_s / g.samples_per_s, "bound_stage": p.bound_stage}
            print(f"  {name:24s} {label:20s} {p.samples_per_s / g.samples_per_s:5.2f}x  bound by {p.bound_stage}")
        p, g = project("scratchpipe-device", work, machine), project("gpu-only", work, machine)
        serial = work.batch_size / sum(p.stage_seconds.values())
        ratios[name]["no overlap"] = {"x_gpu_only": serial / g.samples_per_s, "bound_stage": "every stage in turn"}
        print(f"  {name:24s} {'no overlap':20s} {serial / g.samples_per_s:5.2f}x  (every stage one after another)")
    return ratios


if __name__ == "__main__":
    raise SystemExit(main())
