"""The array library's own device work beside the kernels (sorts, scans, fills), each counted as a
launch, and the one way to read device values on the host, counted as a wait (device_work.py).

`xp` is an engine's array module: NumPy where the device is the CPU (the same lines run, and
count, there), CuPy on a GPU, where each call below queues work on the current stream and returns
at once, except `read`, which waits for it. Copying host arrays in (`upload`) queues a copy: it
neither launches a kernel nor waits.
"""

from __future__ import annotations

import numpy as np

from scratchkit.device_work import launched, waited


class ArrayOps:
    """Counted library calls on `xp`'s arrays (int64 unless said)."""

    def __init__(self, xp):
        self.xp = xp

    def upload(self, host, dtype=np.int64):
        """A host array (or list) in device memory."""
        return self.xp.asarray(np.asarray(host, dtype=dtype))

    def zeros(self, n: int, dtype=np.int64):
        launched("zeros")
        return self.xp.zeros(n, dtype=dtype)

    def full(self, n: int, value: int, dtype=np.int64):
        launched("fill")
        return self.xp.full(n, value, dtype=dtype)

    def fill(self, array, value: int) -> None:
        launched("fill")
        array.fill(value)

    def join(self, arrays, dtype):
        """One array of several, end to end (host or device ones)."""
        launched("concatenate")
        return self.xp.concatenate([self.xp.asarray(a, dtype=dtype) for a in arrays] + [self.xp.empty(0, dtype)])

    def sort(self, array):
        launched("sort")
        return self.xp.sort(array)

    def argsort(self, array):
        launched("argsort")
        return self.xp.argsort(array)

    def scan(self, flags, out=None):
        """The inclusive scan (cumulative sum) of int64 flags or counts."""
        launched("scan")
        return self.xp.cumsum(flags, out=out)

    def read(self, array, what: str) -> np.ndarray:
        """The array's values on the host: the host waits for the device to reach it."""
        waited(what)
        return array if self.xp is np else self.xp.asnumpy(array)
