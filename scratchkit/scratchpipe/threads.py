"""The threads driver: ScratchPipe's host stages on worker threads of the trainer's process.

It runs schedule.py's rules with three threads and bounded queues between them; Train runs in
the caller's thread:

    plans thread     Plan(b), b = start, start+1, ...   (from a forked planner, or made right here)
    collect thread   Collect(b), once rule 2 allows
    evict thread     Write-back(b), Transfer(b), Insert(b), once Train(b-D-1) has finished (rule 3)
    caller           Train(b), once Insert(b) is done (rule 4)

A GPU run uses it (the host stages release the GIL in their copies and kernels); so does the
hazard lab's write-back-order switch, which needs Collect to run apart from the Write-backs it
should wait for. Every wait wakes up every POLL seconds to look at the halt flag, so nothing hangs:
a failing stage halts the run, and the caller's thread raises it as a PipelineError naming the
stage and the batch.
"""

from __future__ import annotations

import queue
import threading
import time

from scratchkit.device_work import Path, on_path
from scratchkit.scratchpipe.events import Stage
from scratchkit.scratchpipe.forked import POLL
from scratchkit.scratchpipe.host_stages import InFlight
from scratchkit.scratchpipe.schedule import EVICTING_STAGES, PipelineError


class ThreadStages:
    """The worker threads for batches start..stop-1 of one `train()` call."""

    def __init__(self, stages, schedule, plans, start: int, stop: int, clock, hook=None):
        self.stages, self.schedule, self.plans, self.clock, self.hook = stages, schedule, plans, clock, hook
        self.start_index, self.stop_index = start, stop
        self.items: dict[int, InFlight] = {}
        self.error: PipelineError | None = None
        self.halt = threading.Event()
        self._cond = threading.Condition()
        self._trained_upto = self._written_upto = start - 1  # the last batch Train / Write-back finished
        self.to_collect: queue.Queue = queue.Queue(maxsize=schedule.depth + 1)
        self.to_evict: queue.Queue = queue.Queue(maxsize=schedule.depth + 1)
        self.threads = [
            threading.Thread(target=self._guard, args=(loop,), daemon=True, name=f"scratchpipe-{name}")
            for loop, name in ((self._plan_loop, "plan"), (self._collect_loop, "collect"), (self._evict_loop, "evict"))
        ]
        for thread in self.threads:
            thread.start()

    # --- the stages' threads ----------------------------------------------------------------------
    def _plan_loop(self) -> None:
        for b in range(self.start_index, self.stop_index):
            try:
                self._at(Stage.PLAN, b)
                planned = self.plans.next(b, self.halt.is_set)  # None once halted
            except PipelineError:
                raise
            except BaseException as error:  # noqa: BLE001 - surfaced in the caller's thread
                raise PipelineError(Stage.PLAN, b, error) from error
            if planned is None:
                return
            self.clock.plans(planned.tables)
            item = InFlight(b, planned.batch, planned.tables)
            with self._cond:
                self.items[b] = item
            if not self._put(self.to_collect, item):
                return

    def _collect_loop(self) -> None:
        for _ in range(self.start_index, self.stop_index):
            item = self._get(self.to_collect)
            waits_for = self.schedule.collect_waits_for(item.tables) if item is not None else -1
            if item is None or not self._wait_until(lambda: self._written_upto >= waits_for):
                return
            self._timed(Stage.COLLECT, item, lambda: self.stages.collect(item, self._written_upto))
            if not self._put(self.to_evict, item):
                return

    def _evict_loop(self) -> None:
        for _ in range(self.start_index, self.stop_index):
            item = self._get(self.to_evict)
            after = self.schedule.evict_waits_for(item.index) if item is not None else 0
            if item is None or not self._wait_until(lambda: self._trained_upto >= after):
                return
            self.stages.wait_for_train(after)  # that Train's update done on the device, not only queued
            with self.stages.lock:  # a flush sees the slots between batches only
                for stage in EVICTING_STAGES:
                    run = self.stages.evicting(stage)
                    self._timed(stage, item, lambda: run(item))
                    if stage is Stage.WRITE_BACK:
                        with self._cond:
                            self._written_upto = item.index
                            self._cond.notify_all()
            with self._cond:
                item.inserted = True
                self._cond.notify_all()

    def _at(self, stage: Stage, b: int) -> None:
        if self.hook is not None:
            self.hook(stage, b)

    def _timed(self, stage: Stage, item: InFlight, run) -> None:
        try:
            self._at(stage, item.index)
            t0 = time.perf_counter()
            run()
            self.clock.record(stage, item.index, t0, time.perf_counter())
        except PipelineError:
            raise
        except BaseException as error:  # noqa: BLE001 - surfaced in the caller's thread
            raise PipelineError(stage, item.index, error) from error

    def _guard(self, loop) -> None:
        try:
            with on_path(Path.PLAN):  # the stages' threads' waits and launches are not Train's (device_work.py)
                loop()
        except PipelineError as error:
            self._fail(error)
        except BaseException as error:  # noqa: BLE001 - a stage that is not one (a bug): say so
            self._fail(PipelineError(Stage.PLAN, -1, error))

    def _fail(self, error: PipelineError) -> None:
        with self._cond:
            self.error = self.error or error
            self.halt.set()
            self._cond.notify_all()

    # --- waiting: every wait looks at the halt flag every POLL seconds ---------------------------
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

    # --- the caller's side ------------------------------------------------------------------------
    def wait_inserted(self, b: int, cancelled=lambda: False) -> InFlight:
        """Batch b, inserted: ready to train. KeyboardInterrupt once `cancelled()` while waiting."""

        def ready():
            if cancelled():
                raise KeyboardInterrupt  # nothing of batch b was taken yet
            item = self.items.get(b)
            return item is not None and item.inserted

        if not self._wait_until(ready):
            raise self.error or RuntimeError("ScratchPipe's stages halted")
        return self.items.pop(b)

    def trained(self, b: int) -> None:
        with self._cond:
            self._trained_upto = b
            self._cond.notify_all()

    def exclusive(self):
        """A batch boundary of the host stages, for a flush between steps: Write-back, Transfer and
        Insert hold the row stores' lock for each whole batch."""
        return self.stages.lock

    def alive(self) -> bool:
        return True  # threads of the caller's own process

    def stop(self, finished: bool) -> None:
        """Stop the threads and the plan source (after every batch, or at once)."""
        if not finished:
            self.halt.set()
        for thread in self.threads:
            thread.join()
        self.plans.close()
        if finished and self.error is not None:
            raise self.error
