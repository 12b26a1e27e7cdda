"""The backward and SGD update of every table in one pass, as FBGEMM's CPU TBE does them (`gpu-only`
trains this way on a CPU): bit for bit `embedding_backward_tables` then `apply_updates`
(table_batched.py), without writing the summed gradients to memory and reading them back.

    sort_lookups        sorts and checks every table's lookups, in the order the backward sums
                        them: everything that can fail, before anything changes
    fused_sgd_update    sums each distinct id's gradient in registers and applies it to its row at
                        once, the same float operations in the same order

Both are C++ loops (`table_batched.cpp`, loaded by tbe_native.py); `fused_sgd_fits` says where
they can run, and elsewhere a trainer takes the two calls of table_batched.py with their twins.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

from scratchkit.config import OptimizerConfig, OptimizerKind, SummationOrder
from scratchkit.device_work import launched
from scratchkit.embedding.table_batched import BackwardWorkspace
from scratchkit.embedding.tbe_native import (
    LOOPS,
    check_same_shapes,
    check_status,
    data_addresses,
    int64s,
    loop_orders,
    loops_take,
)


@dataclass(frozen=True)
class SortedLookups:
    """Every table's lookups in summation order (`sort_lookups`), for `fused_sgd_update`: table t's
    are packed[starts[t] : starts[t] + lengths[t]], each id << 32 | its lookup's position."""

    packed: torch.Tensor  # [sum n_t] int64
    starts: ctypes.Array  # [T] int64
    lengths: ctypes.Array  # [T] int64
    offsets: list[torch.Tensor]  # [T] of [B]: each table's bag starts
    rows: ctypes.Array  # [T] int64: each table's rows


def fused_sgd_fits(weights: list[torch.Tensor], config: OptimizerConfig) -> bool:
    """Whether `sort_lookups` + `fused_sgd_update` can train these tables: SGD, contiguous float32
    tables of at most 2^32 rows on the CPU, and the C++ loops built."""
    return (
        config.kind is OptimizerKind.SGD
        and loops_take(weights, torch.float32)
        and all(w.is_contiguous() and w.shape[0] <= 2**32 for w in weights)
    )


def sort_lookups(
    ids: list[torch.Tensor],
    offsets: list[torch.Tensor],
    num_rows: list[int],
    workspace: BackwardWorkspace | None = None,
    order: SummationOrder = SummationOrder.TORCH,
) -> SortedLookups:
    """Table t's ids [n_t] (rows of a table of num_rows[t]) in bags starting at offsets[t] [B],
    sorted in the order `embedding_backward_tables` sums them, and checked: an id out of range or
    bad offsets raise here, before anything changes. `workspace`: its buffer holds the result
    (valid until its next use)."""
    if not loops_take([*ids, *offsets], torch.int64):
        raise ValueError(
            "sort_lookups: ids and offsets must be int64 tensors on the CPU (and the C++ loops built: fused_sgd_fits)"
        )
    ids = [i.contiguous() for i in ids]
    offsets = [o.contiguous() for o in offsets]
    check_same_shapes("offsets", offsets, 0, offsets[0].shape[0], "bags, as offsets[0]")
    lengths = [i.shape[0] for i in ids]
    perms, by_id = loop_orders(ids, num_rows, order)  # perms[t] None: sorted in C++
    starts = [0]
    for n in lengths[:-1]:
        starts.append(starts[-1] + n)
    packed = (workspace or BackwardWorkspace()).take_packed(sum(lengths))
    result = SortedLookups(packed, int64s(starts), int64s(lengths), offsets, int64s(num_rows))
    launched("tbe_sort_tables")  # a C++ call for every table: what a GPU launches as one kernel
    status = LOOPS.library.sk_tbe_sort_tables(
        len(ids),
        offsets[0].shape[0],
        data_addresses(ids),
        data_addresses(perms),
        result.lengths,
        data_addresses(offsets),
        result.rows,
        result.starts,
        packed.data_ptr(),
        torch.get_num_threads(),
        int64s(by_id),
    )
    check_status(
        status,
        "sort_lookups: ids[{t}] holds an id outside its table, or offsets[{t}] is not a list "
        "of bag starts from 0 within ids[{t}]",
    )
    return result


def fused_sgd_update(weights: list[torch.Tensor], lookups: SortedLookups, grad: torch.Tensor, lr: float) -> None:
    """SGD on every table straight from the pooled grads `grad` [B, T, dim]: each distinct id's
    gradient summed as `embedding_backward_tables` sums it, then its row updated as `apply_updates`
    does (bit for bit the two of them, without their buffers; `fused_sgd_fits` says where it runs)."""
    if grad.dim() != 3 or grad.shape[1] != len(weights) or grad.shape[0] != lookups.offsets[0].shape[0]:
        raise ValueError(
            f"grad has shape {tuple(grad.shape)}; expected [{lookups.offsets[0].shape[0]}, {len(weights)}, dim]"
        )
    if not loops_take([grad], torch.float32):
        raise ValueError("fused_sgd_update: grad must be a float32 tensor on the CPU")
    check_same_shapes("weights", weights, 1, grad.shape[2], "columns, as grad")
    if [w.shape[0] for w in weights] != list(lookups.rows):
        raise ValueError(
            f"fused_sgd_update: weights of {[w.shape[0] for w in weights]} rows, sorted for "
            f"tables of {list(lookups.rows)}"
        )
    if grad.stride(2) != 1:
        grad = grad.contiguous()
    launched("tbe_fused_sgd")  # a C++ call for every table: what a GPU launches as one kernel
    status = LOOPS.library.sk_tbe_fused_sgd(
        len(weights),
        grad.shape[0],
        grad.shape[2],
        lookups.packed.data_ptr(),
        lookups.starts,
        lookups.lengths,
        data_addresses(lookups.offsets),
        grad.data_ptr(),
        grad.stride(0),
        grad.stride(1),
        data_addresses(weights),
        lookups.rows,
        -lr,
        torch.get_num_threads(),
    )
    check_status(status, "fused_sgd_update: the sorted lookups of table {t} do not fit its weights or offsets")
