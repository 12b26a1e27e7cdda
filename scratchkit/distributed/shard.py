"""A rank's shard trainer: one of the kit's trainers, over the rows this rank owns.

Any trainer (`make_trainer`'s names) can hold a shard: it is built on the rank's routed batches
(routing.py: the global batch's distinct ids this rank owns, one bag each), so it looks rows up,
caches them, or plans them ahead with ScratchPipe exactly as it does in one process, over its
shard's rows only. Two of its methods are replaced, and nothing else:

    make_tables()   the host tables start from this rank's shard of the global tables (the rows
                    one process would start with: `init_embedding_weights` of the global tables,
                    sliced), or from a checkpoint
    dense_step()    what comes between the lookup and the update: for a trainer in one process
                    the MLPs; for a shard, the rest of the job (rank.py: the exchanges and the
                    dense replica). It gets the rows of the routed ids ("pooled" bags of one row)
                    and returns their summed gradients, as the MLPs would return pooled gradients.

The shard trainer's own dense model is never run: the rank's `DenseReplica` (replica.py) is the
model, with the global tables' count. A bag of one row pools to that row exactly, and a one-row
bag's gradient is the row's, so the trainer's lookup, backward and sparse update do exactly the
float operations a step in one process does on those rows.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import torch

from scratchkit.config import TrainConfig
from scratchkit.distributed.sharding import Shard
from scratchkit.embedding.tables import HostTables, init_embedding_weights
from scratchkit.trainers import Trainer, trainer_class

# (routed batch, rows [bags, local tables, dim], step) -> (loss, their gradients, same shape)
ShardStep = Callable[[object, torch.Tensor, int], tuple[float, torch.Tensor]]


def initial_rows(config: TrainConfig, shards: list[Shard]) -> tuple[list[torch.Tensor], list]:
    """The rows (and zero optimizer state) each shard starts from: slices of the global tables
    as one process draws them (so a sharded run starts where the reference starts)."""
    weights = init_embedding_weights(config.data.table_sizes, config.model.dim, config.seed)
    width = config.optimizer.state_width(config.model.dim)
    rows = [weights[s.table][s.start : s.stop] for s in shards]
    return rows, [torch.zeros(s.rows, width) if width else None for s in shards]


def shard_config(config: TrainConfig, shards: list[Shard]) -> TrainConfig:
    """The config of a trainer over these shards: one table per shard, no dense features of its own."""
    return config.replace(data=replace(config.data, table_sizes=tuple(s.rows for s in shards), num_dense=0))


def make_shard_trainer(
    name: str,
    config: TrainConfig,
    shards: list[Shard],
    source,
    device,
    rows: tuple[list[torch.Tensor], list],
    step: ShardStep,
) -> Trainer:
    """Trainer `name` over `shards` (module docstring): its tables start from `rows` (weights,
    state), its batches come from `source` (a RoutedSource), its dense step is `step`."""
    base = trainer_class(name)
    weights, state = rows

    class ShardTrainer(base):
        def make_tables(self, pin: bool = True) -> HostTables:
            return HostTables.from_rows(weights, state, pin=self.dev.pin if pin else None)

        def dense_step(self, batch, pooled, b):
            return step(batch, pooled, b)

    ShardTrainer.__name__ = ShardTrainer.__qualname__ = f"Shard{base.__name__}"
    return ShardTrainer(shard_config(config, shards), source=source, device=device)
