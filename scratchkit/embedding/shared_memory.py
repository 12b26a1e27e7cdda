"""Arrays in memory that a forked process shares with its parent, writes included.

ScratchPipe's host process (scratchkit/scratchpipe/host_process.py) collects rows from the host
tables, inserts them into the scratchpad and writes victims back, while the trainer's process
trains on the same scratchpad. After a fork, ordinary memory is copy-on-write: each process would
see only its own writes. An anonymous shared mapping is the same pages in both, and unlike
`torch.Tensor.share_memory_()` it needs no /dev/shm, which containers often cap at 64 MB.

What a reader would not guess: the forked process has the pages but not their page-table entries.
Linux copies none for a shared mapping at a fork (it can fault them in again, and a fork of a big
process stays cheap), so the child takes a minor fault at its first touch of every page. `map_in`
takes them all at once, before the child's first stage, instead of one by one inside the stages'
clocks.
"""

from __future__ import annotations

import ctypes
import mmap
import sys

import numpy as np
import torch

PAGE = mmap.PAGESIZE
# madvise(2)'s "fault in every page of this range now" (Linux 5.14 and later). Read, not write: on
# a shared mapping a read fault maps the page writable already, and on private memory a write
# populate would copy every copy-on-write page. Python 3.11's mmap module does not name it, and
# the range here is an array's, so it is called through ctypes on the array's own address.
MADV_POPULATE_READ = 22
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def shared_array(shape: tuple[int, ...], dtype) -> np.ndarray:
    """Zeros of `shape` in shared memory: made before a fork, both processes see every write."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    pages = mmap.mmap(-1, max(1, count * dtype.itemsize))  # anonymous, MAP_SHARED, zero-filled
    return np.frombuffer(pages, dtype=dtype, count=count).reshape(shape)


def shared_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor's copy in shared memory (same shape and dtype)."""
    array = shared_array(tuple(tensor.shape), tensor.numpy().dtype)
    shared = torch.from_numpy(array)
    shared.copy_(tensor)
    return shared


def map_in(arrays) -> int:
    """Page-table entries now for every page of these arrays (NumPy or CPU tensors, contiguous;
    None skipped): in a forked process, before it touches them. -> pages mapped in; 0 where the
    kernel cannot (not Linux, or before 5.14), and the pages then fault in at first touch as before."""
    pages = 0
    for array in arrays:
        if array is None:
            continue
        address, nbytes = _extent(array)
        start = address - address % PAGE  # madvise wants a page-aligned start
        length = address + nbytes - start
        if (
            nbytes
            and _LIBC is not None
            and _LIBC.madvise(ctypes.c_void_p(start), ctypes.c_size_t(length), MADV_POPULATE_READ) == 0
        ):
            pages += -(-length // PAGE)
    return pages


def _extent(array) -> tuple[int, int]:
    """(first byte's address, bytes) of a contiguous NumPy array or CPU tensor."""
    if isinstance(array, torch.Tensor):
        return array.data_ptr(), array.numel() * array.element_size()
    return array.__array_interface__["data"][0], array.nbytes
