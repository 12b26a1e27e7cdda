"""The hazard lab: switch off one of ScratchPipe's safety rules and watch the run go wrong.

`HazardLab(config, steps)` trains the exact baseline (`gpu-only`: every table on the device) once,
then `lab.run(Hazards(...))` trains ScratchPipe on the same batches with the chosen switches and
compares: per-step loss, the Train stage's hit rate, stale reads, and the final rows.

    Hazards(holds=False)            Plan may evict a slot that a batch in flight still needs, so
                                    that batch trains on another id's row (invariants 4, then 1, 2)
    Hazards(write_back_order=False) Collect may read an evicted row from the host before its
                                    write-back landed: an old value (invariants 3, then 2)

The scratchpad is sized at the minimum for the data and depth, so Plan must evict often. A race
needs bad timing to show up: with the write-back ordering off, `slow_write_back` seconds of sleep in
every Write-back play a busy host and make the race show in a few steps. (With the ordering on,
Collect waits for the write-back however slow it is, so the sleep would change only the timeline.)
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np

from scratchkit.scratchpipe.invariants import Invariant
from scratchkit.config import CacheParams, TrainConfig
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.scratchpipe.events import EventLog, Stage
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.trainers import make_trainer
from scratchkit.trainers.base import StepRecord
from scratchkit.trainers.scratchpipe import Hazards, ScratchPipeTrainer


@dataclass
class LabResult:
    hazards: Hazards
    records: list[StepRecord]
    baseline_losses: np.ndarray  # [steps]
    max_abs_diff: float  # largest difference of any final embedding row vs the baseline
    events: EventLog
    capacities: list[int]  # scratchpad slots per table

    @property
    def loss_gap(self) -> np.ndarray:
        """[steps] |loss - baseline loss|: zero while the run is exact."""
        return np.abs(np.array([r.loss for r in self.records]) - self.baseline_losses[: len(self.records)])

    @property
    def train_hit_rate(self) -> np.ndarray:
        """[steps] share of Train's lookups whose slot still held the right id (1.0 when correct)."""
        return np.array([r.hits / r.lookups if r.lookups else 1.0 for r in self.records])

    @property
    def stale_reads(self) -> int:
        return int(sum(r.stale_reads for r in self.records))

    @property
    def first_divergence(self) -> int | None:
        """First step whose loss differs from the baseline's, None if none did."""
        diverged = np.flatnonzero(self.loss_gap > 0)
        return int(self.records[diverged[0]].step) if diverged.size else None

    def verdict(self) -> list[str]:
        """What broke, in words, one line per invariant (docs/design.md)."""
        lines = []
        wrong = int(sum(r.lookups - r.hits for r in self.records))
        if wrong:
            lines.append(
                f"{_opening(Invariant.ALL_HITS)} broke: {wrong} lookups found another id "
                f"in their slot, because Plan evicted slots still held by a batch in flight "
                f"({Invariant.HOLDS.cited})."
            )
        if self.stale_reads:
            lines.append(
                f"{_opening(Invariant.NO_STALE_READS)} broke: {self.stale_reads} rows were read from "
                f"the host before their write-back had landed."
            )
        if self.max_abs_diff > 0:
            step = self.first_divergence
            where = f"; the loss first differs at step {step}" if step is not None else ""
            lines.append(
                f"{_opening(Invariant.EXACT)} broke: the final rows differ from the baseline's by "
                f"up to {self.max_abs_diff:.2e}{where}."
            )
        return lines or ["Every invariant held: the run equals the baseline bit for bit."]


def _opening(invariant: Invariant) -> str:
    """'Invariant 1 (every lookup in Train hits)': its citation, to start a sentence."""
    return invariant.cited[0].upper() + invariant.cited[1:]


class HazardLab:
    """Baseline once, then ScratchPipe runs with hazards switched on or off, on the same batches."""

    def __init__(self, config: TrainConfig, steps: int = 16, slow_write_back: float = 0.01):
        if steps <= 0:
            raise ValueError(f"steps must be positive, got {steps}")
        if slow_write_back < 0:
            raise ValueError(f"slow_write_back must be >= 0 seconds, got {slow_write_back}")
        self.steps, self.slow_write_back = steps, slow_write_back
        minimum = max(minimum_capacities(SyntheticSource(config.data), config.cache.depth, 0, steps))
        # the smallest scratchpad the data allows: Plan must evict on most batches
        self.config = config.replace(
            cache=CacheParams(capacity=minimum, depth=config.cache.depth, victim_policy=config.cache.victim_policy)
        )
        self._baseline: tuple[np.ndarray, list] | None = None
        # one run at a time: a run trained ahead (RunsAhead) and one asked for now would share the
        # CPU, and the baseline is trained by whichever comes first
        self._one_at_a_time = threading.RLock()
        self._ahead: RunsAhead | None = None  # the runs trained ahead for the widget showing the lab

    def baseline(self) -> tuple[np.ndarray, list]:
        """(losses [steps], final embedding rows) of the gpu-only trainer; trained on first use."""
        with self._one_at_a_time:
            if self._baseline is None:
                with make_trainer("gpu-only", self.config) as trainer:
                    losses = np.array([r.loss for r in trainer.train(self.steps)])
                    self._baseline = (losses, [w.clone() for w in trainer.embedding_weights()])
            return self._baseline

    def _slow(self, stage: Stage, batch: int) -> None:
        if stage is Stage.WRITE_BACK and self.slow_write_back:
            time.sleep(self.slow_write_back)

    def run(
        self,
        hazards: Hazards = Hazards(),
        on_step: Callable[[list[StepRecord]], None] | None = None,
        own_planner=None,
    ) -> LabResult:
        """Train ScratchPipe with `hazards` on the baseline's batches; `on_step(records so far)` is
        called after every step (a widget draws its progress and the partial result);
        `own_planner`: a planner of your own in place of the kit's (scratchpipe/own_planner.py)."""
        with self._one_at_a_time:
            return self._run(hazards, on_step, own_planner)

    def ahead(self, prepare: Callable[[LabResult], object] = lambda result: None, pause: float = 0.0) -> "RunsAhead":
        """Runs of this lab trained ahead for a widget (`RunsAhead`), closing those trained for the
        widget before: a notebook cell run again makes a new widget on the same lab, and the old
        one's background runs stop, their thread with them."""
        if self._ahead is not None:
            self._ahead.close()
        self._ahead = RunsAhead(self, prepare, pause)
        return self._ahead

    def _run(self, hazards: Hazards, on_step, own_planner) -> LabResult:
        losses, rows = self.baseline()
        hook = None if hazards.write_back_order else self._slow
        trainer = ScratchPipeTrainer(self.config, hazards=hazards, stage_hook=hook, own_planner=own_planner)
        try:
            records = []
            for record in trainer.train(self.steps):
                records.append(record)
                if on_step is not None:
                    on_step(list(records))
            weights = trainer.embedding_weights()
        finally:
            trainer.close()
        diff = max(float((a - b).abs().max()) for a, b in zip(weights, rows))
        return LabResult(hazards, records, losses, diff, trainer.events, list(trainer.capacities))


class Stopped(Exception):
    """A run trained ahead, stopped between two steps: its `RunsAhead` was closed."""


class RunsAhead:
    """Runs of a lab trained ahead on one background thread, so that a control asking for a run
    it was told to expect finds it trained (a run takes about a second; drawing one, a fraction).

    `expect(hazards, ...)` queues a run per setting not already queued; `take(hazards)` returns
    (the run, prepare(run), True) when one was trained ahead (waiting for it if it is under way),
    else trains it now and returns (the run, prepare(run), False). `prepare` does ahead, too, what
    a run needs before it is shown (a widget: its figure's data). A run is taken once: a rerun of
    the same setting gets a new one. `close()` stops the background: whoever starts one closes it
    (a widget's close, `HazardLab.ahead` for the widget after it).
    """

    THREAD = "hazard-lab-ahead"  # the prefix of every background thread's name
    _made = itertools.count()

    def __init__(
        self, lab: HazardLab, prepare: Callable[[LabResult], object] = lambda result: None, pause: float = 0.0
    ):
        """`pause`: seconds the background waits before the runs each `expect` queues, so that the
        page draws what a click sent without a training run taking the CPU from it."""
        self.lab, self.prepare, self.pause = lab, prepare, pause
        self.thread_name = f"{self.THREAD}-{next(self._made)}"  # its own thread's name
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.thread_name)
        self._queued: dict[Hazards, Future] = {}
        self._closed = threading.Event()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def expect(self, *settings: Hazards, then: Callable[[], None] | None = None) -> None:
        """Queue a run of each setting not already queued; `then()` (on the background thread)
        once every one of them has trained. Nothing once closed."""
        if self.closed:
            return
        new = [hazards for hazards in dict.fromkeys(settings) if hazards not in self._queued]
        if new and self.pause:
            self._pool.submit(self._closed.wait, self.pause)  # a close ends the pause at once
        for hazards in new:
            self._queued[hazards] = self._pool.submit(self._run_and_prepare, hazards, background=True)
        if then is not None:
            left = [self._queued[hazards] for hazards in set(settings)]
            lock = threading.Lock()

            def one_done(_):
                with lock:
                    left.pop()
                    if not left and not self.closed:
                        then()

            for future in list(left):
                future.add_done_callback(one_done)

    def wait(self, hazards: Hazards, timeout: float | None = None) -> None:
        """Until the run of `hazards` queued ahead (if any) has trained."""
        future = self._queued.get(hazards)
        if future is not None:
            future.exception(timeout=timeout)

    def take(
        self, hazards: Hazards, on_step: Callable[[list[StepRecord]], None] | None = None
    ) -> tuple[LabResult, object, bool]:
        future = self._queued.pop(hazards, None)
        if future is not None and not future.cancel():  # under way or done: its run, or its error
            try:
                return (*future.result(), True)
            except Exception:
                pass  # trained again below, where it is seen
        return (*self._run_and_prepare(hazards, on_step), False)

    def _run_and_prepare(self, hazards: Hazards, on_step=None, background: bool = False) -> tuple[LabResult, object]:
        if background:  # stopped between two steps once closed
            on_step = self._unless_closed
        result = self.lab.run(hazards, on_step=on_step)
        return result, self.prepare(result)

    def _unless_closed(self, records) -> None:
        if self.closed:
            raise Stopped(f"stopped after {len(records)} steps: closed")

    def close(self) -> None:
        """Drop the runs not yet started, stop the one under way at its next step, and end the
        background thread (waiting for it, unless called from it). A run taken after this trains
        in the caller's thread, as it would had none been expected."""
        self._closed.set()
        for future in self._queued.values():
            future.cancel()
        self._queued.clear()
        on_its_thread = threading.current_thread().name.startswith(self.thread_name)
        self._pool.shutdown(wait=not on_its_thread, cancel_futures=True)
