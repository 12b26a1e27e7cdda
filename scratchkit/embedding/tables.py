"""Embedding tables in host memory, with their optimizer state kept beside the rows."""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import torch

from typing import Callable

from scratchkit.config import OptimizerConfig
from scratchkit.embedding.shared_memory import shared_copy

# A table's rows are drawn in blocks of BLOCK_ROWS, each from a generator of its own, so the blocks
# of every table can be drawn on every core at once and still give the same rows at any thread
# count, on any machine (torch's CPU generator is mt19937, the same everywhere). Drawing 8 tables
# of 1M rows from one generator each takes seconds on one core.
BLOCK_ROWS = 65_536
# Block b of table t draws from seed(t) + b * BLOCK_SEED_STEP, seed(t) = seed * 1_000_003 + t + 1.
# mt19937 keeps only the low 32 bits of a seed; this odd step keeps every (table, block) pair apart
# there for up to MAX_BLOCKS blocks a table (2^30 rows) and MAX_TABLES tables (a test checks it).
BLOCK_SEED_STEP = 2_654_435_761
MAX_BLOCKS, MAX_TABLES = 16_384, 82_466


def block_seed(seed: int, table: int, block: int) -> int:
    """The generator seed of one block of rows; block 0's is the table's own seed, so a table of
    at most BLOCK_ROWS rows draws exactly what one generator seeded for the table draws."""
    return seed * 1_000_003 + table + 1 + block * BLOCK_SEED_STEP


def default_threads() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def init_embedding_weights(table_sizes, dim: int, seed: int, threads: int | None = None) -> list[torch.Tensor]:
    """Initial rows of every table: uniform in +-1/sqrt(num_rows), as the DLRM reference does.

    Every trainer, and the reference, starts from these rows. Each block of BLOCK_ROWS rows is
    drawn from its own generator (`block_seed`), the blocks on `threads` threads (default: every
    core; torch releases the GIL while it draws): the same rows at any thread count.
    """
    sizes = [int(n) for n in table_sizes]
    if max(sizes, default=0) > MAX_BLOCKS * BLOCK_ROWS or len(sizes) > MAX_TABLES:
        raise ValueError(
            f"{len(sizes)} tables of up to {max(sizes):,} rows: beyond {MAX_TABLES:,} tables or "
            f"{MAX_BLOCKS * BLOCK_ROWS:,} rows a table, the blocks' seeds (block_seed) would repeat"
        )
    weights = [torch.empty(n, dim) for n in sizes]
    blocks = [(t, b) for t, n in enumerate(sizes) for b in range(math.ceil(n / BLOCK_ROWS))]

    def draw(block: tuple[int, int]) -> None:
        t, b = block
        bound = 1.0 / math.sqrt(weights[t].shape[0])
        generator = torch.Generator().manual_seed(block_seed(seed, t, b))
        weights[t][b * BLOCK_ROWS : (b + 1) * BLOCK_ROWS].uniform_(-bound, bound, generator=generator)

    threads = min(threads or default_threads(), len(blocks))
    if threads <= 1:
        for block in blocks:
            draw(block)
    else:
        with ThreadPoolExecutor(threads, thread_name_prefix="scratchkit-init") as pool:
            list(pool.map(draw, blocks))
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
