"""Wall time per stage per step, so the time breakdown is data rather than a guess (or, for the
calibration's in-step timings, the CPU time of the training thread: `clock`)."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager


class StageTimer:
    """`with timer.stage("update"): ...` adds the block's wall time to that stage.

    On CUDA the device is synchronised at the end of each stage, or the time of asynchronous kernels
    would be charged to whichever stage happens to wait for them.
    """

    def __init__(self, synchronize=None):
        self._synchronize = synchronize
        self.seconds: dict[str, float] = defaultdict(float)
        # what a stage's seconds are read from: wall time (the trainers' figures), or
        # time.thread_time where the calibration times a stage as it times every other constant
        self.clock = time.perf_counter

    @contextmanager
    def stage(self, name: str):
        clock = self.clock
        start = clock()
        try:
            yield
        finally:
            if self._synchronize is not None:
                self._synchronize()
            self.seconds[name] += clock() - start

    def take(self) -> dict[str, float]:
        """The seconds per stage since the last take, and reset."""
        seconds, self.seconds = dict(self.seconds), defaultdict(float)
        return seconds
