"""Measure trainers side by side on identical batches: samples/s and where the time goes."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from itertools import islice

from scratchkit.data.synthetic import SyntheticSource
from scratchkit.device_ops import counting_ops
from scratchkit.device_work import Path, snapshot
from scratchkit.trainers import make_trainer, pipelined


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
    # what a step asks of the device (device_work.py): on Train's path, the host's waits for it and
    # the kernels and copies it queues, torch's ops included, in one counted step (the last
    # warm-up step; None without one); on the path of the stages ahead of Train (ScratchPipe's
    # planner, Collect, Write-back, Insert: their own threads), over the timed steps (None when
    # trainers alternate, as they may plan during each other's turns)
    host_syncs_per_step: float | None = None
    kernel_launches_per_step: float | None = None
    plan_syncs_per_step: float | None = None
    plan_launches_per_step: float | None = None

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
            with make_trainer(name, config, source=source, device=device) as trainer:
                counted, parts = _timed(trainer, name, warmup, [steps], wrap)
                plan = snapshot(Path.PLAN)
                records = list(parts[0])
                plan = snapshot(Path.PLAN) - plan
            results.append(_result(name, steps, records, counted, plan))
    else:
        parts = _parts(steps, rounds)
        with ExitStack() as stack:
            # each made and started (warmed up) before the next is made, ScratchPipe's first: it
            # forks its host process as it starts, and a fork shares every page the process holds
            # then, copy on write: another trainer's tables made before it would fault a page at
            # a time as that trainer writes them, for as long as the child lives
            runs = [None] * len(trainers)  # by position: a trainer may be named twice
            for i in sorted(range(len(trainers)), key=lambda i: not pipelined(trainers[i])):
                trainer = stack.enter_context(make_trainer(trainers[i], config, source=source, device=device))
                runs[i] = _timed(trainer, trainers[i], warmup, parts, wrap)
            records = [[] for _ in trainers]
            for k in range(len(parts)):
                for i in range(len(trainers)) if k % 2 == 0 else reversed(range(len(trainers))):
                    records[i] += list(runs[i][1][k])
        results = [_result(name, steps, taken, run[0]) for name, taken, run in zip(trainers, records, runs)]
    for r in results:
        r.ratio = r.samples_per_s / results[0].samples_per_s
    return results


def _parts(steps: int, rounds: int) -> list[int]:
    """`steps` split into `rounds` near-equal parts (no empty one): 10, 3 -> [4, 3, 3]."""
    rounds = min(rounds, steps)
    return [steps // rounds + (k < steps % rounds) for k in range(rounds)]


def _timed(trainer, name: str, warmup: int, parts: list[int], wrap) -> tuple:
    """Start `trainer` on warmup + sum(parts) steps, take the warm-up, and return the counted
    step's record (the last warm-up step's, torch's ops counted too: `device_ops.counting_ops`,
    which slows a step, so never a timed one; None without a warm-up) and one iterator per part of
    the timed steps (each drained before the next)."""
    if hasattr(trainer, "events"):
        trainer.events.enabled = False  # the visualizer's trace is not what we measure
    steps_run = trainer.train(warmup + sum(parts))
    counted = None
    for k in range(warmup):
        if k < warmup - 1:
            next(steps_run)
            continue
        with counting_ops(trainer.device):
            counted = next(steps_run)
    # the last part is the generator itself, drained: what train() does after its last step
    # (ScratchPipe stops its pipeline) runs before the trainer closes, as in one uninterrupted call
    chunks = [islice(steps_run, n) for n in parts[:-1]] + [steps_run]
    return counted, [wrap(chunk, n, name) if wrap else chunk for chunk, n in zip(chunks, parts)]


def _result(name: str, steps: int, records: list, counted=None, plan=None) -> BenchResult:
    """A trainer's timed steps as one result: samples/s, and each stage's and counter's mean;
    Train's waits and launches from the `counted` step's record, the planner's path's from `plan`
    (its DeviceWork over the timed steps)."""
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
        host_syncs_per_step=None if counted is None else float(counted.host_syncs),
        kernel_launches_per_step=None if counted is None else float(counted.kernel_launches),
        plan_syncs_per_step=None if plan is None else plan.host_syncs / steps,
        plan_launches_per_step=None if plan is None else plan.kernel_launches / steps,
    )
