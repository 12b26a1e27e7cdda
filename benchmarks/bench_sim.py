"""Cache simulator speed: accesses/s per policy, and a whole LRU miss-ratio curve beside
libCacheSim simulating one capacity of the same trace.

    .venv/bin/python benchmarks/bench_sim.py                 # 10M accesses (about two minutes)
    .venv/bin/python benchmarks/bench_sim.py --quick         # 200k accesses, seconds

Everything runs in one process on one core, on one synthetic Zipf trace, so the ratios compare
like with like; absolute seconds depend on the machine and on what else it runs. libCacheSim
reads the trace from its binary `oracleGeneral` file (written first, not timed), so its time is
its C simulation loop alone. Hit counts of both are printed: they must be equal.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from scratchkit.sim import lru_mrc, min_capacity, next_use, opt_mrc, simulate


@dataclass
class BenchConfig:
    accesses: int = 10_000_000   # the size the design's "a second for 10M accesses" target names
    rows: int = 1_000_000        # distinct ids to draw from: a 1M-row table
    zipf: float = 1.1            # skew of a typical recommendation id stream
    capacity: int = 10_000       # 1% of the rows: a small cache, many evictions
    batch_size: int = 4_096      # lookahead: lookups per batch
    depth: int = 2               # lookahead: batches planned ahead
    ways: int = 32               # setassoc: FBGEMM's associativity
    seed: int = 0


def zipf_trace(config: BenchConfig) -> np.ndarray:
    """Zipf ids folded into `rows` (numpy's sampler is unbounded; the fold keeps it fast)."""
    rng = np.random.default_rng(config.seed)
    return (rng.zipf(config.zipf, config.accesses) % config.rows).astype(np.int64)


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def libcachesim_run(trace: np.ndarray, capacity: int, policy: str) -> tuple[int, float]:
    """(hits, seconds) of libCacheSim's LRU or Belady at one capacity, from a binary trace."""
    import libcachesim as lcs

    n = trace.size
    record = np.dtype([("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    rows = np.zeros(n, dtype=record)
    rows["time"], rows["id"], rows["size"] = np.arange(n), trace, 1
    later = next_use(trace)
    rows["next"] = np.where(later < n, later, np.iinfo(np.int64).max)   # Belady needs it
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.oracleGeneral")
        rows.tofile(path)
        reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)
        cache = (lcs.LRU if policy == "lru" else lcs.Belady)(cache_size=capacity)
        (miss_ratio, _), seconds = timed(lambda: cache.process_trace(reader))
    return int(round((1.0 - miss_ratio) * n)), seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--accesses", type=int, default=BenchConfig.accesses)
    parser.add_argument("--quick", action="store_true", help="200k accesses, 20k rows")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--zipf", type=float, default=BenchConfig.zipf)
    parser.add_argument("--capacity", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    accesses = 200_000 if args.quick else args.accesses
    rows = args.rows or (20_000 if args.quick else max(accesses // 10, 1))
    config = BenchConfig(accesses=accesses, rows=rows, zipf=args.zipf,
                         capacity=args.capacity or max(rows // 100, 1))
    trace = zipf_trace(config)
    n = trace.size
    need = min_capacity(trace, config.batch_size, config.depth)
    ahead = max(config.capacity, need)
    ways_capacity = max(config.capacity // config.ways, 1) * config.ways

    runs = []                                   # (what, capacity, seconds, hits)

    def record(what, capacity, fn):
        hits, seconds = timed(fn)
        runs.append((what, capacity, seconds, int(hits)))
        return hits

    record("static", config.capacity, lambda: simulate(trace, "static", config.capacity).hits)
    record("lru", config.capacity, lambda: simulate(trace, "lru", config.capacity).hits)
    record("lfu", config.capacity, lambda: simulate(trace, "lfu", config.capacity).hits)
    record("opt", config.capacity, lambda: simulate(trace, "opt", config.capacity).hits)
    record("setassoc", ways_capacity,
           lambda: simulate(trace, "setassoc", ways_capacity, ways=config.ways).hits)
    record("lookahead", ahead, lambda: simulate(trace, "lookahead", ahead, batch_size=config.batch_size,
                                                depth=config.depth).hits)
    curve = None

    def whole_curve():
        nonlocal curve
        curve = lru_mrc(trace)
        return curve.hits_at(config.capacity)

    record("lru_mrc (every capacity)", config.capacity, whole_curve)
    record("opt_mrc (one capacity)", config.capacity,
           lambda: opt_mrc(trace, [config.capacity]).hits[0])
    lib_lru, lib_lru_s = libcachesim_run(trace, config.capacity, "lru")
    lib_opt, lib_opt_s = libcachesim_run(trace, config.capacity, "belady")
    runs.append(("libCacheSim LRU (one capacity)", config.capacity, lib_lru_s, lib_lru))
    runs.append(("libCacheSim Belady (one capacity)", config.capacity, lib_opt_s, lib_opt))
    mrc_s = next(s for what, _, s, _ in runs if what.startswith("lru_mrc"))
    ours = dict((what, hits) for what, _, _, hits in runs)

    summary = {
        "accesses": n, "rows": config.rows, "unique_ids": int(curve.unique_ids),
        "zipf": config.zipf, "capacity": config.capacity, "lookahead_min_capacity": need,
        "runs": [{"what": w, "capacity": c, "seconds": s, "accesses_per_s": n / s, "hits": h}
                 for w, c, s, h in runs],
        "mrc_seconds": mrc_s, "libcachesim_lru_seconds": lib_lru_s,
        "mrc_over_libcachesim_one_capacity": mrc_s / lib_lru_s,
        "lru_hits_agree": ours["lru"] == ours["lru_mrc (every capacity)"] == lib_lru,
        "opt_hits_agree": ours["opt"] == ours["opt_mrc (one capacity)"] == lib_opt,
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"trace: {n:,} accesses, Zipf {config.zipf} over {config.rows:,} rows "
          f"({curve.unique_ids:,} distinct), capacity {config.capacity:,} rows")
    print(f"{'simulator':<36}{'capacity':>10}{'seconds':>10}{'accesses/s':>14}{'hits':>12}{'hit rate':>10}")
    for what, capacity, seconds, hits in runs:
        print(f"{what:<36}{capacity:>10,}{seconds:>10.2f}{n / seconds:>14,.0f}{hits:>12,}{hits / n:>10.4f}")
    print(f"\nLRU curve at all {curve.unique_ids:,} capacities: {mrc_s:.2f} s; libCacheSim LRU at one "
          f"capacity: {lib_lru_s:.2f} s; ratio {mrc_s / lib_lru_s:.2f}")
    print(f"hits agree with libCacheSim: LRU {summary['lru_hits_agree']}, OPT {summary['opt_hits_agree']}")
    return 0 if summary["lru_hits_agree"] and summary["opt_hits_agree"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
