"""`hybrid`: tables in host memory, MLPs on the device (the baseline of the paper).

The host gathers and pools the rows, the pooled vectors cross to the device, the MLPs train there,
the pooled gradients cross back, and the host coalesces them and updates the rows. Every embedding
byte moves at host-memory speed.
"""
from __future__ import annotations

import time

import torch

from scratchkit.embedding.optim import apply_update, embedding_backward, pooled_lookup
from scratchkit.trainers.base import HostTablesTrainer, StepRecord


class HybridTrainer(HostTablesTrainer):
    name = "hybrid"

    def train_step(self) -> StepRecord:
        started = time.perf_counter()
        stage = self.timer.stage
        with stage("data"):
            batch, ids, offsets = self.load_batch()
        with stage("embedding_forward"):   # on the host
            pooled = torch.stack([pooled_lookup(w, i, o) for w, i, o in
                                  zip(self.tables.weights, ids, offsets)], dim=1)  # [B, T, dim]
        with stage("transfer"):
            pooled = self.dev.to_device(pooled, non_blocking=True)
        with stage("mlp"):
            loss, grad = self.dense_step(batch, pooled, self.next_batch)
        with stage("transfer"):
            grad = self.dev.to_host(grad)
        with stage("embedding_backward"):   # on the host
            coalesced = [embedding_backward(ids[t], offsets[t], grad[:, t], self.tables.weights[t].shape[0])
                         for t in range(self.tables.num_tables)]
        with stage("update"):
            for t, (rows, grad_sum) in enumerate(coalesced):
                apply_update(self.tables.weights[t], self.tables.state[t], rows, grad_sum, self.config.optimizer)
        return self.make_record(loss, batch, started)   # no device cache: hits None, shown "-"
