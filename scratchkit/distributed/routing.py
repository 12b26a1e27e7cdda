"""Which ids go where: a global batch seen by the rank that owns rows, and by the rank that trains samples.

Two views of global batch b, one per role a rank plays each step (scratchkit/distributed/sharding.py
says who owns what):

    RoutedSource   the owner's: for each of its shards, the distinct ids of the *whole* global
                   batch that fall in it, as local ids, sorted: one bag per id. Its trainer
                   (any of the kit's, scratchkit/distributed/shard.py) reads batches from it, so
                   ScratchPipe's Plan sees, D batches ahead, exactly the rows that will be asked
                   of this shard: its look-ahead, and with it the guarantee that Train hits,
                   holds per shard. In TorchRec the input dist's all-to-all delivers these ids;
                   here every rank can read every global batch, so the planner reads them ahead
                   of time, and Train checks that the ids the all-to-all delivers are these.
                   Each routed batch carries the global batch it was routed from (`RoutedBatch`),
                   so the rank's step trains its samples from the very batch its trainer's loader
                   made ahead (data/loader.py): each global batch is made once.
    Route          the sample side's: rank r's micro-batch (its share of the global batch), each
                   table's distinct ids and each lookup's place among them, and the order in which
                   the distinct ids go to their owners: a stable sort by owner, then table, so each
                   owner receives its ids table by table, sorted, and the rows come back in the
                   same order (scratchkit/distributed/exchange.py).

Distinct ids, not lookups, cross the network: a row asked for twice by one micro-batch travels
once, and the micro-batch pools its lookups from the rows it received.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from scratchkit.data.batch import Batch
from scratchkit.data.checks import check_batch
from scratchkit.distributed.sharding import ShardingPlan


def owned_ids(ids: np.ndarray, start: int, stop: int) -> np.ndarray:
    """The distinct ids of `ids` in [start, stop), as local ids (minus start), sorted. -> [u]"""
    unique = np.unique(ids)
    return unique[(unique >= start) & (unique < stop)] - start


@dataclass(frozen=True)
class RoutedBatch(Batch):
    """A shard's bags of global batch b (`RoutedSource.batch`), and that global batch (`whole`),
    whose samples the rank's step trains (rank.py)."""

    whole: Batch

    def nbytes(self) -> int:
        return super().nbytes() + self.whole.nbytes()


class RoutedSource:
    """Global batches as rank `rank`'s shards see them (module docstring). A batch source."""

    def __init__(self, source, plan: ShardingPlan, rank: int):
        self.source, self.plan, self.rank = source, plan, rank
        self.shards = plan.shards_of(rank)
        self.table_sizes = tuple(s.rows for s in self.shards)
        self.num_dense = 0  # the samples' features stay with the rank that trains them
        self.num_batches = len(source)

    def __len__(self) -> int:
        return self.num_batches

    def batch(self, index: int) -> RoutedBatch:
        """Per shard, the sorted distinct local ids of global batch `index` it owns, a bag each.
        Every shard has as many bags as the largest (at least one); the others' extra bags are
        empty. The global batch is checked at the door first: an id out of range would belong to
        no one."""
        whole = self.source.batch(index)
        check_batch(whole, self.plan.table_sizes, index, num_dense=self.source.num_dense)
        ids = [owned_ids(whole.ids[s.table], s.start, s.stop) for s in self.shards]  # [u_l]
        bags = max(1, *(len(i) for i in ids))
        offsets = [np.minimum(np.arange(bags, dtype=np.int64), len(i)) for i in ids]  # [bags]
        return RoutedBatch(
            dense=np.zeros((bags, 0), dtype=np.float32),
            ids=tuple(ids),
            offsets=tuple(offsets),
            labels=np.zeros(bags, dtype=np.float32),
            whole=whole,
        )


@dataclass
class Route:
    """Rank r's micro-batch, table by table: its distinct ids and where each goes (module docstring)."""

    unique: list[np.ndarray]  # per global table [u_t], sorted distinct ids
    inverse: list[torch.Tensor]  # per global table [n_t], each lookup's position in unique[t]
    order: np.ndarray  # [sum u_t] positions in the tables' concatenation, in send order
    counts: np.ndarray  # [N, T] how many distinct ids of table t go to rank o

    @classmethod
    def of(cls, batch: Batch, plan: ShardingPlan) -> "Route":
        unique, inverse, owner, table = [], [], [], []
        for t, ids in enumerate(batch.ids):
            u, inv = np.unique(ids, return_inverse=True)
            unique.append(u)
            inverse.append(torch.from_numpy(inv.astype(np.int64)))
            owner.append(plan.owners(t, u))
            table.append(np.full(len(u), t, dtype=np.int64))
        owner, table = np.concatenate(owner), np.concatenate(table)
        T = len(batch.ids)
        order = np.argsort(owner * T + table, kind="stable")  # by owner, then table, then id
        counts = np.zeros((plan.world_size, T), dtype=np.int64)
        np.add.at(counts, (owner, table), 1)
        return cls(unique, inverse, order, counts)

    @property
    def sizes(self) -> list[int]:
        return [len(u) for u in self.unique]

    def send_ids(self) -> torch.Tensor:
        """[sum u_t] the distinct ids in send order: owner by owner, table by table."""
        return torch.from_numpy(np.concatenate(self.unique)[self.order])

    def split_sizes(self) -> list[int]:
        """[N] how many ids (rows, gradients) go to each rank."""
        return [int(n) for n in self.counts.sum(axis=1)]

    def in_send_order(self, per_table: list[torch.Tensor]) -> torch.Tensor:
        """Per table [u_t, dim] -> [sum u_t, dim] in send order."""
        return torch.cat(per_table)[torch.from_numpy(self.order).to(per_table[0].device)]

    def by_table(self, received: torch.Tensor) -> list[torch.Tensor]:
        """[sum u_t, dim] in send order (the rows that came back) -> per table [u_t, dim]."""
        order = torch.from_numpy(self.order).to(received.device)
        placed = torch.empty_like(received).index_copy_(0, order, received)
        return list(torch.split(placed, self.sizes))
