"""The table-batched C++ loops (`table_batched.cpp`, `torch_sort.cpp`) as a library: built with g++
on first use (scratchkit/native.py), the threads they run on, the C arrays their calls take, and
the checks that their sorts order equal ids as torch.sort does.

The calls themselves, each with its torch twin, are `table_batched.py` (lookup, backward, update)
and `fused_sgd.py` (the backward and SGD update in one pass); this module holds what they share.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from scratchkit.config import SummationOrder
from scratchkit.native import CLibrary, address_array

_P, _I64, _F32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
_SIGNATURES = {  # name: (restype, argtypes); every pointer is passed as an address
    "sk_tbe_forward": (_I64, [_I64, _I64, _I64] + [_P] * 6 + [_I64]),
    "sk_tbe_backward": (_I64, [_I64, _I64, _I64] + [_P] * 6 + [_I64, _I64] + [_P] * 4 + [_I64, _P]),
    "sk_tbe_sort": (_I64, [_P, _I64, _P]),
    "sk_tbe_vector_floats": (_I64, [_I64]),
    "sk_tbe_runs_per_table": (_I64, [_I64] * 4),
    "sk_tbe_sgd": (_I64, [_I64, _I64] + [_P] * 6 + [_F32, _I64]),
    "sk_tbe_sort_tables": (_I64, [_I64, _I64] + [_P] * 7 + [_I64, _P]),
    "sk_tbe_fused_sgd": (_I64, [_I64, _I64, _I64] + [_P] * 5 + [_I64, _I64, _P, _P, _F32, _I64]),
}
LOOPS = CLibrary(
    "tbe",
    Path(__file__).resolve().parent,
    ("table_batched.cpp", "torch_sort.cpp", "sort_runs.cpp", "thread_pool.cpp")
    + ("torch_sort.h", "sort_runs.h", "thread_pool.h"),
    _SIGNATURES,
)
# torch.sort sorts a 1-D int64 array of at least this many elements by a stable radix sort (fast:
# the backward takes its permutation), a shorter one by std::sort, whose order the C++ loop follows
RADIX_MIN = 32768
_threads: int | None = None  # set_host_threads's count; None: torch's


def set_host_threads(threads: int | None) -> None:
    """The threads the C++ loops use from now on, process-wide (as torch.set_num_threads is);
    None: as many as torch uses."""
    global _threads
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"host threads must be an integer >= 1 (or None), got {threads!r}")
    _threads = threads


def host_threads() -> int:
    """The threads the C++ loops run on."""
    return _threads if _threads is not None else torch.get_num_threads()


# --- the calls' arguments ------------------------------------------------------------------------
def loops_take(tensors, dtype: torch.dtype) -> bool:
    """Whether the C++ loops can take these tensors: all on the CPU, all of `dtype`."""
    return all(t.is_cpu and t.dtype is dtype for t in tensors) and LOOPS.available()


def data_addresses(tensors) -> ctypes.Array:
    """A C array of the tensors' data addresses (None -> a null pointer)."""
    return address_array(None if t is None else t.data_ptr() for t in tensors)


def int64s(values) -> ctypes.Array:
    """A C array of int64 (ctypes passes it by address and keeps it alive through the call)."""
    values = list(values)
    return (_I64 * len(values))(*values)


def check_status(status: int, message: str) -> None:
    """Raise the C++ loop's complaint: `message` with {t}, the first table whose input was bad."""
    if status >= 0:
        raise ValueError(message.format(t=status))


def check_same_shapes(what: str, tensors, dim: int, size: int, where: str) -> None:
    """Every one of `tensors` has `size` along `dim`, else a ValueError naming the first that has not."""
    for t, tensor in enumerate(tensors):
        if tensor.dim() <= dim or tensor.shape[dim] != size:
            raise ValueError(f"{what}[{t}] has shape {tuple(tensor.shape)}; every {what} needs {size} {where}")


# --- the loops' sort against torch.sort ----------------------------------------------------------
def torch_sort_order(ids: torch.Tensor) -> torch.Tensor:
    """The permutation [n] that `torch.sort(ids)` gives int64 ids [n] (n < RADIX_MIN, each id below
    2^32), computed by the C++ loop (table_batched.cpp: `sort_like_torch`)."""
    ids = ids.contiguous()
    perm = torch.empty_like(ids)
    if ids.shape[0] >= RADIX_MIN or LOOPS.library.sk_tbe_sort(ids.data_ptr(), ids.shape[0], perm.data_ptr()) >= 0:
        raise ValueError(f"torch_sort_order: ids must number fewer than {RADIX_MIN} and lie in [0, 2^32)")
    return perm


@functools.cache
def sorts_like_torch() -> bool:
    """Whether the C++ loop orders equal ids as this torch's sort does: checked once per process on
    arrays of repeating ids up to RADIX_MIN - 1 (a few ms), so another torch or C++ library costs
    speed, never exactness (the backward then takes torch's own permutation)."""
    generator = torch.Generator().manual_seed(12)
    for n, rows in ((100, 7), (2048, 300), (RADIX_MIN - 1, 1000)):
        ids = torch.randint(0, rows, (n,), generator=generator)
        if not torch.equal(torch_sort_order(ids), torch.sort(ids).indices):
            return False
    return True


@functools.cache
def sorts_stably_like_torch() -> bool:
    """Whether this torch sorts RADIX_MIN and more int64 ids stably (equal ids in lookup order), so
    that the C++ loop's stable sort by id gives torch.sort's own permutation: checked once per
    process on arrays of repeating ids (else the fused update takes torch's permutation)."""
    generator = torch.Generator().manual_seed(13)
    for n, rows in ((RADIX_MIN, 1000), (3 * RADIX_MIN + 5, 50_000)):
        ids = torch.randint(0, rows, (n,), generator=generator)
        if not torch.equal(torch.sort(ids).indices, torch.sort(ids, stable=True).indices):
            return False
    return True


def loop_orders(
    ids: list[torch.Tensor], num_rows, order: SummationOrder
) -> tuple[list[torch.Tensor | None], list[int]]:
    """How the C++ loops order each table's lookups [n_t] (of a table of num_rows[t]) to sum them
    as `order` says: (perms, by_id). perms[t]: torch.sort's own permutation where the loop cannot
    give torch's order itself, else None; by_id[t]: 1 where the loop sorts by id then lookup, a
    stable sort (BY_ID, and torch's order at RADIX_MIN lookups and more, where this torch sorts
    stably), 0 where it repeats torch's introsort (fewer lookups)."""
    perms, by_id = [], []
    for i, rows in zip(ids, num_rows):
        long = i.shape[0] >= RADIX_MIN
        stable = order is SummationOrder.BY_ID or (long and sorts_stably_like_torch())
        mine = rows <= 2**32 and (stable or (not long and sorts_like_torch()))
        perms.append(None if mine else torch.sort(i).indices)
        by_id.append(int(stable))
    return perms, by_id
