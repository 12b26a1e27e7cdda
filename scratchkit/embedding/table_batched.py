"""Table-batched embedding: every table's lookup, backward and update in one call each, as FBGEMM's
table-batched embedding (TBE) does, and still bit for bit what plain PyTorch computes.

The per-table ops of `scratchkit.embedding.optim` are the specification (the `*_twin` functions
here loop over them). Per table and step they launch about a dozen small torch ops, each with its
own dispatch, allocation and copy: `embedding_bag`, then `diff`, `repeat_interleave` (a gradient
row per lookup), a sparse tensor, `coalesce` (a sort, then one BLAS call per lookup to add
duplicates), then `index_select`, `add_`, `index_copy_`. On a CPU the fast path does the same
float operations in three C++ loops over all tables (`table_batched.cpp`, built with g++ on first
use: tbe_native.py), on `host_threads()` threads (a trainer sets them from
`TrainConfig.threads`; else as many as torch uses): threads take whole tables, and where there are
more threads than tables each table is cut into runs among them too (about four runs a thread): the
forward's bags, the backward's sort and sums, the update's rows. Each bag's sum and each row's
coalesced gradient is still one thread's, in the order below, so the result is the same bit for bit
at every thread count:

    pooled_lookup_tables        pooled [B, T, dim]: each bag's rows added in lookup order
    embedding_backward_tables   each table's lookups sorted by id in the order torch.sort leaves
                                them (the sort coalesce uses, so duplicates add in its order: see
                                optim.py), then one walk down them adds each id's gradients
    apply_updates               SGD: row = fma(-lr, g, row), torch's add_(alpha=-lr)

With SGD the last two can be one pass, as FBGEMM's CPU TBE does them (fused_sgd.py: `gpu-only`
trains this way on a CPU), the same float operations in the same order.

Which order duplicates add in is the whole question of exactness, and torch.sort decides it. Under
RADIX_MIN lookups torch sorts with libstdc++'s introsort, which the C++ loop repeats step by step
(twice as fast, as its partitions do without branches); `sorts_like_torch` (tbe_native.py) checks
on first use that the orders agree here, and the tests hold the loop against torch.sort on
thousands of arrays, adversarial ones included. From RADIX_MIN lookups torch sorts stably (by id,
then lookup: `sorts_stably_like_torch` checks it), an order with no ties left, which the loop's
own radix sort gives however it is cut: a long table is sorted in runs on the threads
(sort_runs.cpp), its sorted lookups cut at id boundaries, each run's sums one thread's. A table
introsort orders stays whole, one thread's (the order it leaves equal ids in comes only from the
whole sort; such tables are short). Where a check fails, a table takes torch.sort's own
permutation (`tbe_native.loop_orders`).

`SummationOrder.BY_ID` (an option, `TrainConfig.summation_order`) gives up that exactness for speed,
as FBGEMM's CPU backward does: each id's gradients add in lookup order (a stable radix sort, about
half introsort's time at 2k lookups a table), so the sums differ from PyTorch's by float rounding.

The twins run wherever the fast path cannot: tensors on a GPU, optimizer state (Adagrad's update
stays torch's, after the batched backward), no compiler, or `SCRATCHKIT_NATIVE=0`.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

from scratchkit.config import OptimizerConfig, OptimizerKind, SummationOrder
from scratchkit.device_work import launched
from scratchkit.embedding.optim import apply_update, embedding_backward, pooled_lookup, slots_of_unique
from scratchkit.embedding.tbe_native import (
    LOOPS,
    check_same_shapes,
    check_status,
    data_addresses,
    host_threads,
    int64s,
    loop_orders,
    loops_take,
)


@dataclass(frozen=True)
class FlatBuffers:
    """The C++ backward's output, all tables in one buffer: table t's rows are
    starts[t] .. starts[t] + counts[t] of `index` [N] and `grad_sum` [N, dim]."""

    index: torch.Tensor
    grad_sum: torch.Tensor
    starts: ctypes.Array  # [T] int64
    counts: ctypes.Array  # [T] int64


class Coalesced:
    """Every table's coalesced gradients: `self[t]` = (rows or slots [u_t], summed grads [u_t, dim]).
    Built from per-table pairs, or from the C++ backward's `flat` buffers (then the per-table
    views are made only if someone asks: the batched update reads the buffers)."""

    def __init__(self, tables: list[tuple[torch.Tensor, torch.Tensor]] | None = None, flat: FlatBuffers | None = None):
        self._tables, self.flat = tables, flat

    @property
    def tables(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        if self._tables is None:
            f = self.flat
            self._tables = [(f.index[s : s + u], f.grad_sum[s : s + u]) for s, u in zip(f.starts, f.counts)]
        return self._tables

    def __iter__(self):
        return iter(self.tables)

    def __getitem__(self, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.tables[t]

    def __len__(self) -> int:
        return len(self.flat.counts) if self._tables is None else len(self._tables)


class BackwardWorkspace:
    """The C++ backward's output buffers, kept by a trainer from one step to the next.

    The backward writes each table's distinct ids and summed gradients into buffers sized for its
    lookups ([N] and [N, dim]: the distinct count is known only once sorted). Made fresh each step,
    a buffer beyond glibc's mmap threshold (32 MiB at most) is new pages from the OS each time,
    and every page faults on its first write: ~65 ns a 256 B row here, as long as the sums
    themselves. A trainer that passes its workspace gets views of buffers it already touched, valid
    until its next backward (it updates the tables before then). Without one, fresh buffers."""

    def __init__(self):
        self.index, self.grad_sum = torch.empty(0, dtype=torch.int64), torch.empty(0)
        self.packed = torch.empty(0, dtype=torch.int64)  # the fused update's sorted lookups

    def take(self, n: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
        """index [n] and grad_sum [n, dim], grown (never shrunk) to fit."""
        if self.index.numel() < n:
            self.index = torch.empty(n, dtype=torch.int64)
        if self.grad_sum.numel() < n * dim:
            self.grad_sum = torch.empty(n * dim)
        return self.index[:n], self.grad_sum[: n * dim].view(n, dim)

    def take_packed(self, n: int) -> torch.Tensor:
        """packed [n] int64 for `sort_lookups`, grown (never shrunk) to fit."""
        if self.packed.numel() < n:
            self.packed = torch.empty(n, dtype=torch.int64)
        return self.packed[:n]


def native_available() -> bool:
    """Whether the C++ loops can run here (a compiler, or a cached build)."""
    return LOOPS.available()


# --- forward -------------------------------------------------------------------------------------
def pooled_lookup_tables_twin(weights, indices, offsets) -> torch.Tensor:
    """The specification: `pooled_lookup` per table, stacked. -> [B, T, dim]"""
    return torch.stack([pooled_lookup(w, i, o) for w, i, o in zip(weights, indices, offsets)], dim=1)


def pooled_lookup_tables(
    weights: list[torch.Tensor], indices: list[torch.Tensor], offsets: list[torch.Tensor]
) -> torch.Tensor:
    """Sum-pooled bags of every table: `weights[t]` [rows_t, dim] looked up at `indices[t]` [n_t]
    (ids or slots) in bags starting at `offsets[t]` [B]. -> pooled [B, T, dim]"""
    if (
        not loops_take(weights, torch.float32)
        or not loops_take([*indices, *offsets], torch.int64)
        or not all(w.is_contiguous() for w in weights)
    ):
        return pooled_lookup_tables_twin(weights, indices, offsets)
    indices = [i.contiguous() for i in indices]
    offsets = [o.contiguous() for o in offsets]
    num_bags, dim = offsets[0].shape[0], weights[0].shape[1]
    check_same_shapes("offsets", offsets, 0, num_bags, "bags, as offsets[0]")
    check_same_shapes("weights", weights, 1, dim, "columns, as weights[0]")
    pooled = torch.empty(num_bags, len(weights), dim)
    rows, lengths = int64s(w.shape[0] for w in weights), int64s(i.shape[0] for i in indices)
    launched("tbe_forward")  # a C++ call for every table: what a GPU launches as one kernel
    status = LOOPS.library.sk_tbe_forward(
        len(weights),
        num_bags,
        dim,
        data_addresses(weights),
        rows,
        data_addresses(indices),
        lengths,
        data_addresses(offsets),
        pooled.data_ptr(),
        host_threads(),
    )
    check_status(
        status,
        "pooled_lookup_tables: indices[{t}] holds a row outside weights[{t}], or "
        "offsets[{t}] is not a list of bag starts from 0 within indices[{t}]",
    )
    return pooled


# --- backward ------------------------------------------------------------------------------------
def embedding_backward_tables_twin(ids, offsets, grad, num_rows, addresses=None) -> Coalesced:
    """The specification: `embedding_backward` per table (and `slots_of_unique` for addresses)."""
    out = []
    for t in range(len(ids)):
        unique, grad_sum = embedding_backward(ids[t], offsets[t], grad[:, t], num_rows[t])
        out.append((unique if addresses is None else slots_of_unique(unique, ids[t], addresses[t]), grad_sum))
    return Coalesced(out)


def embedding_backward_tables(
    ids: list[torch.Tensor],
    offsets: list[torch.Tensor],
    grad: torch.Tensor,
    num_rows: list[int],
    addresses: list[torch.Tensor] | None = None,
    workspace: BackwardWorkspace | None = None,
    order: SummationOrder = SummationOrder.TORCH,
) -> Coalesced:
    """Pooled grads `grad` [B, T, dim] -> per table, its distinct ids [u] (sorted) and their summed
    gradients [u, dim], as `torch.sparse_coo_tensor(...).coalesce()` sums them.

    `ids[t]` [n_t] are table t's row ids (never slots: optim.py says why), `num_rows[t]` its size.
    `addresses[t]` [n_t], if given, is where each lookup's row lives (a cache slot): then each
    distinct id comes back as its address instead. `workspace`: reuse its buffers (the result is
    then valid until the next call with it). `order`: BY_ID sums each id's gradients in lookup
    order (a stable radix sort in the C++ loop) instead of torch's; where the twin runs, torch's.
    """
    if not loops_take([grad], torch.float32) or not loops_take([*ids, *offsets, *(addresses or [])], torch.int64):
        return embedding_backward_tables_twin(ids, offsets, grad, num_rows, addresses)
    ids = [i.contiguous() for i in ids]
    offsets = [o.contiguous() for o in offsets]
    addresses = [None] * len(ids) if addresses is None else [a.contiguous() for a in addresses]
    lengths = [i.shape[0] for i in ids]
    if grad.dim() != 3 or grad.shape[1] != len(ids):
        raise ValueError(f"grad has shape {tuple(grad.shape)}; expected [B, {len(ids)}, dim]")
    check_same_shapes("offsets", offsets, 0, grad.shape[0], "bags, as grad")
    for t, (a, n) in enumerate(zip(addresses, lengths)):
        if a is not None and a.shape != (n,):
            raise ValueError(f"addresses[{t}] has shape {tuple(a.shape)}; expected one per lookup, ({n},)")
    perms, by_id = loop_orders(ids, num_rows, order)  # perms[t] None: sorted in the loop
    starts = [0]
    for n in lengths[:-1]:
        starts.append(starts[-1] + n)
    dim = grad.shape[2]
    index, grad_sum = (workspace or BackwardWorkspace()).take(sum(lengths), dim)
    counts = int64s([0] * len(ids))
    if grad.stride(2) != 1:
        grad = grad.contiguous()
    launched("tbe_backward")  # a C++ call for every table: what a GPU launches as one kernel
    status = LOOPS.library.sk_tbe_backward(
        len(ids),
        grad.shape[0],
        dim,
        data_addresses(ids),
        data_addresses(perms),
        int64s(lengths),
        data_addresses(offsets),
        data_addresses(addresses),
        grad.data_ptr(),
        grad.stride(0),
        grad.stride(1),
        int64s(starts),
        index.data_ptr(),
        grad_sum.data_ptr(),
        counts,
        host_threads(),
        int64s(by_id),
    )
    check_status(
        status,
        "embedding_backward_tables: ids[{t}] holds an id outside [0, 2^32), or "
        "offsets[{t}] is not a list of bag starts from 0 within ids[{t}]",
    )
    return Coalesced(flat=FlatBuffers(index, grad_sum, int64s(starts), counts))


# --- update --------------------------------------------------------------------------------------
def apply_updates_twin(weights, states, coalesced: Coalesced, config: OptimizerConfig) -> None:
    """The specification: `apply_update` per table."""
    for weight, state, (index, grad_sum) in zip(weights, states, coalesced):
        apply_update(weight, state, index, grad_sum, config)


def apply_updates(
    weights: list[torch.Tensor], states: list[torch.Tensor | None], coalesced: Coalesced, config: OptimizerConfig
) -> None:
    """Update every table's rows `coalesced[t].index` in place with their summed gradients."""
    flat = coalesced.flat
    if (
        config.kind is not OptimizerKind.SGD
        or flat is None
        or not loops_take(weights, torch.float32)
        or not all(w.is_contiguous() for w in weights)
    ):
        apply_updates_twin(weights, states, coalesced, config)
        return
    launched("tbe_sgd")  # a C++ call for every table: what a GPU launches as one kernel
    status = LOOPS.library.sk_tbe_sgd(
        len(weights),
        flat.grad_sum.shape[1],
        data_addresses(weights),
        int64s(w.shape[0] for w in weights),
        flat.index.data_ptr(),
        flat.grad_sum.data_ptr(),
        flat.starts,
        flat.counts,
        -config.lr,
        host_threads(),
    )
    check_status(status, "apply_updates: coalesced[{t}] names a row outside weights[{t}]")
