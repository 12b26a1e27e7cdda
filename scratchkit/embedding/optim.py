"""The one embedding lookup and the one sparse update every trainer uses, wherever its rows live:
host tables, device tables, caches and scratchpads.

Exactness is a matter of doing the same float operations in the same order everywhere, so there is
exactly one place that does them:

1. `coalesce(ids, grads)`: sum the per-lookup gradients of duplicate ids with
   `torch.sparse_coo_tensor(...).coalesce()`, exactly what the reference gets from
   `nn.EmbeddingBag(sparse=True)` + `grad.coalesce()`. Careful: coalesce sums duplicates in the
   order of an *unstable* sort of the index array, not in lookup order. The order is deterministic
   for the same array, but another array with the same grouping (say, the scratchpad slots of the
   same ids) can sum in another order and differ in the last bits. So we always coalesce on the
   **table ids**, the very array the reference coalesces, and address rows by slot only afterwards.
   (Accumulating with `index_add_` instead also differs, by ~1e-6; a test shows both.)
2. `apply_update(weight, state, index, grad_sum)`: gather the touched rows, update them with the
   same primitive torch.optim uses (`add_(values, alpha=-lr)`), write them back. Here `index` may
   be table ids (host or device tables) or slots (caches, scratchpads): the arithmetic per row is
   identical, which is why the caches and ScratchPipe reproduce the baseline bit for bit.

On a CPU the trainers call these through `table_batched.py`, which does the same float operations
for all tables in one C++ loop each; the functions here are its specification and its fallback.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from scratchkit.config import OptimizerConfig, OptimizerKind
from scratchkit.embedding.dense_optim import DenseAdagrad, DenseSGD


def pooled_lookup(weight: torch.Tensor, index: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The forward every trainer shares: sum-pooled bags of rows `weight[index]`. -> [B, dim]

    `index` is table ids or slots, like `apply_update`'s: the same rows in the same order give
    the same sums, wherever they live."""
    return F.embedding_bag(index, weight, offsets, mode="sum")


def lookup_gradients(grad_pooled: torch.Tensor, offsets: torch.Tensor, num_lookups: int) -> torch.Tensor:
    """Sum pooling's backward: each lookup of bag b gets grad_pooled[b]. [B, dim] -> [n, dim]."""
    bag_sizes = torch.diff(offsets, append=torch.tensor([num_lookups], device=offsets.device))
    return torch.repeat_interleave(grad_pooled, bag_sizes, dim=0, output_size=num_lookups)


def coalesce(index: torch.Tensor, grads: torch.Tensor, num_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Unique rows [u] (sorted) and their summed gradients [u, dim] (see the module note on order)."""
    # check_invariants=False: the indices come from checked ids or slots, and the check costs time.
    sparse = torch.sparse_coo_tensor(
        index.unsqueeze(0), grads, (num_rows, grads.shape[1]), check_invariants=False
    ).coalesce()
    return sparse.indices()[0], sparse.values()


def apply_update(
    weight: torch.Tensor,
    state: torch.Tensor | None,
    index: torch.Tensor,
    grad_sum: torch.Tensor,
    config: OptimizerConfig,
) -> None:
    """Update rows `weight[index]` (and their state) in place with coalesced gradients `grad_sum`."""
    rows = weight.index_select(0, index)  # [u, dim]
    if config.kind is OptimizerKind.SGD:
        rows.add_(grad_sum, alpha=-config.lr)
    elif config.kind is OptimizerKind.ADAGRAD:
        # torch.optim.Adagrad's sparse path: sum += g^2; p -= lr * g / (sqrt(sum[g's rows]) + eps)
        acc = state.index_select(0, index).add_(grad_sum.pow(2))  # [u, dim]
        state.index_copy_(0, index, acc)
        rows.add_(grad_sum / acc.sqrt().add_(config.eps), alpha=-config.lr)
    elif config.kind is OptimizerKind.ROWWISE_ADAGRAD:
        # one accumulator per row: the mean of g^2 over the row (FBGEMM's row-wise Adagrad)
        acc = state.index_select(0, index).add_(grad_sum.pow(2).mean(dim=1, keepdim=True))  # [u, 1]
        state.index_copy_(0, index, acc)
        rows.add_(grad_sum / acc.sqrt().add_(config.eps), alpha=-config.lr)
    else:  # pragma: no cover - the enum is closed
        raise ValueError(f"unknown optimizer {config.kind}")
    weight.index_copy_(0, index, rows)


def embedding_backward(
    ids: torch.Tensor, offsets: torch.Tensor, grad_pooled: torch.Tensor, num_rows: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pooled grads [B, dim] of one table -> its distinct ids [u] and their summed grads [u, dim].

    `ids` [n] are the table's row ids (never slots: see the module note), `num_rows` its size.
    """
    grads = lookup_gradients(grad_pooled, offsets, len(ids))  # [n, dim]
    return coalesce(ids, grads, num_rows)


def slots_of_unique(unique_ids: torch.Tensor, ids: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """The slot of each of `unique_ids` [u] (sorted), given the slot of every lookup [n]."""
    position = torch.searchsorted(unique_ids, ids)  # [n] in [0, u)
    return torch.empty_like(unique_ids).index_put_((position,), slots)  # duplicates agree


def make_dense_optimizer(params, config: OptimizerConfig) -> DenseSGD:
    """The MLPs' optimizer: torch.optim's arithmetic, which the reference trains with, without its
    start-up (dense_optim.py). Row-wise Adagrad is an embedding-only idea; the MLPs then use
    element-wise Adagrad."""
    if config.kind is OptimizerKind.SGD:
        return DenseSGD(params, lr=config.lr)
    return DenseAdagrad(params, lr=config.lr, eps=config.eps)
