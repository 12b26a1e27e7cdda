"""How quiet is this machine? The same small pieces of work timed again and again, and how far
their times spread: the resolution any measurement here (a validation of the cost model, an A/B)
can have, with no model and no kit code beyond one table-batched lookup in it.

Three probes, taken in turn every `--every` seconds for `--seconds`:

    memory    np.take of 50k random float32 from a 64 MiB array (random reads, beyond the caches)
    compute   a [256, 64] @ [64, 64] matmul, 200 times (in the core, no memory traffic)
    lookup    the kit's table-batched lookup of 8 tables of 16k rows of 256 B, 4k lookups each
              (what the embedding stages of the issue-12 profiles spend their time in)

For each probe it prints the median time and how far the medians of windows of 0.1, 1 and 10 s
spread (the 10th to the 90th percentile, as a ratio): a quiet machine stays within a few percent
at every window; on this project's VM the memory probe's 1 s windows spread 1.2-1.5x while the
compute probe's stayed near 1.05x (docs/costmodel.md). A stage held to 25% cannot be checked on a
machine whose windows of its length spread further than that.

    python benchmarks/bench_machine.py                 # 60 s
    python benchmarks/bench_machine.py --seconds 20 --json machine.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from scratchkit.measure.record import RunRecord, add_record_option

WINDOWS = (0.1, 1.0, 10.0)


def probes() -> dict:
    """name -> a function that runs the probe once (its inputs made here, once)."""
    from scratchkit.embedding.table_batched import pooled_lookup_tables

    rng = np.random.default_rng(0)
    array, picks, out = (
        rng.random(2**24, dtype=np.float32),
        rng.integers(0, 2**24, 50_000),
        np.empty(50_000, np.float32),
    )
    a, w = torch.randn(256, 64), torch.randn(64, 64)
    tables = [torch.randn(2**14, 64) for _ in range(8)]
    ids = [torch.from_numpy(rng.integers(0, 2**14, 4096)) for _ in tables]
    offsets = [torch.arange(0, 4096, 8)] * len(tables)

    def compute():
        for _ in range(200):
            torch.mm(a, w)

    return {
        "memory": lambda: np.take(array, picks, out=out),
        "compute": compute,
        "lookup": lambda: pooled_lookup_tables(tables, ids, offsets),
    }


def spread(times: np.ndarray, stamps: np.ndarray, window: float) -> float | None:
    """The 90th over the 10th percentile of the medians of `window`-second windows (None: < 3)."""
    bins = ((stamps - stamps[0]) // window).astype(np.int64)
    medians = [float(np.median(times[bins == b])) for b in np.unique(bins)]
    if len(medians) < 3:
        return None
    return float(np.percentile(medians, 90) / np.percentile(medians, 10))


def measure(seconds: float, every: float) -> dict:
    torch.set_num_threads(1)
    runs = probes()
    for run in runs.values():  # first runs: code and pages
        run()
    samples = {name: ([], []) for name in runs}
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            samples[name][0].append(time.perf_counter() - start)
            samples[name][1].append(start)
        time.sleep(every)
    report = {}
    for name, (times, stamps) in samples.items():
        times, stamps = np.array(times), np.array(stamps)
        report[name] = {
            "median_s": float(np.median(times)),
            "samples": len(times),
            "spread": {f"{w:g} s": spread(times, stamps, w) for w in WINDOWS},
        }
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to sample (default 60)")
    parser.add_argument("--every", type=float, default=0.01, help="pause between rounds of the probes (default 0.01 s)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the report here")
    add_record_option(parser, "machine")
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    if args.seconds <= 0 or args.every < 0:
        parser.error(f"--seconds must be > 0 and --every >= 0, got {args.seconds} and {args.every}")
    report = measure(args.seconds, args.every)
    print(f"{'probe':8s} {'median':>10s}  " + "  ".join(f"{f'spread, {w:g} s windows':>22s}" for w in WINDOWS))
    for name, r in report.items():
        cells = ["-" if v is None else f"{v:.2f}x" for v in r["spread"].values()]
        print(f"{name:8s} {1e6 * r['median_s']:8.1f} us  " + "  ".join(f"{c:>22s}" for c in cells))
    print(
        f"{args.seconds:g} s, {report['memory']['samples']} samples a probe; spread: the 90th over the 10th "
        "percentile of the windows' medians (a quiet machine: near 1.00x)"
    )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    record.keep(args.record, {"seconds": args.seconds, "probes": report})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
