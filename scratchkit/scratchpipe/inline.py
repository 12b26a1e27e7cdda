"""The inline driver: every stage of batch b in the trainer's own thread, just before Train(b).

Nothing overlaps: the step is Plan(b) + Collect(b) + Write-back(b) + Transfer(b) + Insert(b) +
Train(b). `on_step` (PlanIn.STEP, `lru-device`: a cache filled on demand, on a GPU too) makes
them the step's own work: queued on the trainer's stream (`Device.kernel_stream`, in order with
Train's) and counted on Train's path. Otherwise (PlanIn.INLINE) it is what `scratchpipe-device` does where its "device" is the host's CPU: its
stages are NumPy calls there, too short to release the GIL for long, and on worker threads they
only take turns with Train for it. Measured on 2 cores (`tiny`, 40 steps, 5 alternating rounds),
Train took 1.9 ms a step beside them and 0.74 ms inline, and the step ran 1.34x faster inline
(docs/costmodel.md has the run). On a GPU the same stages are launches of the
device's kernels, which run while the threads go on: there the threads driver overlaps them.

The body is host_process.py's (`stages_in_order`), the very order the host process runs, so
every rule of schedule.py holds: rule 3's Train(b-D-1) is always done when Train(b-1) is, and
Collect(b) comes after every earlier Write-back. A failing stage raises the PipelineError that
names it and the batch, in the caller's thread, with nothing of the batch half-inserted: Write-
back, Transfer and Insert run under the row stores' lock, as everywhere.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Callable

from scratchkit.device_work import Path, on_path
from scratchkit.scratchpipe.events import Stage
from scratchkit.scratchpipe.host_process import stages_in_order
from scratchkit.scratchpipe.host_stages import InFlight
from scratchkit.scratchpipe.schedule import PipelineError


class InlineStages:
    """The driver of batches start..stop-1 whose stages run in the caller's thread."""

    def __init__(self, stages, schedule, plan_ahead, start: int, stop: int, clock, hook=None, on_step: bool = False):
        self.stages, self.clock, self.hook = stages, clock, hook
        self.body = stages_in_order(stages, schedule, plan_ahead)
        # the step's own work (on_step), or counted as the threads' would be, on Plan's path
        self.path, self.stream = (Path.TRAIN, stages.dev.kernel_stream) if on_step else (Path.PLAN, nullcontext)

    def wait_inserted(self, b: int, cancelled=lambda: False) -> InFlight:
        """Batch b, planned, collected and inserted right now: ready to train."""
        with on_path(self.path), self.stream():
            planned = self.body(b, self)
        self.clock.plans(planned.tables)
        return InFlight(b, planned.batch, planned.tables, inserted=True)

    # --- what the body asks of where it runs (as forked.ChildSide) ---------------------------------
    def stage(self, stage: Stage, b: int, run: Callable, *args):
        """Run one stage of batch b: the test hook, then the stage, timed."""
        try:
            if self.hook is not None:
                self.hook(stage, b)
            t0 = time.perf_counter()
            result = run(*args)
        except Exception as error:  # Ctrl-C cannot land here: the trainer holds it until the step ends
            raise PipelineError(stage, b, error) from error
        self.clock.record(
            stage, b, t0, time.perf_counter(), getattr(result, "read_seconds", 0.0), getattr(result, "work", None)
        )
        return result

    def reach_trained(self, b: int) -> bool:
        return True  # Train(b) is done: every batch before the one being readied has trained

    def hold(self, lock) -> bool:
        lock.acquire()  # free: a flush between steps runs in this same thread, never during one
        return True

    # --- the trainer's side, as every driver's ----------------------------------------------------
    def trained(self, b: int) -> None:
        pass

    def exclusive(self):
        """A batch boundary, for a flush between steps: no stage runs between two steps here."""
        return self.stages.lock

    def alive(self) -> bool:
        return True

    def stop(self, finished: bool) -> None:
        pass


__all__ = ["InlineStages"]
