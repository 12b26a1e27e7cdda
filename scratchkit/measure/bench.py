"""Measure trainers side by side on identical batches: samples/s and where the time goes."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from itertools import islice

from scratchkit.data.synthetic import SyntheticSource
from scratchkit.designs import DESIGNS
from scratchkit.device_ops import counting_ops
from scratchkit.trainers import make_trainer


@dataclass
class BenchResult:
    trainer: str
    steps: int  # timed steps (after warm-up)
    samples_per_s: float
    seconds: float
    stage_seconds: dict[str, float] = field(default_factory=dict)  # per step, mean
    hit_rate: float | None = None
    ratio: float = 1.0  # samples/s relative to the first trainer of the run
    lookups_per_step: float = 0.0  # means over the timed steps: the cost model's inputs
    fetched_rows_per_step: float = 0.0  # rows host -> device
    written_back_rows_per_step: float = 0.0  # rows device -> host
    evicting_tables_per_step: float = 0.0  # tables whose victim choice ran
    setup_s: float = 0.0  # making the trainer: its tables, model, buffers and host processes
    warmup_s: float = 0.0  # its untimed warm-up steps: first-use kernel compiles, the pipeline's start
    plan_syncs_per_step: float = 0.0  # Plan's waits for the device (ScratchPipe's, device_work.py)
    plan_launches_per_step: float = 0.0  # Plan's kernels and array calls on the device
    # Train's path (device_work.py): the host's waits for the device and the kernels and copies it
    # queues, torch's own ops included, in one counted step (the last warm-up step; None without one)
    host_syncs_per_step: float | None = None
    kernel_launches_per_step: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def run_bench(
    config,
    trainers: list[str],
    steps: int,
    *,
    warmup: int = 5,
    source=None,
    device: str | None = None,
    wrap=None,
    rounds: int = 1,
) -> list[BenchResult]:
    """Each trainer trains `warmup` untimed then `steps` timed steps on the same batches.

    Both in one `train()` call: the warm-up then warms what is timed. (ScratchPipe starts its
    pipeline at each call: it forks the host process and plans a batch's look-ahead before the
    first Train, ~50-70 ms that a warm-up call of its own would not have taken off the timed one.)
    `wrap(iterable, total, desc)` may add a progress bar.

    `rounds` > 1 alternates them: every trainer is open at once and takes its timed steps in
    `rounds` parts, each trainer a part in turn (the order reversed every other round), so that
    each one's figures cover the same minutes of the machine. On a VM whose speed moves by a third
    from one minute to the next, trainers timed one after another compare one minute with another
    (`measure/validate.py`'s machine spread shows it). It holds every trainer's tables at once.
    """
    if steps <= 0:
        raise ValueError(f"steps must be positive, got {steps}")
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    source = source if source is not None else SyntheticSource(config.data)
    if rounds == 1:  # one at a time: one trainer's tables in memory at once
        results = []
        for name in trainers:
            started = time.perf_counter()
            with make_trainer(name, config, source=source, device=device) as trainer:
                setup_s = time.perf_counter() - started
                (chunk,), warmup_s, counted = _timed(trainer, name, warmup, [steps], wrap)
                records = list(chunk)
            results.append(_result(name, steps, records, setup_s, warmup_s, counted))
    else:
        parts = _parts(steps, rounds)
        with ExitStack() as stack:
            # each made and started (warmed up) before the next is made, ScratchPipe's first: it
            # forks its host process as it starts, and a fork shares every page the process holds
            # then, copy on write: another trainer's tables made before it would fault a page at
            # a time as that trainer writes them, for as long as the child lives
            runs = [None] * len(trainers)  # by position: a trainer may be named twice
            setup = [(0.0, 0.0, None)] * len(trainers)  # (setup_s, warmup_s, the counted step)
            for i in sorted(range(len(trainers)), key=lambda i: not DESIGNS[trainers[i]].plans_ahead):
                started = time.perf_counter()
                trainer = stack.enter_context(make_trainer(trainers[i], config, source=source, device=device))
                setup_s = time.perf_counter() - started
                runs[i], warmup_s, counted = _timed(trainer, trainers[i], warmup, parts, wrap)
                setup[i] = (setup_s, warmup_s, counted)
            records = [[] for _ in trainers]
            for k in range(len(parts)):
                for i in range(len(trainers)) if k % 2 == 0 else reversed(range(len(trainers))):
                    records[i] += list(runs[i][k])
        results = [_result(name, steps, taken, *times) for name, taken, times in zip(trainers, records, setup)]
    for r in results:
        r.ratio = r.samples_per_s / results[0].samples_per_s
    return results


def _parts(steps: int, rounds: int) -> list[int]:
    """`steps` split into `rounds` near-equal parts (no empty one): 10, 3 -> [4, 3, 3]."""
    rounds = min(rounds, steps)
    return [steps // rounds + (k < steps % rounds) for k in range(rounds)]


def _timed(trainer, name: str, warmup: int, parts: list[int], wrap) -> tuple[list, float, object]:
    """Start `trainer` on warmup + sum(parts) steps, take the warm-up, and return one iterator
    per part of the timed steps (each drained before the next), the warm-up's seconds, and the
    counted step's record: the last warm-up step's, torch's ops counted too
    (`device_ops.counting_ops`, which slows a step, so never a timed one; None without a warm-up)."""
    if hasattr(trainer, "events"):
        trainer.events.enabled = False  # the visualizer's trace is not what we measure
    started = time.perf_counter()
    steps_run = trainer.train(warmup + sum(parts))
    counted = None
    for k in range(warmup):
        if k < warmup - 1:
            next(steps_run)
            continue
        with counting_ops(trainer.device):
            counted = next(steps_run)
    warmup_s = time.perf_counter() - started
    # the last part is the generator itself, drained: what train() does after its last step
    # (ScratchPipe stops its pipeline) runs before the trainer closes, as in one uninterrupted call
    chunks = [islice(steps_run, n) for n in parts[:-1]] + [steps_run]
    return [wrap(chunk, n, name) if wrap else chunk for chunk, n in zip(chunks, parts)], warmup_s, counted


def _result(
    name: str, steps: int, records: list, setup_s: float = 0.0, warmup_s: float = 0.0, counted=None
) -> BenchResult:
    """A trainer's timed steps as one result: samples/s, and each stage's and counter's mean;
    the seconds it took to make and to warm up, apart; Train's waits and launches from the
    `counted` step's record."""
    seconds = sum(r.seconds for r in records)
    stages: dict[str, float] = {}
    for r in records:
        for k, v in r.stage_seconds.items():
            stages[k] = stages.get(k, 0.0) + v / steps
    lookups = sum(r.lookups for r in records)
    hits = None if records[0].hits is None else sum(r.hits for r in records) / max(lookups, 1)
    return BenchResult(
        name,
        steps,
        sum(r.samples for r in records) / seconds,
        seconds,
        stages,
        hits,
        lookups_per_step=lookups / steps,
        fetched_rows_per_step=sum(r.fetched_rows for r in records) / steps,
        written_back_rows_per_step=sum(r.written_back_rows for r in records) / steps,
        evicting_tables_per_step=sum(r.evicting_tables for r in records) / steps,
        setup_s=setup_s,
        warmup_s=warmup_s,
        plan_syncs_per_step=sum(r.plan_syncs for r in records) / steps,
        plan_launches_per_step=sum(r.plan_launches for r in records) / steps,
        host_syncs_per_step=None if counted is None else float(counted.host_syncs),
        kernel_launches_per_step=None if counted is None else float(counted.kernel_launches),
    )
