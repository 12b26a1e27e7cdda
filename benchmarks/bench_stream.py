"""Profiling a trace larger than you would hold in memory: time and peak memory of the streamed
LRU curve, exact and SHARDS-sampled, and what they come to at Criteo Kaggle's size.

    .venv/bin/python benchmarks/bench_stream.py                    # 100M accesses (~10 min)
    .venv/bin/python benchmarks/bench_stream.py --accesses 2000000 # a quick look

The trace is Criteo-shaped: each sample looks up one id in each of the 26 tables, whose sizes
are Criteo Kaggle's (`profiles.CRITEO_KAGGLE_CARDINALITIES`, 33.8M rows in all), ids Zipf
`--zipf` within each table. It is written to a `.npy` (not timed) and each mode then runs in a
fresh process, which streams it from disk and reports its own peak resident memory
(VmHWM); a process that only reads the trace through the same chunks is the baseline.
Extrapolation to the full
log (45,840,617 samples x 26 = 1.19 billion accesses): time per access times 1.19 billion, and
memory above the baseline per distinct id kept times the ids kept there (all 33.8M rows for the
exact curve, R x 33.8M at rate R, the fixed size itself). Time per access grows slowly with the
distinct ids kept (the hash map and tree leave the caches): the figure is a floor.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from scratchkit.sim import curve_error
from scratchkit.sim.sampling import smallest_trusted_capacity

CRITEO_SAMPLES = 45_840_617  # Criteo Kaggle's training log (Display Advertising Challenge)
TABLES = 26
MODES = {"read": {}, "exact": {}, "rate-0.01": {"rate": 0.01}, "size-1M": {"size": 1_000_000}}


def write_trace(path: str, accesses: int, zipf: float, seed: int, chunk_samples: int = 1 << 18) -> int:
    """Criteo-shaped ids, written a chunk of samples at a time; returns the distinct rows in all."""
    from scratchkit.profiles import CRITEO_KAGGLE_CARDINALITIES as sizes

    samples = accesses // TABLES
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.int64, shape=(samples * TABLES,))
    rng = np.random.default_rng(seed)
    for start in range(0, samples, chunk_samples):
        m = min(chunk_samples, samples - start)
        ids = np.empty((m, TABLES), dtype=np.int64)  # [samples, tables], sample-major
        for t, size in enumerate(sizes):
            ids[:, t] = rng.zipf(zipf, m) % size + offsets[t]
        out[start * TABLES : (start + m) * TABLES] = ids.ravel()
    out.flush()
    del out
    return int(sum(sizes))


def child(mode: str, path: str, keep: str) -> dict:
    """Run one mode in this process; report seconds, distinct ids (estimated) and peak RSS, and
    save the curve to `keep` (.npz) for the parent to compare."""
    from scratchkit.sim import native, profile_lru, trace_chunks

    native.library()  # built before the clock starts
    start = time.perf_counter()
    if mode == "read":
        lookups = sum(chunk.size for chunk in trace_chunks(path))
        out = {"unique_ids": 0, "rate": 1.0}
    else:
        curve = profile_lru(path, **MODES[mode])
        lookups = curve.lookups
        out = {"unique_ids": curve.unique_ids, "rate": curve.rate}
    out.update(mode=mode, seconds=time.perf_counter() - start, lookups=lookups)
    if mode != "read":
        np.savez(
            keep,
            capacities=curve.capacities,
            hits=curve.hits,
            meta=np.array([curve.lookups, curve.unique_ids]),
            rate=np.array(curve.rate),
        )
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def peak_rss_mb() -> float:
    """This process's peak resident memory: VmHWM, which starts afresh at exec. (getrusage's
    ru_maxrss does not: Linux carries the pre-exec peak over, here the parent's.)"""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_curve(path: str):
    from scratchkit.sim import Curve

    saved = np.load(path)
    lookups, unique = saved["meta"].tolist()
    return Curve("lru", lookups, unique, saved["capacities"], saved["hits"], float(saved["rate"]))


def ids_kept(run: dict) -> float:
    """Distinct ids the engine held at the end: all, R x all, or the fixed size."""
    settings = MODES[run["mode"]]
    return min(settings.get("size") or np.inf, run["unique_ids"] * run["rate"])


def extrapolate(run: dict, baseline_mb: float, criteo_rows: int) -> dict:
    """The same run at 1.19 billion accesses and 33.8M distinct rows (see the docstring)."""
    accesses = CRITEO_SAMPLES * TABLES
    settings = MODES[run["mode"]]
    kept_here = ids_kept(run)
    kept_there = settings.get("size") or settings.get("rate", 1.0) * criteo_rows
    per_id = max(run["peak_rss_mb"] - baseline_mb, 0) / max(kept_here, 1)
    return {
        "accesses": accesses,
        "seconds": run["seconds"] / run["lookups"] * accesses,
        "peak_rss_mb": baseline_mb + per_id * kept_there,
        "ids_kept": int(kept_there),
        "mb_per_million_ids": per_id * 1e6,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--accesses", type=int, default=100_000_000)
    parser.add_argument("--zipf", type=float, default=1.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace", help="keep the generated .npy here (default: a temp folder)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--keep", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    from scratchkit.measure.record import add_record_option  # light: no torch for the children

    add_record_option(parser, "stream")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.trace, args.keep)))
        return 0
    from scratchkit.measure.record import RunRecord

    record = RunRecord.of_run(__file__, argv)
    with tempfile.TemporaryDirectory() as folder:
        path = args.trace or os.path.join(folder, "criteo-shaped.npy")
        start = time.perf_counter()
        rows = write_trace(path, args.accesses, args.zipf, args.seed)
        written = time.perf_counter() - start
        runs = {}
        for mode in MODES:
            keep = os.path.join(folder, f"{mode}.npz")
            done = subprocess.run(
                [sys.executable, __file__, "--child", mode, "--trace", path, "--keep", keep],
                check=True,
                capture_output=True,
                text=True,
            )
            runs[mode] = json.loads(done.stdout)
            if mode != "read":
                runs[mode]["curve"] = load_curve(keep)
        exact = runs["exact"].pop("curve")
        for mode in ("rate-0.01", "size-1M"):
            curve = runs[mode].pop("curve")
            runs[mode]["error"] = curve_error(curve, exact, smallest_trusted_capacity(curve.rate))
    read = runs.pop("read")
    baseline = read["peak_rss_mb"]
    summary = {
        "accesses": args.accesses // TABLES * TABLES,
        "zipf": args.zipf,
        "rows": rows,
        "write_seconds": written,
        "read_seconds": read["seconds"],
        "baseline_rss_mb": baseline,
        "runs": runs,
        "criteo": {mode: extrapolate(run, baseline, rows) for mode, run in runs.items()},
    }
    record.keep(args.record, summary)
    if args.json:
        print(json.dumps(summary))
        return 0
    print(
        f"trace: {summary['accesses']:,} accesses, 26 Criteo-sized tables ({rows:,} rows), "
        f"Zipf {args.zipf}; written in {written:.0f} s"
    )
    print(f"reading it through the chunks alone: {read['seconds']:.1f} s, peak {baseline:.0f} MB (the baseline)")
    print(
        f"{'mode':<11}{'seconds':>9}{'M acc/s':>9}{'ids kept':>12}{'peak MB':>9}"
        f"{'  | Criteo Kaggle, 1.19e9 accesses:':<36}{'minutes':>8}{'peak MB':>9}"
    )
    for mode, run in runs.items():
        kept = ids_kept(run)
        c = summary["criteo"][mode]
        print(
            f"{mode:<11}{run['seconds']:>9.1f}{run['lookups'] / run['seconds'] / 1e6:>9.1f}"
            f"{kept:>12,.0f}{run['peak_rss_mb']:>9.0f}{'':<36}{c['seconds'] / 60:>8.1f}"
            f"{c['peak_rss_mb']:>9.0f}"
        )
    for mode in ("rate-0.01", "size-1M"):
        e = runs[mode]["error"]
        print(
            f"{mode} vs exact, hit rate at {e['from_capacity']:,}..{e['to_capacity']:,} rows: "
            f"mean |error| {e['mae']:.5f}, largest {e['max']:.5f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
