"""The kit's device-only trainer beside plain PyTorch, on the same batches, in one run.

    .venv/bin/python benchmarks/bench_peers.py [--profile small] [--steps 100] [--rounds 3]

Plain PyTorch is `scratchkit.measure.reference`: nn.EmbeddingBag(mode="sum", sparse=True) per table and
torch.optim.SGD, the loop anyone would write. Both make their batches inside the timed loop. Rounds
alternate the two (ABAB...) so a noisy machine slows both alike; the median round is reported.
(FBGEMM's CPU table-batched embedding is the other production peer; it is not installed here.)
"""
from __future__ import annotations

import argparse
import statistics
import time

from scratchkit.data.synthetic import SyntheticSource
from scratchkit.profiles import get_profile
from scratchkit.measure.reference import ReferenceRun
from scratchkit.trainers import make_trainer


def time_kit(config, source, steps: int) -> float:
    with make_trainer("gpu-only", config, source=source) as trainer:
        list(trainer.train(3))
        start = time.perf_counter()
        list(trainer.train(steps))
        return steps * config.data.batch_size / (time.perf_counter() - start)


def time_pytorch(config, source, steps: int) -> float:
    run = ReferenceRun(config, source)
    run.train(3)
    start = time.perf_counter()
    run.train(steps)
    return steps * config.data.batch_size / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="small")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    config = get_profile(args.profile)
    source = SyntheticSource(config.data)
    import torch
    torch.set_num_threads(1)   # both sides alike (the kit's trainers default to one thread)
    kit, plain = [], []
    for _ in range(args.rounds):
        kit.append(time_kit(config, source, args.steps))
        plain.append(time_pytorch(config, source, args.steps))
    k, p = statistics.median(kit), statistics.median(plain)
    print(f"profile {args.profile}, {args.steps} steps x {args.rounds} alternating rounds (median)")
    print(f"{'plain PyTorch (EmbeddingBag + SGD)':36s} {p:10,.0f} samples/s  1.00")
    print(f"{'scratchkit gpu-only':36s} {k:10,.0f} samples/s  {k / p:.2f}")


if __name__ == "__main__":
    main()
