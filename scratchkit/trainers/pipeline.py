"""The threads and queues that run ScratchPipe's stages for one `train()` call: on a GPU, and
for the hazard lab's write-back-order switch (a CPU run's host stages get a process instead:
host_process.py).

Plan is made by a planner process (or in a thread; scratchkit/trainers/plan_ahead.py) and received
by a worker thread; Collect, Insert (with Transfer) and Write-back each run on a worker thread;
Train runs in the caller's thread. Bounded queues connect them, so memory stays bounded. Every
wait wakes up every `POLL` seconds to look at the halt flag, so nothing hangs: a failing stage
halts the run, and the caller's thread re-raises it as a `PipelineError` naming the stage and the
batch.

The stages themselves are the trainer's methods (scratchkit/trainers/scratchpipe.py); this module
only orders them.
"""
from __future__ import annotations

import queue
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scratchkit.events import Stage

if TYPE_CHECKING:   # the trainer imports this module; annotations only
    from scratchkit.trainers.scratchpipe import ScratchPipeTrainer

POLL = 0.05   # seconds a waiting thread sleeps between looks at the halt flag


class PipelineError(RuntimeError):
    """A stage failed; the message names the stage and the batch."""

    def __init__(self, stage: Stage, batch: int, error: BaseException):
        super().__init__(f"ScratchPipe stage {stage.value} failed on batch {batch}: "
                         f"{type(error).__name__}: {error}")
        self.stage, self.batch = stage, batch


@dataclass
class InFlight:
    """One planned batch moving through the stages."""

    index: int
    batch: object
    tables: list                                     # TablePlan per table
    staged: list = field(default_factory=list)       # (rows, state) fetched per table
    victim_rows: list | None = None                  # (rows, state) copied out per table
    evicted: bool = False                            # Insert replaced the victims in their slots
    inserted: threading.Event = field(default_factory=threading.Event)
    written_back: threading.Event = field(default_factory=threading.Event)
    stale_reads: int = 0                             # misses collected before their write-back


class PipelineRun:
    """The worker threads and queues for batches start..stop-1 of one `train()` call."""

    def __init__(self, trainer: ScratchPipeTrainer, start: int, stop: int, where):
        self.trainer, self.start_index, self.stop_index = trainer, start, stop
        depth = trainer.depth
        self.items: dict[int, InFlight] = {}
        self.error: tuple[Stage, int, BaseException] | None = None
        self.halt = threading.Event()
        self._cond = threading.Condition()
        self._trained_upto = start - 1        # last batch whose Train finished
        self._written_upto = start - 1        # last batch whose write-back landed (in order)
        self.last_step_end = time.perf_counter()
        self.to_collect: queue.Queue = queue.Queue(maxsize=depth + 1)
        self.to_insert: queue.Queue = queue.Queue(maxsize=depth + 1)
        self.to_write: queue.Queue = queue.Queue(maxsize=depth + 1)
        self.stream = trainer.dev.new_stream()   # Transfer's side stream (None on a CPU)
        # the planner process is forked before any of this run's threads exist
        self.feed = trainer.plan_feed(start, stop, self.halt, where)   # where: PlanIn
        self.threads = [threading.Thread(target=self._guard, args=(f, s), daemon=True,
                                         name=f"scratchpipe-{s.value}")
                        for f, s in ((self._plan_loop, Stage.PLAN), (self._collect_loop, Stage.COLLECT),
                                     (self._insert_loop, Stage.INSERT), (self._write_loop, Stage.WRITE_BACK))]
        for thread in self.threads:
            thread.start()

    # waiting helpers: every wait wakes up regularly to look at the halt flag
    def _wait_until(self, predicate) -> bool:
        with self._cond:
            while not predicate():
                if self.halt.is_set():
                    return False
                self._cond.wait(POLL)
            return True

    def _put(self, q: queue.Queue, item) -> bool:
        while not self.halt.is_set():
            try:
                q.put(item, timeout=POLL)
                return True
            except queue.Full:
                pass
        return False

    def _get(self, q: queue.Queue):
        while not self.halt.is_set():
            try:
                return q.get(timeout=POLL)
            except queue.Empty:
                pass
        return None

    def _guard(self, loop, stage: Stage) -> None:
        try:
            loop()
        except _StageFailure as failure:
            self._fail(failure.stage, failure.batch, failure.error)
        except BaseException as error:  # noqa: BLE001 - surfaced in the caller's thread
            self._fail(stage, -1, error)

    def _fail(self, stage: Stage, batch: int, error: BaseException) -> None:
        with self._cond:
            if self.error is None:
                self.error = (stage, batch, error)
            self.halt.set()
            self._cond.notify_all()

    def _run_stage(self, stage: Stage, b: int, fn, *args):
        try:
            return fn(*args)
        except BaseException as error:  # noqa: BLE001
            raise _StageFailure(stage, b, error) from error

    def _plan_loop(self) -> None:
        for b in range(self.start_index, self.stop_index):
            item = self._run_stage(Stage.PLAN, b, self.trainer.receive_plan, self.feed, b)
            if item is None:
                return
            with self._cond:
                self.items[b] = item
            if not self._put(self.to_collect, item):
                return

    def _collect_loop(self) -> None:
        trainer = self.trainer
        for _ in range(self.start_index, self.stop_index):
            item = self._get(self.to_collect)
            if item is None:
                return
            if trainer.hazards.write_back_order:   # invariant 3: wait for the evictions' write-back
                wait = max((p.wait_for_write_back for p in item.tables), default=-1)
                if not self._wait_until(lambda: self._written_upto >= wait):
                    return
            t0 = time.perf_counter()
            self._run_stage(Stage.COLLECT, item.index, trainer.collect, item, lambda: self._written_upto)
            trainer._add_stage(Stage.COLLECT, item.index, t0, time.perf_counter())
            if not self._put(self.to_insert, item):
                return

    def _insert_loop(self) -> None:
        depth = self.trainer.depth
        for _ in range(self.start_index, self.stop_index):
            item = self._get(self.to_insert)
            if item is None:
                return
            # Plan(b) counted batch b-D-1 as trained: its slots may be Insert(b)'s victims
            if not self._wait_until(lambda: self._trained_upto >= item.index - depth - 1):
                return
            self._run_stage(Stage.INSERT, item.index, self.trainer.transfer_and_insert, item, self.stream)
            item.inserted.set()
            with self._cond:
                self._cond.notify_all()
            if not self._put(self.to_write, item):
                return

    def _write_loop(self) -> None:
        for _ in range(self.start_index, self.stop_index):
            item = self._get(self.to_write)
            if item is None:
                return
            t0 = time.perf_counter()
            self._run_stage(Stage.WRITE_BACK, item.index, self.trainer.write_back, item)
            self.trainer._add_stage(Stage.WRITE_BACK, item.index, t0, time.perf_counter())
            item.written_back.set()
            with self._cond:
                self._written_upto = item.index
                self._cond.notify_all()

    # the caller's side
    @contextmanager
    def exclusive(self):
        """Pause at a batch boundary, for a flush between steps: no Insert runs (the trainer's
        `slots_lock`), and every victim an Insert took out of its slot has landed in the host
        tables (the write-back thread goes on meanwhile; it needs no lock)."""
        with self.trainer.slots_lock:
            self._wait_until(lambda: all(item.written_back.is_set() for item in list(self.items.values())
                                         if item.evicted))
            yield

    def wait_inserted(self, b: int, cancelled=lambda: False) -> InFlight:
        """Batch b, inserted: ready to train. KeyboardInterrupt once `cancelled()` while waiting."""
        def ready():
            if cancelled():
                raise KeyboardInterrupt   # nothing of batch b was taken yet
            item = self.items.get(b)
            return item is not None and item.inserted.is_set()
        if not self._wait_until(ready):
            self.raise_error()
        return self.items[b]

    def trained(self, b: int) -> None:
        with self._cond:
            self._trained_upto = b
            for done in [k for k, item in self.items.items() if k < b and item.written_back.is_set()]:
                del self.items[done]
            self._cond.notify_all()

    def raise_error(self) -> None:
        if self.error is not None:
            stage, batch, error = self.error
            raise PipelineError(stage, batch, error) from error
        raise RuntimeError("ScratchPipe pipeline halted")

    def stop(self, finished: bool) -> None:
        """Join the threads and stop the planner; on an abort, finish the write-backs, then flush."""
        if finished:
            for thread in self.threads:   # every batch went through every stage
                thread.join()
            self.feed.close()
            if self.error is not None:
                self.raise_error()
            return
        self.halt.set()
        for thread in self.threads:
            thread.join()
        self.feed.close()
        trainer = self.trainer
        # complete the host tables: victims copied out by Transfer but not yet written back.
        # (A batch whose Transfer never ran left its victims in their slots: the flush has them.)
        for b in sorted(self.items):
            item = self.items[b]
            if item.victim_rows is not None and not item.written_back.is_set():
                trainer.write_back_copied(item)
        trainer.flush()
        trainer._reset_scratchpads()   # planned-but-untrained state is dropped; refill on resume


class _StageFailure(Exception):
    def __init__(self, stage: Stage, batch: int, error: BaseException):
        super().__init__(str(error))
        self.stage, self.batch, self.error = stage, batch, error
