"""prefetch-lru's prefetch on its own thread against the same prefetch inline, and the caches beside
gpu-only, on this machine (docs/trainers.md, "The caches").

- thread vs inline: two prefetch-lru trainers on the same batches (`prefetch_in="thread"` and
  `"inline"`), in one process, step by step alternately (which goes first swaps every step), so
  both see the same minutes of a noisy machine: each one's median step and the per-step ratio
  thread / inline (median and quartiles). Their weights must end equal, bit for bit.
- lru and prefetch-lru against gpu-only: `run_bench` with alternating rounds, each trainer's
  samples/s over gpu-only's (the median round's).

    python benchmarks/bench_prefetch.py                        # small, 300 steps, ~2 min on 2 cores
    python benchmarks/bench_prefetch.py --record results/prefetch.json
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np
import torch

from scratchkit.config import CacheParams
from scratchkit.measure.bench import run_bench
from scratchkit.measure.record import RunRecord, add_record_option
from scratchkit.profiles import get_profile
from scratchkit.trainers import make_trainer

WAYS = ("thread", "inline")


def config_for(profile: str):
    config = get_profile(profile)
    d = config.data
    return config.replace(cache=CacheParams(capacity=3 * d.batch_size * d.pooling, depth=2))


def thread_against_inline(config, steps: int, warmup: int) -> dict:
    trainers = {way: make_trainer("prefetch-lru", config, device="cpu", prefetch_in=way) for way in WAYS}
    runs = {way: trainers[way].train(warmup + steps) for way in WAYS}
    seconds = {way: [] for way in WAYS}
    for step in range(warmup + steps):
        for way in WAYS if step % 2 else WAYS[::-1]:
            record = next(runs[way])
            if step >= warmup:
                seconds[way].append(record.seconds)
    exact = all(torch.equal(a, b) for a, b in zip(*(trainers[way].embedding_weights() for way in WAYS)))
    for trainer in trainers.values():
        trainer.close()
    ratio = [t / i for t, i in zip(seconds["thread"], seconds["inline"])]
    return {
        "step_ms_thread": round(1e3 * statistics.median(seconds["thread"]), 2),
        "step_ms_inline": round(1e3 * statistics.median(seconds["inline"]), 2),
        "thread_over_inline_median": round(statistics.median(ratio), 3),
        "thread_over_inline_p25": round(float(np.percentile(ratio, 25)), 3),
        "thread_over_inline_p75": round(float(np.percentile(ratio, 75)), 3),
        "steps": steps,
        "exact": exact,
    }


def against_gpu_only(config, steps: int, warmup: int, rounds: int) -> dict:
    results = run_bench(config, ["gpu-only", "lru", "prefetch-lru"], steps, warmup=warmup, device="cpu", rounds=rounds)
    return {
        r.trainer: {"samples_per_s": round(r.samples_per_s), "ratio_to_gpu_only": round(r.ratio, 3)} for r in results
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="small")
    parser.add_argument("--steps", type=int, default=300, help="timed steps (default 300)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first (default 20)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds against gpu-only")
    add_record_option(parser, "prefetch")
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    config = config_for(args.profile)
    thread = thread_against_inline(config, args.steps, args.warmup)
    print("prefetch-lru, thread against inline: " + ", ".join(f"{k} {v}" for k, v in thread.items()))
    trainers = against_gpu_only(config, args.steps, args.warmup, args.rounds)
    for name, row in trainers.items():
        print(f"{name:14s} {row['samples_per_s']:>8} samples/s  {row['ratio_to_gpu_only']:.3f}x gpu-only")
    record.keep(args.record, {"prefetch_thread": thread, "trainers": trainers})
    return 0 if thread["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
