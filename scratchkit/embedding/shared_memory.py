"""Arrays in memory that a forked process shares with its parent, writes included.

ScratchPipe's host process (scratchkit/scratchpipe/host_process.py) collects rows from the host
tables, inserts them into the scratchpad and writes victims back, while the trainer's process
trains on the same scratchpad. After a fork, ordinary memory is copy-on-write: each process would
see only its own writes. An anonymous shared mapping is the same pages in both, and unlike
`torch.Tensor.share_memory_()` it needs no /dev/shm, which containers often cap at 64 MB.
"""
from __future__ import annotations

import mmap

import numpy as np
import torch


def shared_array(shape: tuple[int, ...], dtype) -> np.ndarray:
    """Zeros of `shape` in shared memory: made before a fork, both processes see every write."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    pages = mmap.mmap(-1, max(1, count * dtype.itemsize))   # anonymous, MAP_SHARED, zero-filled
    return np.frombuffer(pages, dtype=dtype, count=count).reshape(shape)


def shared_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor's copy in shared memory (same shape and dtype)."""
    array = shared_array(tuple(tensor.shape), tensor.numpy().dtype)
    shared = torch.from_numpy(array)
    shared.copy_(tensor)
    return shared
