"""Kernel speed, side by side in one run: NumPy twin vs the `.cu` host build (vs CuPy on a GPU).

    python benchmarks/bench_kernels.py [--quick] [--capacity N] [--dim D] [--batch B] [--json FILE]

For each engine it measures
  * query lookups/s: `hashmap_query` on a map with every slot used (load 0.5), batches of B ids,
    half of them hits; and the same through `Scratchpad.query` (input checks included);
  * gather GB/s: `gather_rows` of B random slots, bytes read + written, next to the copy bandwidth
    of the memory the rows live in (a large NumPy copy on the CPU, a device-to-device CuPy copy on
    a GPU), measured in the same run.
Engines are measured in interleaved rounds and the best round is kept, so a noisy neighbour hurts
every engine alike. Ratios, not absolute numbers, are the result: machines here are noisy.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass

import numpy as np

from scratchkit.backend import detect
from scratchkit.kernels.scratchpad import Scratchpad
from scratchkit.measure.record import RunRecord, add_record_option


@dataclass
class Result:
    engine: str
    query_lookups_per_s: float = 0.0
    pad_query_lookups_per_s: float = 0.0
    gather_gb_per_s: float = 0.0
    copy_gb_per_s: float = 0.0


def best_rate(fn, items: float, sync, min_seconds: float) -> float:
    """items / seconds of the fastest call of fn, calling it for at least min_seconds."""
    fn()
    sync()
    best, spent = float("inf"), 0.0
    while spent < min_seconds:
        start = time.perf_counter()
        fn()
        sync()
        elapsed = time.perf_counter() - start
        best, spent = min(best, elapsed), spent + elapsed
    return items / best


class Bench:
    """One engine's arrays, built once, timed in rounds."""

    def __init__(self, kind: str, capacity: int, dim: int, batch: int, rng):
        device = "cuda" if kind == "cupy" else "cpu"
        self.pad = Scratchpad(4 * capacity, capacity, dim, engine=kind, device=device)
        self.engine, self.xp = self.pad.engine, self.pad.xp
        ids = rng.choice(4 * capacity, capacity, replace=False)
        self.pad.insert(ids, np.arange(capacity))
        self.pad.rows.copy_(self.pad.rows.new_tensor(rng.standard_normal((capacity, dim))))
        hits = rng.choice(ids, batch // 2)
        misses = rng.choice(np.setdiff1d(np.arange(4 * capacity), ids), batch - batch // 2)
        self.query_ids_host = rng.permutation(np.concatenate([hits, misses]))
        self.query_ids = self.xp.asarray(self.query_ids_host)
        self.slots = self.xp.asarray(rng.integers(0, capacity, batch))
        self.big = self.xp.ones(max(capacity * dim, 1 << 24), dtype=self.xp.float32)  # >= 64 MB
        self.big_out = self.xp.empty_like(self.big)
        self.batch, self.dim = batch, dim
        self.result = Result(kind)

    def sync(self):
        if self.xp is not np:
            self.xp.cuda.Device().synchronize()

    def round(self, min_seconds: float):
        e, p, r = self.engine, self.pad, self.result
        r.query_lookups_per_s = max(
            r.query_lookups_per_s,
            best_rate(
                lambda: e.hashmap_query(p.map.keys, p.map.values, self.query_ids), self.batch, self.sync, min_seconds
            ),
        )
        r.pad_query_lookups_per_s = max(
            r.pad_query_lookups_per_s,
            best_rate(lambda: p.query(self.query_ids_host), self.batch, self.sync, min_seconds),
        )
        moved = 2 * self.batch * self.dim * 4 / 1e9  # GB read + written
        r.gather_gb_per_s = max(
            r.gather_gb_per_s,
            best_rate(lambda: e.gather_rows(p.slot_rows.rows, self.slots), moved, self.sync, min_seconds),
        )
        copied = 2 * self.big.nbytes / 1e9
        r.copy_gb_per_s = max(
            r.copy_gb_per_s, best_rate(lambda: self.xp.copyto(self.big_out, self.big), copied, self.sync, min_seconds)
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, short rounds (seconds)")
    parser.add_argument("--capacity", type=int, help="scratchpad slots (default 2^16, quick 2^14)")
    parser.add_argument("--dim", type=int, default=64, help="floats per row")
    parser.add_argument("--batch", type=int, default=4096, help="ids per query / slots per gather")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3, quick 2)")
    parser.add_argument("--json", help="also write the results to this file")
    add_record_option(parser, "kernels")
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    capacity = args.capacity or (1 << 14 if args.quick else 1 << 16)
    rounds = args.rounds or (2 if args.quick else 3)
    min_seconds = 0.05 if args.quick else 0.3

    kinds = ["twin", "host"] + (["cupy"] if detect().cupy_gpu else [])
    rng = np.random.default_rng(0)
    benches = [Bench(kind, capacity, args.dim, args.batch, rng) for kind in kinds]
    for _ in range(rounds):
        for bench in benches:
            bench.round(min_seconds)

    results = [b.result for b in benches]
    twin = results[0]
    print(
        f"capacity {capacity}, dim {args.dim}, batch {args.batch} ids (half hits), "
        f"best of {rounds} interleaved rounds; {detect().describe()}"
    )
    print(
        f"{'engine':8} {'query Mlookups/s':>17} {'x twin':>8} {'Scratchpad.query':>17} "
        f"{'gather GB/s':>12} {'copy GB/s':>10} {'gather/copy':>12}"
    )
    for r in results:
        print(
            f"{r.engine:8} {r.query_lookups_per_s / 1e6:17.2f} "
            f"{r.query_lookups_per_s / twin.query_lookups_per_s:8.1f} "
            f"{r.pad_query_lookups_per_s / 1e6:17.2f} {r.gather_gb_per_s:12.2f} "
            f"{r.copy_gb_per_s:10.2f} {r.gather_gb_per_s / r.copy_gb_per_s:12.2f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"capacity": capacity, "dim": args.dim, "batch": args.batch, "results": [asdict(r) for r in results]},
                f,
                indent=2,
            )
    record.keep(
        args.record,
        {
            "capacity": capacity,
            "dim": args.dim,
            "batch": args.batch,
            "rounds": rounds,
            "engines": {r.engine: asdict(r) for r in results},
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
