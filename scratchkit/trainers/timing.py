"""Wall time per stage per step, so the time breakdown is data rather than a guess."""
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

    @contextmanager
    def stage(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            if self._synchronize is not None:
                self._synchronize()
            self.seconds[name] += time.perf_counter() - start

    def take(self) -> dict[str, float]:
        """The seconds per stage since the last take, and reset."""
        seconds, self.seconds = dict(self.seconds), defaultdict(float)
        return seconds
