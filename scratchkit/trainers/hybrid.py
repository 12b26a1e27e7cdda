"""`hybrid`: tables in host memory, MLPs on the device (the baseline of the paper).

The host gathers and pools the rows, the pooled vectors cross to the device, the MLPs train there,
the pooled gradients cross back, and the host coalesces them and updates the rows. Every embedding
byte moves at host-memory speed.

The host's work runs in the table-batched C++ loops on `TrainConfig.threads` threads (by default
every core but the batch loader's, as FBGEMM's CPU TBE uses them): whole tables a thread, and with more threads than
tables the forward's bags and the update's rows too; each bag's sum and each row's coalesced
gradient is one thread's, in the same order at every count, so
the result is PyTorch's bit for bit whatever the threads (tests/test_threads.py).
"""

from __future__ import annotations

import time

from scratchkit.embedding.table_batched import apply_updates, pooled_lookup_tables
from scratchkit.trainers.base import HostTablesTrainer, StepRecord
from scratchkit.designs.serial import HYBRID


class HybridTrainer(HostTablesTrainer):
    name = HYBRID.name

    def train_step(self) -> StepRecord:
        started = time.perf_counter()
        stage = self.timer.stage
        with stage("data"):
            batch, ids, offsets = self.load_batch()
        with stage("embedding_forward"):  # on the host
            pooled = pooled_lookup_tables(self.tables.weights, ids, offsets)  # [B, T, dim]
        with stage("transfer"):
            pooled = self.dev.to_device(pooled, non_blocking=True)
        with stage("mlp"):
            loss, grad = self.dense_step(batch, pooled, self.next_batch)
        with stage("transfer"):
            grad = self.dev.to_host(grad)
        with stage("embedding_backward"):  # on the host
            coalesced = self.embedding_backward(ids, offsets, grad, self.tables.table_sizes)
        self.update_weights(
            lambda: apply_updates(self.tables.weights, self.tables.state, coalesced, self.config.optimizer)
        )
        return self.make_record(loss, batch, started)  # no device cache: hits None, shown "-"
