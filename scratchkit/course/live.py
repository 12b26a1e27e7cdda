"""Training in a background thread, so a notebook stays responsive while a trainer runs.

A loop in a notebook cell blocks the kernel: sliders and buttons wait until the cell ends. A
`BackgroundRun` trains in a `threading.Thread` instead and hands the records to a callback at most
every `every` seconds (a plot redrawn on every step would spend its time redrawing). The thread
never prints (output from a thread lands in whichever cell runs at the time); an error is kept in
`run.error` for the caller to show. `stop()` asks the loop to end after the current step, and the
trainer's `close()` (which flushes a cache or scratchpad to the host tables) always runs.

`BenchProgress` is one progress bar over a `run_bench` call's trainers (its `wrap` argument), so a
benchmark cell that takes seconds shows how far it is.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from scratchkit.trainers.base import StepRecord, Trainer


class BackgroundRun:
    """`BackgroundRun(make_trainer, steps, on_records).start()`; later `stop()` or `join()`.

    Args:
        make_trainer: builds the trainer, in the thread (construction can take a moment).
        steps: how many steps to train at most.
        on_records: called from the thread with every record so far (a new list each time),
            throttled to once per `every` seconds, and once more at the end.
        every: seconds between two calls of `on_records`.
        on_finish: called from the thread last of all, after the trainer is closed or an error
            was kept in `error`: the place to say "finished" or show the error.
        stop_after: end as `stop()` does once this many steps are done (a stop at a step known
            beforehand, whatever the machine's speed), or None.
        chunk: train at most this many steps per `trainer.train` call, one call after another (None:
            all `steps` in one). A trainer that plans its whole call before its first step, as
            ScratchPipe does, then starts in the time of a chunk, not of a long run, and pauses
            as long at each chunk's start.
    """

    def __init__(
        self,
        make_trainer: Callable[[], Trainer],
        steps: int,
        on_records: Callable[[list[StepRecord]], None] | None = None,
        every: float = 0.1,
        on_finish: Callable[["BackgroundRun"], None] | None = None,
        stop_after: int | None = None,
        chunk: int | None = None,
    ):
        if steps <= 0:
            raise ValueError(f"steps must be positive, got {steps}")
        if every < 0:
            raise ValueError(f"every must be >= 0 seconds, got {every}")
        self._make_trainer, self.steps, self.every = make_trainer, steps, every
        self._on_records, self._on_finish = on_records, on_finish
        self._records: list[StepRecord] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stop_after = stop_after
        self.chunk = chunk or steps
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.closed = False  # True once the trainer's close() has run
        self.trainer: Trainer | None = None

    @property
    def records(self) -> list[StepRecord]:
        with self._lock:
            return list(self._records)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "BackgroundRun":
        if self._thread is not None:
            raise RuntimeError("this run has already been started; make a new BackgroundRun")
        self._thread = threading.Thread(target=self._loop, name="scratchkit-training", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 30.0) -> None:
        """Ask the loop to end after its current step, and wait for the trainer to be closed."""
        self._stop.set()
        self.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _notify(self) -> None:
        if self._on_records is not None:
            self._on_records(self.records)

    def _loop(self) -> None:
        last = time.perf_counter()
        try:
            self.trainer = self._make_trainer()
            try:
                while len(self._records) < self.steps and not self._stopping():
                    last = self._train_chunk(min(self.chunk, self.steps - len(self._records)), last)
            finally:
                self.trainer.close()  # flush: the host tables are complete again
                self.closed = True
            self._notify()
        except BaseException as error:  # noqa: BLE001 - kept for the caller, never printed
            self.error = error
        finally:
            if self._on_finish is not None:
                try:
                    self._on_finish(self)
                except BaseException as error:  # noqa: BLE001
                    self.error = self.error or error

    def _stopping(self) -> bool:
        return self._stop.is_set() or len(self._records) == self._stop_after

    def _train_chunk(self, count: int, last: float) -> float:
        """Train `count` steps (fewer if stopped), notifying as the loop does; the last notify time."""
        steps = self.trainer.train(count)
        try:
            for record in steps:
                with self._lock:
                    self._records.append(record)
                if time.perf_counter() - last >= self.every:
                    self._notify()
                    last = time.perf_counter()
                if self._stopping():
                    break
        finally:
            steps.close()  # end the trainer's loop (a pipeline stops its threads)
        return last


class BenchProgress:
    """`run_bench(..., wrap=BenchProgress(trainers, steps))`: one bar for all the timed steps, named
    by the trainer timing now (tqdm: a widget in a notebook, text on a terminal)."""

    def __init__(self, trainers: list[str], steps: int):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=len(trainers) * steps, desc="bench", unit="step")

    def __call__(self, iterable, total: int, desc: str):
        self.bar.set_description(desc)
        for item in iterable:
            yield item
            self.bar.update(1)
        if self.bar.n >= self.bar.total:
            self.bar.close()
