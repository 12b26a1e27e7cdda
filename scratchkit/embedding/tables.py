"""Embedding tables in host memory, with their optimizer state kept beside the rows."""

from __future__ import annotations

import math

import torch

from typing import Callable

from scratchkit.config import OptimizerConfig
from scratchkit.embedding.shared_memory import shared_copy


def init_embedding_weights(table_sizes, dim: int, seed: int) -> list[torch.Tensor]:
    """Initial rows of every table: uniform in +-1/sqrt(num_rows), as the DLRM reference does.

    Drawn from a generator seeded by (seed, table) so every trainer, and the reference, starts
    from identical rows.
    """
    weights = []
    for t, num_rows in enumerate(table_sizes):
        generator = torch.Generator().manual_seed(seed * 1_000_003 + t + 1)
        bound = 1.0 / math.sqrt(num_rows)
        w = torch.empty(num_rows, dim).uniform_(-bound, bound, generator=generator)
        weights.append(w)
    return weights


class HostTables:
    """`weights[t]` [num_rows_t, dim] and `state[t]` ([num_rows_t, width] or None) on the host.

    pin: a trainer's `Device.pin` (page-locked on CUDA, so host<->device copies can be
    asynchronous; the identity on a CPU), or None to leave the tensors as they are.
    """

    def __init__(
        self,
        table_sizes,
        dim: int,
        optimizer: OptimizerConfig,
        seed: int,
        pin: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ):
        self.table_sizes = tuple(int(n) for n in table_sizes)
        self.dim = dim
        self.weights = init_embedding_weights(self.table_sizes, dim, seed)
        width = optimizer.state_width(dim)
        self.state = [torch.zeros(n, width) if width else None for n in self.table_sizes]
        if pin is not None:
            self.weights = [pin(w) for w in self.weights]
            self.state = [pin(s) if s is not None else None for s in self.state]

    @classmethod
    def from_rows(
        cls,
        weights: list[torch.Tensor],
        state: list[torch.Tensor | None],
        pin: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> "HostTables":
        """Tables holding the given rows and optimizer state (copied): a shard of global tables, or
        a checkpoint's (scratchkit/distributed/shard.py). `state[t]` None: SGD, no state."""
        tables = cls.__new__(cls)
        tables.table_sizes = tuple(int(w.shape[0]) for w in weights)
        tables.dim = int(weights[0].shape[1])
        tables.weights = [w.detach().clone().contiguous() for w in weights]
        tables.state = [s.detach().clone().contiguous() if s is not None else None for s in state]
        if pin is not None:
            tables.weights = [pin(w) for w in tables.weights]
            tables.state = [pin(s) if s is not None else None for s in tables.state]
        return tables

    @property
    def num_tables(self) -> int:
        return len(self.table_sizes)

    def share(self) -> None:
        """Move the tables into shared memory, so a process forked later writes the same rows."""
        self.weights = [shared_copy(w) for w in self.weights]
        self.state = [shared_copy(s) if s is not None else None for s in self.state]
