"""The one sparse update every trainer uses: host tables, device tables, caches and scratchpads.

Exactness is a matter of doing the same float operations in the same order everywhere, so there is
exactly one place that does them:

1. `coalesce(index, grads)`: sum the per-lookup gradients of duplicate rows. We use
   `torch.sparse_coo_tensor(...).coalesce()`, which is what `nn.EmbeddingBag(sparse=True)` +
   `torch.optim` do after `grad.coalesce()`: duplicates are summed in lookup order. (Accumulating
   with `index_add_` instead drifts by ~1e-6 from the reference.)
2. `apply_update(rows, state, index, grad_sum)`: gather the touched rows, update them with the same
   primitive torch.optim uses (`add_(values, alpha=-lr)`), write them back.

The `index` may be table row ids (host or device tables) or scratchpad slots: the arithmetic per row
is identical, which is why ScratchPipe reproduces the baseline bit for bit.
"""
from __future__ import annotations

import torch

from scratchkit.config import OptimizerConfig, OptimizerKind


def lookup_gradients(grad_pooled: torch.Tensor, offsets: torch.Tensor, num_lookups: int) -> torch.Tensor:
    """Sum pooling's backward: each lookup of bag b gets grad_pooled[b]. [B, dim] -> [n, dim]."""
    bag_sizes = torch.diff(offsets, append=torch.tensor([num_lookups], device=offsets.device))
    bag_of_lookup = torch.repeat_interleave(torch.arange(len(offsets), device=offsets.device), bag_sizes)
    return grad_pooled.index_select(0, bag_of_lookup)


def coalesce(index: torch.Tensor, grads: torch.Tensor, num_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Unique rows [u] (sorted) and their summed gradients [u, dim], duplicates summed in lookup order."""
    # check_invariants=False: the indices come from checked ids or slots, and the check costs time.
    sparse = torch.sparse_coo_tensor(index.unsqueeze(0), grads, (num_rows, grads.shape[1]),
                                     check_invariants=False).coalesce()
    return sparse.indices()[0], sparse.values()


def apply_update(weight: torch.Tensor, state: torch.Tensor | None, index: torch.Tensor,
                 grad_sum: torch.Tensor, config: OptimizerConfig) -> None:
    """Update rows `weight[index]` (and their state) in place with coalesced gradients `grad_sum`."""
    rows = weight.index_select(0, index)                         # [u, dim]
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


def sparse_update(weight: torch.Tensor, state: torch.Tensor | None, index: torch.Tensor,
                  offsets: torch.Tensor, grad_pooled: torch.Tensor, config: OptimizerConfig) -> int:
    """Embedding backward + update of one table: pooled grads [B, dim] -> rows `weight[index]`.

    `index` [n] addresses rows of `weight` (table ids, cache slots or scratchpad slots).
    Returns the number of distinct rows updated.
    """
    grads = lookup_gradients(grad_pooled, offsets, len(index))      # [n, dim]
    unique, grad_sum = coalesce(index, grads, weight.shape[0])      # [u], [u, dim]
    apply_update(weight, state, unique, grad_sum, config)
    return len(unique)


def make_dense_optimizer(params, config: OptimizerConfig) -> torch.optim.Optimizer:
    """The MLPs' optimizer: torch's own, so the reference uses the very same. Row-wise Adagrad is an
    embedding-only idea; the MLPs then use element-wise Adagrad."""
    if config.kind is OptimizerKind.SGD:
        return torch.optim.SGD(params, lr=config.lr)
    return torch.optim.Adagrad(params, lr=config.lr, eps=config.eps)
