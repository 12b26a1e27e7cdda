"""Cache simulator speed: accesses/s per policy, and whole miss-ratio curves beside libCacheSim
simulating one capacity of the same trace.

    .venv/bin/python benchmarks/bench_sim.py --curves        # the curves side by side (~1 min)
    .venv/bin/python benchmarks/bench_sim.py                 # + every policy at one capacity
    .venv/bin/python benchmarks/bench_sim.py --opt-grid      # + why a few OPT capacities suffice
    .venv/bin/python benchmarks/bench_sim.py --quick         # 200k accesses, seconds

Default trace: 10M accesses, Zipf 1.05 over 1M ids. Everything runs in one process, on one
synthetic trace, so the ratios compare like with like; absolute seconds depend on the machine
and on what else it runs. libCacheSim (if installed; this script installs nothing) reads the
trace from its binary `oracleGeneral` file (written first, not timed), so its time is its C
simulation loop alone. The curves section alternates its contenders over `--rounds` rounds and
reports medians: the exact LRU curve (C loop), libCacheSim's LRU at one capacity, SHARDS at rate
0.1 and at a fixed size of a tenth of the ids, with the sampled curves' mean hit-rate error
against the exact one at capacities >= 1/R. Hit counts must be equal wherever both are exact.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from scratchkit.sim import curve_error, lru_mrc, min_capacity, native, next_use, opt_mrc, profile_lru, simulate
from scratchkit.measure.record import RunRecord, add_record_option
from scratchkit.sim.sampling import smallest_trusted_capacity


@dataclass
class BenchConfig:
    accesses: int = 10_000_000  # the size the design's "a second for 10M accesses" target names
    rows: int = 1_000_000  # distinct ids to draw from: a 1M-row table
    zipf: float = 1.05  # skew of a typical recommendation id stream (the trace)
    capacity: int = 10_000  # 1% of the rows: a small cache, many evictions
    batch_size: int = 4_096  # lookahead: lookups per batch
    depth: int = 2  # lookahead: batches planned ahead
    ways: int = 32  # setassoc: FBGEMM's associativity
    seed: int = 0


def zipf_trace(config: BenchConfig) -> np.ndarray:
    """Zipf ids folded into `rows` (numpy's sampler is unbounded; the fold keeps it fast)."""
    rng = np.random.default_rng(config.seed)
    return (rng.zipf(config.zipf, config.accesses) % config.rows).astype(np.int64)


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def have_libcachesim() -> bool:
    try:
        import libcachesim  # noqa: F401
    except ImportError:
        return False
    return True


def write_oracle_trace(trace: np.ndarray, path: str) -> None:
    """libCacheSim's binary oracleGeneral records; Belady needs each access's next use."""
    n = trace.size
    record = np.dtype([("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    rows = np.zeros(n, dtype=record)
    rows["time"], rows["id"], rows["size"] = np.arange(n), trace, 1
    later = next_use(trace)
    rows["next"] = np.where(later < n, later, np.iinfo(np.int64).max)
    rows.tofile(path)


def libcachesim_on_file(path: str, n: int, capacity: int, policy: str) -> tuple[int, float]:
    """(hits, seconds) of libCacheSim's LRU or Belady at one capacity on a written trace."""
    import libcachesim as lcs

    reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)
    cache = (lcs.LRU if policy == "lru" else lcs.Belady)(cache_size=capacity)
    (miss_ratio, _), seconds = timed(lambda: cache.process_trace(reader))
    return int(round((1.0 - miss_ratio) * n)), seconds


def libcachesim_run(trace: np.ndarray, capacity: int, policy: str) -> tuple[int, float]:
    """(hits, seconds) of libCacheSim's LRU or Belady at one capacity, from a binary trace."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.oracleGeneral")
        write_oracle_trace(trace, path)
        return libcachesim_on_file(path, trace.size, capacity, policy)


def curves_side_by_side(trace: np.ndarray, capacity: int, rounds: int, rate: float = 0.1) -> dict:
    """Exact LRU curve, libCacheSim one capacity, SHARDS fixed rate and fixed size: `rounds`
    alternating rounds, medians, ratios, errors and hit agreement."""
    size = None
    times: dict[str, list[float]] = {}
    curves = {}
    contenders = {
        "exact": lambda: profile_lru(trace),
        "fixed_rate": lambda: profile_lru(trace, rate=rate),
        "fixed_size": lambda: profile_lru(trace, size=size),
    }
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.oracleGeneral")
        peer = have_libcachesim()
        if peer:
            write_oracle_trace(trace, path)
        else:
            print("libCacheSim is not installed: its column is skipped (pip install libcachesim)")
        for _ in range(rounds):
            for name, run in contenders.items():
                curves[name], seconds = timed(run)
                times.setdefault(name, []).append(seconds)
                if name == "exact" and size is None:  # a tenth of the distinct ids
                    size = max(curves["exact"].unique_ids // 10, 1)
            if peer:
                lib_hits, seconds = libcachesim_on_file(path, trace.size, capacity, "lru")
                times.setdefault("libcachesim_lru_one_capacity", []).append(seconds)
    median = {name: float(np.median(values)) for name, values in times.items()}
    exact = curves["exact"]
    out = {
        "rounds": rounds,
        "median_seconds": median,
        "seconds": times,
        "engine": "C loop (g++)" if native.available() else "NumPy twin",
        "sample_rate": rate,
        "sample_size": size,
        "fixed_size_final_rate": curves["fixed_size"].rate,
        "fixed_rate_over_exact": median["fixed_rate"] / median["exact"],
        "fixed_size_over_exact": median["fixed_size"] / median["exact"],
        "fixed_rate_error": curve_error(curves["fixed_rate"], exact, smallest_trusted_capacity(rate)),
        "fixed_size_error": curve_error(
            curves["fixed_size"], exact, smallest_trusted_capacity(curves["fixed_size"].rate)
        ),
        "capacity": capacity,
        "exact_hits_at_capacity": exact.hits_at(capacity),
    }
    if peer:
        out["libcachesim_hits_at_capacity"] = lib_hits
        out["exact_over_libcachesim_one_capacity"] = median["exact"] / median["libcachesim_lru_one_capacity"]
        out["hits_agree"] = exact.hits_at(capacity) == lib_hits
    return out


def opt_grid_error(trace: np.ndarray, dense: int = 48, grids=(8, 16)) -> dict:
    """How far OPT between grid capacities strays from a line in log capacity: OPT at `dense`
    log-spaced capacities, interpolated from every k-th of them, error at the others."""
    lru = lru_mrc(trace)
    capacities = np.unique(np.geomspace(1, lru.unique_ids, dense).round().astype(np.int64))
    opt, seconds = timed(lambda: opt_mrc(trace, capacities))
    rate = opt.hits / trace.size
    out = {"dense_capacities": int(capacities.size), "seconds": seconds, "grids": {}}
    for points in grids:
        pick = np.unique(np.linspace(0, capacities.size - 1, points).round().astype(int))
        guess = np.interp(np.log(capacities), np.log(capacities[pick]), rate[pick])
        gap = np.abs(guess - rate)
        out["grids"][int(points)] = {"max_error": float(gap.max()), "mean_error": float(gap.mean())}
    lru_rate = lru.rates_at(capacities)
    out["opt_minus_lru_max"] = float(np.max(rate - lru_rate))
    return out


def policies_at_one_capacity(trace: np.ndarray, config: BenchConfig) -> dict:
    """Every simulator at `config.capacity` once, plus the whole LRU curve and libCacheSim."""
    n = trace.size
    need = min_capacity(trace, config.batch_size, config.depth)
    ahead = max(config.capacity, need)
    ways_capacity = max(config.capacity // config.ways, 1) * config.ways
    runs = []  # (what, capacity, seconds, hits)

    def record(what, capacity, fn):
        hits, seconds = timed(fn)
        runs.append((what, capacity, seconds, int(hits)))

    record("static", config.capacity, lambda: simulate(trace, "static", config.capacity).hits)
    record("lru", config.capacity, lambda: simulate(trace, "lru", config.capacity).hits)
    record("lfu", config.capacity, lambda: simulate(trace, "lfu", config.capacity).hits)
    record("opt", config.capacity, lambda: simulate(trace, "opt", config.capacity).hits)
    record("setassoc", ways_capacity, lambda: simulate(trace, "setassoc", ways_capacity, ways=config.ways).hits)
    record(
        "lookahead",
        ahead,
        lambda: simulate(trace, "lookahead", ahead, batch_size=config.batch_size, depth=config.depth).hits,
    )
    record("lru_mrc (every capacity)", config.capacity, lambda: lru_mrc(trace).hits_at(config.capacity))
    record("opt_mrc (one capacity)", config.capacity, lambda: opt_mrc(trace, [config.capacity]).hits[0])
    ours = {what: hits for what, _, _, hits in runs}
    out = {
        "lookahead_min_capacity": need,
        "runs": [{"what": w, "capacity": c, "seconds": s, "accesses_per_s": n / s, "hits": h} for w, c, s, h in runs],
    }
    if have_libcachesim():
        lib_lru, lib_lru_s = libcachesim_run(trace, config.capacity, "lru")
        lib_opt, lib_opt_s = libcachesim_run(trace, config.capacity, "belady")
        out["runs"] += [
            {"what": what, "capacity": config.capacity, "seconds": s, "accesses_per_s": n / s, "hits": h}
            for what, h, s in (
                ("libCacheSim LRU (one capacity)", lib_lru, lib_lru_s),
                ("libCacheSim Belady (one capacity)", lib_opt, lib_opt_s),
            )
        ]
        out["lru_hits_agree"] = ours["lru"] == ours["lru_mrc (every capacity)"] == lib_lru
        out["opt_hits_agree"] = ours["opt"] == ours["opt_mrc (one capacity)"] == lib_opt
    else:
        out["lru_hits_agree"] = ours["lru"] == ours["lru_mrc (every capacity)"]
        out["opt_hits_agree"] = ours["opt"] == ours["opt_mrc (one capacity)"]
    return out


def print_curves(c: dict) -> None:
    m = c["median_seconds"]
    print(f"\ncurves side by side ({c['engine']}), medians of {c['rounds']} alternating rounds:")
    print(f"{'contender':<44}{'median s':>10}{'rounds (s)':>30}")
    names = {
        "exact": "LRU curve, exact, every capacity",
        "libcachesim_lru_one_capacity": f"libCacheSim LRU, one capacity ({c['capacity']:,})",
        "fixed_rate": f"LRU curve, SHARDS rate {c['sample_rate']}",
        "fixed_size": f"LRU curve, SHARDS size {c['sample_size']:,}",
    }
    for key, label in names.items():
        if key in m:
            rounds = " ".join(f"{s:.2f}" for s in c["seconds"][key])
            print(f"{label:<44}{m[key]:>10.3f}{rounds:>30}")
    if "exact_over_libcachesim_one_capacity" in c:
        print(
            f"exact curve / libCacheSim one capacity: {c['exact_over_libcachesim_one_capacity']:.2f}"
            f"  (hits at {c['capacity']:,}: ours {c['exact_hits_at_capacity']:,}, libCacheSim "
            f"{c['libcachesim_hits_at_capacity']:,}, equal: {c['hits_agree']})"
        )
    for key in ("fixed_rate", "fixed_size"):
        e = c[f"{key}_error"]
        print(
            f"{names[key]} / exact: {c[f'{key}_over_exact']:.3f}; hit-rate error at "
            f"{e['from_capacity']:,}..{e['to_capacity']:,} rows: mean {e['mae']:.5f}, "
            f"max {e['max']:.5f}"
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--accesses", type=int, default=BenchConfig.accesses)
    parser.add_argument("--quick", action="store_true", help="200k accesses, 20k rows")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--zipf", type=float, default=BenchConfig.zipf)
    parser.add_argument("--capacity", type=int, default=None)
    parser.add_argument("--curves", action="store_true", help="only the curves side by side")
    parser.add_argument("--rounds", type=int, default=5, help="curves: alternating rounds (5)")
    parser.add_argument("--opt-grid", action="store_true", help="also measure OPT between grid points")
    parser.add_argument("--json", action="store_true")
    add_record_option(parser, "sim")
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    accesses = 200_000 if args.quick else args.accesses
    rows = args.rows or (20_000 if args.quick else max(accesses // 10, 1))
    config = BenchConfig(accesses=accesses, rows=rows, zipf=args.zipf, capacity=args.capacity or max(rows // 100, 1))
    trace = zipf_trace(config)
    n = trace.size
    summary = {"accesses": n, "rows": config.rows, "zipf": config.zipf, "capacity": config.capacity}
    summary["curves"] = curves_side_by_side(trace, config.capacity, args.rounds)
    if not args.curves:
        summary.update(policies_at_one_capacity(trace, config))
    if args.opt_grid:
        summary["opt_grid"] = opt_grid_error(trace)
    c = summary["curves"]
    ok = c.get("hits_agree", True) and summary.get("lru_hits_agree", True) and summary.get("opt_hits_agree", True)
    record.keep(args.record, summary)
    if args.json:
        print(json.dumps(summary))
        return 0 if ok else 1
    print(f"trace: {n:,} accesses, Zipf {config.zipf} over {config.rows:,} rows, capacity {config.capacity:,} rows")
    if "runs" in summary:
        print(f"{'simulator':<36}{'capacity':>10}{'seconds':>10}{'accesses/s':>14}{'hits':>12}{'hit rate':>10}")
        for r in summary["runs"]:
            print(
                f"{r['what']:<36}{r['capacity']:>10,}{r['seconds']:>10.2f}{r['accesses_per_s']:>14,.0f}"
                f"{r['hits']:>12,}{r['hits'] / n:>10.4f}"
            )
        print(
            f"hits agree (ours and libCacheSim where installed): LRU {summary['lru_hits_agree']}, "
            f"OPT {summary['opt_hits_agree']}"
        )
    print_curves(c)
    if "opt_grid" in summary:
        g = summary["opt_grid"]
        print(
            f"\nOPT at {g['dense_capacities']} log-spaced capacities ({g['seconds']:.1f} s); a line "
            f"in log capacity through a coarser grid misses it by:"
        )
        for points, e in g["grids"].items():
            print(f"  {points:>3} points: max {e['max_error']:.4f}, mean {e['mean_error']:.4f} hit rate")
        print(f"  (OPT - LRU at most {g['opt_minus_lru_max']:.4f} hit rate on this trace)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
