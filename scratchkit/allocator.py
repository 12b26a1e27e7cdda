"""The C allocator of a training process: a step's big temporaries reused, not faulted in anew.

Every training step allocates the same big temporaries and frees them again: the pooled vectors,
the interaction's [B, T+1, T+1] and their gradients (28 MB each at `criteo-skew`'s batch of 4,096),
the MLPs' activations. glibc's malloc serves a block above its *mmap threshold* with fresh pages
from the OS and hands them back when it is freed, and it returns the free top of its heap to the
OS beyond a *trim threshold*. Both thresholds move by default (the mmap one grows to the largest
block freed so far, up to 32 MiB, and the trim one follows it), so whether a step's temporaries
are reused or faulted in page by page, 4 KiB at a time, depends on what the process happened to
free before. A page fault on a virtual machine costs microseconds (the hypervisor's nested page
tables), and a large profile's step can take thousands of them under the defaults, a few hundred
at most with the thresholds below (tests/test_allocator.py counts them).

`keep_step_memory()` fixes the thresholds: blocks up to 64 MiB come from the heap and are reused
step after step; up to 512 MiB of freed heap stays mapped. Bigger blocks (a large table) are
still their own mappings, returned when freed. The trainers and `scratchkit calibrate` call it,
so a calibration and the steps it predicts meet the same allocator. It is process-wide (like
`torch.set_num_threads`), a no-op where the C library has no `mallopt` (not glibc), and leaves
alone a threshold the user set through glibc's environment variables (`MALLOC_MMAP_THRESHOLD_`,
`MALLOC_TRIM_THRESHOLD_`).
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h> parameter numbers
MMAP_THRESHOLD = 64 * 2**20  # bytes: blocks up to this come from the heap
TRIM_THRESHOLD = 512 * 2**20  # bytes of free heap top kept mapped

_done = False


def keep_step_memory() -> bool:
    """Fix glibc's thresholds for this process (once). -> whether they are set (False: not glibc)."""
    global _done
    if _done:
        return True
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _done = all(
        mallopt(parameter, value) == 1
        for variable, parameter, value in (
            ("MALLOC_MMAP_THRESHOLD_", M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            ("MALLOC_TRIM_THRESHOLD_", M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        )
        if variable not in os.environ
    )
    return _done
