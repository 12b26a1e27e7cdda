"""One rank of a sharded job: its shard trainer, its dense replica, and the step that joins them.

    RankTrainer(name, config, plan, rank)   then   for record in rank.train(steps): ...

Step b on rank r (every rank runs the same step at once; the collectives keep them in step):

    shard trainer   looks up the rows of its routed batch b (its cache or scratchpad first: a
                    ScratchPipe shard planned them D batches ago), then calls `_step`:
    _step           takes micro-batch r of global batch b (`micro_batch` of the global batch the
                    routed batch carries: made once, ahead, by the shard trainer's loader), routes its distinct
                    ids (Route), exchanges ids and rows (exchange.py), pools its lookups, trains
                    the dense replica (replica.py), coalesces its tables' gradients, exchanges
                    them, and hands the shard trainer the summed gradient of each of its rows
    shard trainer   updates its rows with them (the kit's one sparse update)

N ranks on global batch B end with the parameters of one process that trains B as N
micro-batches with gradient accumulation in rank order (scratchkit/measure/reference.py), bit for
bit on a CPU: exchange.py and replica.py say why.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Callable, Iterator

import torch

from scratchkit.config import TrainConfig, default_threads
from scratchkit.data.batch import micro_batch
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.device import as_device
from scratchkit.distributed.exchange import Exchange
from scratchkit.distributed.replica import DenseReplica
from scratchkit.distributed.routing import Route, RoutedSource
from scratchkit.distributed.shard import initial_rows, make_shard_trainer
from scratchkit.distributed.sharding import ShardingPlan
from scratchkit.embedding.optim import embedding_backward, pooled_lookup
from scratchkit.trainers.base import StepRecord


class RankTrainer:
    """Rank `rank` of `plan.world_size`, training with trainer `name` (any of make_trainer's).

    start: a checkpoint's content for this rank (checkpoint.py's `ShardStart`), else the seed's
    rows. on_step(b): called as Train(b) reaches the exchanges (failure.py injects faults there).
    board: failure.py's ProgressBoard, told where this rank is.
    """

    def __init__(
        self,
        name: str,
        config: TrainConfig,
        plan: ShardingPlan,
        rank: int,
        *,
        source=None,
        device=None,
        start=None,
        board=None,
        on_step: Callable[[int], None] | None = None,
    ):
        self.world_size = plan.world_size
        if config.threads is None:  # this machine's cores shared by its ranks (torchrun's local ones)
            local = int(os.environ.get("LOCAL_WORLD_SIZE", self.world_size))
            config = config.replace(threads=max(1, default_threads() // max(local, 1)))
        self.name, self.config, self.plan, self.rank = name, config, plan, rank
        self.source = source if source is not None else SyntheticSource(config.data)
        if config.data.batch_size % self.world_size:
            raise ValueError(
                f"a global batch of {config.data.batch_size} samples does not split "
                f"over {self.world_size} ranks: use a batch size that is a multiple of it"
            )
        if tuple(plan.table_sizes) != tuple(int(n) for n in config.data.table_sizes):
            raise ValueError(f"the plan shards tables {plan.table_sizes}, the config has {config.data.table_sizes}")
        self.shards = plan.shards_of(rank)
        self.dev = as_device(device)
        self.on_step, self.board = on_step, board
        self.exchange = Exchange(plan, rank, self.dev.torch, board)
        self.replica = DenseReplica(config, self.source.num_dense, self.world_size, self.dev, board)
        rows = start.rows if start is not None else initial_rows(config, self.shards)
        self.routed = RoutedSource(self.source, plan, rank)
        self.trainer = make_shard_trainer(name, config, self.shards, self.routed, self.dev, rows, self._step)
        if start is not None:
            self.replica.load(start.dense)
            self.trainer.next_batch = start.next_batch

    @property
    def next_batch(self) -> int:
        return self.trainer.next_batch

    @property
    def model(self) -> torch.nn.Module:
        return self.replica.model

    # --- one step -------------------------------------------------------------------------------
    def _step(self, routed, rows: torch.Tensor, b: int) -> tuple[float, torch.Tensor]:
        """The shard trainer's dense step (shard.py): rows [bags, local tables, dim] of its routed
        batch b -> (this rank's micro-batch loss, their summed gradients, same shape)."""
        if self.on_step is not None:
            self.on_step(b)
        batch = micro_batch(routed.whole, self.rank, self.world_size)  # my samples [B/N]
        route = Route.of(batch, self.plan)
        arrivals = self.exchange.send_ids(route, list(routed.ids), b)
        sizes = [len(ids) for ids in routed.ids]  # per local table
        table_rows = self.exchange.send_rows(route, arrivals, [rows[:n, t] for t, n in enumerate(sizes)], b)
        on_device = lambda array: self.dev.to_device(torch.from_numpy(array))
        offsets = [on_device(o) for o in batch.offsets]
        inverse = [self.dev.to_device(i) for i in route.inverse]
        pooled = torch.stack(
            [pooled_lookup(r, i, o) for r, i, o in zip(table_rows, inverse, offsets)], dim=1
        )  # [B/N, T, dim]
        loss, grad = self.replica.step(batch, pooled, b)  # grad [B/N, T, dim]
        sums = []
        for t, ids in enumerate(batch.ids):  # coalesced on this micro-batch's ids, as the reference
            unique, grad_sum = embedding_backward(
                on_device(ids), offsets[t], grad[:, t], self.config.data.table_sizes[t]
            )
            if len(unique) != len(route.unique[t]):
                raise RuntimeError(
                    f"step {b}, table {t}: {len(unique)} distinct ids coalesced, {len(route.unique[t])} routed"
                )
            sums.append(grad_sum)
        totals = self.exchange.send_grads(route, arrivals, sums, sizes, b)
        grads = torch.zeros_like(rows)
        for t, total in enumerate(totals):
            grads[: len(total), t] = total
        if self.board is not None:
            self.board.enter(b, "update")
        return loss, grads

    # --- the trainer's interface ------------------------------------------------------------------
    def train(self, steps: int) -> Iterator[StepRecord]:
        """Train `steps` global batches; a record per step: this rank's samples and loss, its
        shard trainer's stages, and the exchanges' and the dense replica's seconds."""
        for record in self.trainer.train(steps):
            stages = record.stage_seconds | self.exchange.take_times() | self.replica.take_times()
            yield replace(record, samples=self.config.data.batch_size // self.world_size, stage_seconds=stages)
            if self.board is not None:
                self.board.enter(record.step + 1, "train")

    def embedding_weights(self) -> list[torch.Tensor]:
        """This rank's shards' rows, complete (caches flushed), one per local table."""
        return self.trainer.embedding_weights()

    def embedding_state(self) -> list[torch.Tensor | None]:
        return self.trainer.embedding_state()

    def close(self) -> None:
        self.trainer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
