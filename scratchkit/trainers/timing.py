"""Time per stage per step, so the time breakdown is data rather than a guess: the wall clock on a
CPU (or, for the calibration's in-step timings, the CPU time of the training thread: `clock`), and
on a GPU events in the device's stream."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager


class StageTimer:
    """`with timer.stage("update"): ...` adds the block's time to that stage.

    `events`: None, the wall clock. On a GPU, the Device's `stage_clock()`: an event is recorded in
    the stream at the block's start and at its end, and the time between them is read once both
    are done, without waiting for them. So timing never stops the device's queue (a synchronize
    at the end of each stage would drain it, and the host's next launches would find it idle).
    A stage's time is then its span on the device's timeline: work the device still had queued
    when the stage began is not the stage's. A stage still running when its step's record is
    made (the update, queued after the step's one wait) is counted in the next record that finds
    it done: over a run, every stage's time is counted once.
    """

    def __init__(self, events=None):
        self._events = events
        self._pending: list[tuple[str, object, object]] = []  # (stage, start event, end event) not read yet
        self.seconds: dict[str, float] = defaultdict(float)
        # what a stage's seconds are read from: wall time (the trainers' figures), or
        # time.thread_time where the calibration times a stage as it times every other constant
        self.clock = time.perf_counter

    @contextmanager
    def stage(self, name: str):
        if self._events is not None:
            start = self._events.mark()
            try:
                yield
            finally:
                self._pending.append((name, start, self._events.mark()))
            return
        clock = self.clock
        start = clock()
        try:
            yield
        finally:
            self.seconds[name] += clock() - start

    def take(self) -> dict[str, float]:
        """The seconds per stage since the last take (on a GPU: of the stages done by now), and reset."""
        waiting = []
        for name, start, end in self._pending:
            seconds = self._events.seconds(start, end)
            if seconds is None:
                waiting.append((name, start, end))
            else:
                self.seconds[name] += seconds
        self._pending = waiting
        seconds, self.seconds = dict(self.seconds), defaultdict(float)
        return seconds
