"""Sharding plans: which rank owns which rows of which table, in TorchRec's two schemes for CPUs.

    Sharding.TABLE   table-wise: every table whole on one rank (TorchRec's TABLE_WISE). Tables
                     go largest first to the rank with the fewest rows so far, as TorchRec's greedy
                     proposer balances its cost estimates.
    Sharding.ROW     row-wise: every table cut into contiguous blocks of ceil(rows / N) rows,
                     block r on rank r (TorchRec's ROW_WISE, whose bucketizer routes id i to
                     rank i // block).

A `Shard` is one block: rows start .. start+rows-1 of one global table, on one rank. A rank's
shards, in table order, are its local tables: local id = global id - start. Every rank must own
at least one shard (a rank with no table would have nothing to train), and the plan is a pure
function of the table sizes and the world size, so every rank computes the same one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np

from scratchkit.choices import parse_choice


class Sharding(str, Enum):
    TABLE = "table"  # each table whole on one rank
    ROW = "row"  # each table in contiguous row blocks, one per rank

    @classmethod
    def parse(cls, name: "Sharding | str") -> "Sharding":
        return parse_choice(cls, name, "sharding ")


@dataclass(frozen=True)
class Shard:
    """Rows start .. start+rows-1 of global table `table`, owned by `rank`."""

    table: int
    start: int
    rows: int
    rank: int

    @property
    def stop(self) -> int:
        return self.start + self.rows


@dataclass(frozen=True)
class ShardingPlan:
    kind: Sharding
    table_sizes: tuple[int, ...]
    world_size: int
    shards: tuple[Shard, ...]  # ordered by (table, start)

    def shards_of(self, rank: int) -> list[Shard]:
        """Rank `rank`'s shards, in table order: its local tables."""
        return [s for s in self.shards if s.rank == rank]

    def shards_of_table(self, table: int) -> list[Shard]:
        return [s for s in self.shards if s.table == table]

    def owners(self, table: int, ids: np.ndarray) -> np.ndarray:
        """The rank that owns each of `ids` [n] of global table `table`. -> [n] int64"""
        shards = self.shards_of_table(table)
        starts = np.array([s.start for s in shards], dtype=np.int64)
        ranks = np.array([s.rank for s in shards], dtype=np.int64)
        return ranks[np.searchsorted(starts, ids, side="right") - 1]

    def rows_of(self, rank: int) -> int:
        return sum(s.rows for s in self.shards_of(rank))

    def describe(self) -> str:
        """One line per rank: the rows of which tables it owns."""
        return "\n".join(
            f"rank {r}: " + ", ".join(f"table {s.table} rows {s.start}..{s.stop - 1}" for s in self.shards_of(r))
            for r in range(self.world_size)
        )


def table_wise(table_sizes, world_size: int) -> ShardingPlan:
    """Whole tables, largest first, each to the rank with the fewest rows so far (ties: lowest rank)."""
    sizes = tuple(int(n) for n in table_sizes)
    load = [0] * world_size
    owner = {}
    for t in sorted(range(len(sizes)), key=lambda t: (-sizes[t], t)):
        rank = min(range(world_size), key=lambda r: (load[r], r))
        owner[t] = rank
        load[rank] += sizes[t]
    return _checked(
        ShardingPlan(Sharding.TABLE, sizes, world_size, tuple(Shard(t, 0, n, owner[t]) for t, n in enumerate(sizes)))
    )


def row_wise(table_sizes, world_size: int) -> ShardingPlan:
    """Every table in blocks of ceil(rows / N) rows; a table smaller than N leaves the last ranks none."""
    sizes = tuple(int(n) for n in table_sizes)
    shards = []
    for t, n in enumerate(sizes):
        block = math.ceil(n / world_size)
        shards += [
            Shard(t, r * block, min(n, (r + 1) * block) - r * block, r) for r in range(world_size) if r * block < n
        ]
    return _checked(ShardingPlan(Sharding.ROW, sizes, world_size, tuple(shards)))


def plan_shards(kind: Sharding | str, table_sizes, world_size: int) -> ShardingPlan:
    """The plan of `kind` (table or row) for these tables over `world_size` ranks."""
    kind = Sharding.parse(kind)
    if world_size < 1:
        raise ValueError(f"world size must be >= 1, got {world_size}")
    return (table_wise if kind is Sharding.TABLE else row_wise)(table_sizes, world_size)


def _checked(plan: ShardingPlan) -> ShardingPlan:
    idle = [r for r in range(plan.world_size) if not plan.shards_of(r)]
    if idle:
        hint = (
            "use --sharding row, or fewer ranks" if plan.kind is Sharding.TABLE else "use fewer ranks, or larger tables"
        )
        raise ValueError(
            f"{plan.kind.value}-wise sharding of {len(plan.table_sizes)} tables "
            f"{list(plan.table_sizes)} over {plan.world_size} ranks leaves rank "
            f"{idle[0]} without any rows: {hint}"
        )
    return plan
