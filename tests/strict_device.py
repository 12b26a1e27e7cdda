"""A device that refuses, on a CPU, what makes a GPU wait or launch behind the kit's back.

On a GPU a value read on the host (`int(a)`, `a.max()`, a boolean mask, `flatnonzero`, an `if`
on an array) waits for the device, and every array operation (`a + 1`, `a[idx]`, `a.fill(0)`) is
a kernel launch. NumPy does neither, so a CPU run cannot see them. `StrictDevice` is the part of
the cupy module the device planner uses, over `DeviceArray`s, NumPy arrays that refuse all of it:
the host may only read them through `asnumpy` or `.get()` (each recorded as a wait), and only the
module's own calls (sort, scan, fills) and the kernels (the host build, through a recording
launcher) do work on them, each recorded as a launch. A test then holds what the kit counted
(scratchkit/device_work.py) to what the device was asked to do.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import numpy as np


class UncountedDeviceWork(AssertionError):
    """The code under test read a device array on the host, or worked on one, outside the calls
    that count it."""


def _plain(array) -> np.ndarray:
    return np.ndarray.view(array, np.ndarray) if isinstance(array, DeviceArray) else np.asarray(array)


class DeviceArray(np.ndarray):
    """An array in device memory: its shape is the host's to know, its values are not."""

    device = None  # the StrictDevice that records reads and launches (set by it)

    __array_ufunc__ = None  # arithmetic, comparisons, reductions: launches nobody counted

    def __array_function__(self, func, types, args, kwargs):
        raise UncountedDeviceWork(f"np.{func.__name__} on a device array: a launch or a read nobody counted")

    def _refuse(self, *args, **kwargs):
        raise UncountedDeviceWork("a device array's values read on the host, or changed, outside a counted call")

    __bool__ = __int__ = __index__ = __float__ = __iter__ = __setitem__ = _refuse
    item = tolist = copy = astype = sort = argsort = nonzero = _refuse

    def __getitem__(self, key):
        keys = key if isinstance(key, tuple) else (key,)
        if not all(isinstance(k, slice) for k in keys):
            raise UncountedDeviceWork(f"device array indexed by {type(key).__name__}: a read or a gather kernel")
        return super().__getitem__(key)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype})"

    def fill(self, value) -> None:
        self.device.launches.append("fill")
        _plain(self).fill(value)

    def get(self) -> np.ndarray:
        self.device.reads += 1
        return _plain(self).copy()


class _Stream:
    """A stream: entering it queues nothing, finishing it is a wait (recorded)."""

    def __init__(self, device, non_blocking: bool = False):
        self.device = device

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self) -> None:
        self.device.reads += 1

    def record(self):
        self.device.events.append(("recorded", self))  # the device orders work by it; no host wait
        return self

    def wait_event(self, event) -> None:
        self.device.events.append(("waited", self, event))


class StrictDevice:
    """The cupy names the device planner calls, recording each launch and each read."""

    int64, uint64, bool_ = np.int64, np.uint64, np.bool_
    ndarray = DeviceArray

    def __init__(self):
        self.launches: list[str] = []  # what a GPU would have run, by name
        self.reads = 0  # how often the host waited for it
        self.events = []  # streams ordered after others, on the device
        DeviceArray.device = self
        self.cuda = SimpleNamespace(
            Stream=lambda non_blocking=False: _Stream(self, non_blocking), get_current_stream=lambda: _Stream(self)
        )

    def _made(self, array: np.ndarray, launch: str | None = None) -> DeviceArray:
        if launch:
            self.launches.append(launch)
        return np.ascontiguousarray(array).view(DeviceArray)

    def empty(self, n, dtype=np.float64):
        return self._made(np.empty(n, dtype))

    def zeros(self, n, dtype=np.float64):
        return self._made(np.zeros(n, dtype), "zeros")

    def full(self, n, value, dtype=None):
        return self._made(np.full(n, value, dtype), "fill")

    def asarray(self, array, dtype=None):
        if isinstance(array, DeviceArray):
            if dtype is not None and array.dtype != np.dtype(dtype):
                raise UncountedDeviceWork(f"a device array cast from {array.dtype} to {np.dtype(dtype)}: a kernel")
            return array
        return self._made(np.array(array, dtype=dtype))  # a copy in: queued, neither launch nor wait

    def concatenate(self, arrays):
        return self._made(np.concatenate([_plain(a) for a in arrays]), "concatenate")

    def sort(self, array):
        return self._made(np.sort(_plain(array)), "sort")

    def argsort(self, array):
        return self._made(np.argsort(_plain(array)), "argsort")

    def cumsum(self, array, out=None):
        result = np.cumsum(_plain(array))
        if out is None:
            return self._made(result, "scan")
        self.launches.append("scan")
        _plain(out)[...] = result
        return out

    def asnumpy(self, array) -> np.ndarray:
        self.reads += 1
        return _plain(array).copy()

    def engine(self):
        """The kit's launched engine on this device: the `.cu` kernels run by the host build."""
        from scratchkit.kernels import make_engine
        from scratchkit.kernels.launched import LaunchedEngine

        return LaunchedEngine("strict", _RecordingLauncher(make_engine("host").launcher, self), self, 32)

    def work(self) -> tuple[Counter, int]:
        """(launches by name, reads) so far."""
        return Counter(self.launches), self.reads


class _RecordingLauncher:
    def __init__(self, launcher, device: StrictDevice):
        self.launcher, self.device = launcher, device

    def launch(self, name: str, grid: int, block: int, args: tuple) -> None:
        self.device.launches.append(name)
        self.launcher.launch(name, grid, block, tuple(_plain(a) if isinstance(a, DeviceArray) else a for a in args))
