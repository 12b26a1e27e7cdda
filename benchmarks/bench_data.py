"""Is the synthetic generator ever the bottleneck? Its batches/s beside the trainers' steps/s.

    .venv/bin/python benchmarks/bench_data.py [--quick]

For each profile: batches/s of `SyntheticSource.batch(i)` alone, and steps/s of the gpu-only
trainer (whose batch loader makes its batches ahead, beside its steps, on a core of its own),
measured side by side in one run. The ratio generator/trainer says how many times faster than
training the data comes: above 1, the loader keeps up and a step's `data` is near nothing.
"""

from __future__ import annotations

import argparse
import time

from scratchkit.data.synthetic import SyntheticSource
from scratchkit.measure.record import RunRecord, add_record_option
from scratchkit.profiles import get_profile
from scratchkit.trainers import make_trainer


def batches_per_second(source, count: int) -> float:
    start = time.perf_counter()
    for i in range(count):
        source.batch(i)
    return count / (time.perf_counter() - start)


def steps_per_second(config, count: int) -> float:
    with make_trainer("gpu-only", config) as trainer:
        list(trainer.train(3))  # warm-up
        start = time.perf_counter()
        list(trainer.train(count))
        return count / (time.perf_counter() - start)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer batches: a smoke run")
    add_record_option(parser, "data")
    args = parser.parse_args(argv)
    record, figures = RunRecord.of_run(__file__, argv), {}
    count = 20 if args.quick else 200
    print(f"{'profile':12s} {'generator batches/s':>20s} {'gpu-only steps/s':>17s} {'ratio':>6s}")
    for name in ("tiny", "small", "criteo-like"):
        config = get_profile(name)
        generator = batches_per_second(SyntheticSource(config.data), count)
        trainer = steps_per_second(config, count)
        print(f"{name:12s} {generator:20,.0f} {trainer:17,.0f} {generator / trainer:6.1f}")
        figures[name] = {"generator batches/s": generator, "gpu-only steps/s": trainer, "ratio": generator / trainer}
    record.keep(args.record, {"batches": count, "profiles": figures})


if __name__ == "__main__":
    main()
