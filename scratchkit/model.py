"""The dense part of a DLRM-style model: bottom MLP, pairwise dot interaction, top MLP.

Embeddings are *not* inside the module: each trainer looks them up wherever its tables live (host,
device, cache, scratchpad) and hands the pooled vectors in. That is the whole point of the kit:
the math is the same, only where the rows live changes.
"""

from __future__ import annotations

import torch
from torch import nn

from scratchkit.config import ModelConfig


def mlp(widths: list[int], last_activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(widths) - 2 or last_activation:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DenseDLRM(nn.Module):
    """logits = top(concat(x, pairwise dots of [x, e_1..e_T])), with x = bottom(dense)."""

    def __init__(self, config: ModelConfig, num_dense: int, num_tables: int):
        super().__init__()
        self.num_dense = num_dense
        # With no dense features the bottom MLP has nothing to read: x is a learned constant vector.
        self.bottom = mlp([max(num_dense, 1), *config.bottom_mlp], last_activation=True)
        num_vectors = num_tables + 1
        rows, cols = torch.tril_indices(num_vectors, num_vectors, offset=-1)
        # each pair's place in the flattened [T+1, T+1] dots: one index_select picks them all. The
        # same values as dots[:, rows, cols], and the same gradient (each place gets its pair's
        # gradient, the rest 0), but advanced indexing's backward (index_put_ with accumulate)
        # took a quarter of a criteo-like step
        self.register_buffer("pair_index", rows * num_vectors + cols, persistent=False)
        self.top = mlp([config.dim + len(rows), *config.top_mlp], last_activation=False)

    def forward(self, dense: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        # dense [B, num_dense], pooled [B, T, dim] -> logits [B]
        if self.num_dense == 0:
            dense = torch.ones(pooled.shape[0], 1, device=pooled.device)
        x = self.bottom(dense)  # [B, dim]
        vectors = torch.cat([x.unsqueeze(1), pooled], dim=1)  # [B, T+1, dim]
        dots = torch.bmm(vectors, vectors.transpose(1, 2))  # [B, T+1, T+1]
        pairs = dots.flatten(1).index_select(1, self.pair_index)  # [B, (T+1)T/2]
        return self.top(torch.cat([x, pairs], dim=1)).squeeze(1)  # [B]


def init_dense_model(config: ModelConfig, num_dense: int, num_tables: int, seed: int) -> DenseDLRM:
    """The dense model with weights drawn from `seed`: every trainer starts from the same ones."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return DenseDLRM(config, num_dense, num_tables)
