"""What the device path asks of the host: the times it waits for the device, and the kernels it
queues, counted on any device.

On a GPU the host's job is to queue work ahead of the device. Each time it waits instead (a value
read back with `.item()` or `float(t)`, a copy to the host, a `synchronize`, a CuPy `asnumpy`, or
an array size only the device knows, as after `unique` or a boolean mask) the device's queue drains
and the device idles until the host queues again. Each launch costs the host a few microseconds
too. So the kit's device layer (scratchkit/device.py, the kernel engines) reports each wait with
`waited(what)` and each launch with `launched(what)`, on a CPU as on a GPU: the CPU runs the same
lines (where a wait returns at once), so a test on a CPU can hold a trainer to its budget of waits
a step, and `bench --json` reports both per step.

Counts are kept per `Path`, the thread whose work they are: Train's (the default), ScratchPipe's
planner running ahead on a stream of its own (it may wait for its own kernels without stopping
Train's), and the loader making batches ahead. A thread says which it is with `on_path`.

    work = snapshot(Path.TRAIN)
    ...                                  # one step
    step = snapshot(Path.TRAIN) - work   # its waits and launches, each by what caused it
"""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum


class Path(str, Enum):
    """Whose work a wait or a launch is: the thread it happens on, named by its role (not by a
    pipeline stage: a planner thread may run Collect too)."""

    TRAIN = "trainer"  # the trainer's own thread: every step's forward, backward and update
    PLAN = "planner"  # ScratchPipe's planner, ahead of Train on a stream of its own
    DATA = "loader"  # the loader making batches ahead of the trainer


@dataclass
class DeviceWork:
    """Host waits and kernel launches, each counted by what caused it (a short name)."""

    waits: Counter = field(default_factory=Counter)
    launches: Counter = field(default_factory=Counter)

    @property
    def host_syncs(self) -> int:
        """How many times the host waited for the device."""
        return sum(self.waits.values())

    @property
    def kernel_launches(self) -> int:
        """How many kernels the host queued."""
        return sum(self.launches.values())

    def __sub__(self, earlier: DeviceWork) -> DeviceWork:
        """What was counted since `earlier` (a snapshot of the same path)."""
        return DeviceWork(self.waits - earlier.waits, self.launches - earlier.launches)

    def copy(self) -> DeviceWork:
        return DeviceWork(Counter(self.waits), Counter(self.launches))


_lock = threading.Lock()  # the counts are shared by every thread; a count is one locked add
_counts = {path: DeviceWork() for path in Path}
_thread = threading.local()  # .path: this thread's Path (unset: TRAIN); .work: its own counts


def current_path() -> Path:
    """The path this thread's waits and launches count on (TRAIN unless `on_path` says)."""
    return getattr(_thread, "path", Path.TRAIN)


@contextmanager
def on_path(path: Path):
    """`with on_path(Path.PLAN):` this thread's waits and launches count on `path`."""
    before = current_path()
    _thread.path = Path(path)
    try:
        yield
    finally:
        _thread.path = before


def waited(what: str, times: int = 1) -> None:
    """The host waited for the device `times` times, for `what` (e.g. "loss", "plan sizes")."""
    with _lock:
        _counts[current_path()].waits[what] += times
    _own().waits[what] += times


def launched(what: str, times: int = 1) -> None:
    """The host queued `times` kernels of `what` (a kernel's or an op's name)."""
    with _lock:
        _counts[current_path()].launches[what] += times
    _own().launches[what] += times


def _own() -> DeviceWork:
    if not hasattr(_thread, "work"):
        _thread.work = DeviceWork()
    return _thread.work


def snapshot_here() -> DeviceWork:
    """A copy of everything this thread alone counted, on whatever path: what one stage did while
    other threads count on its path beside it (ScratchPipe's row moves beside its Plan)."""
    return _own().copy()


def snapshot(path: Path = Path.TRAIN) -> DeviceWork:
    """A copy of everything counted on `path` so far; subtract two for what came between."""
    with _lock:
        return _counts[Path(path)].copy()
