"""`gpu-only`: every table lives in device memory. The upper bound when the tables fit."""
from __future__ import annotations

import time

import torch

from scratchkit.embedding.optim import apply_update, embedding_backward, pooled_lookup
from scratchkit.trainers.base import StepRecord, Trainer


class DeviceOnlyTrainer(Trainer):
    """Tables, lookups and sparse updates all on the device (on a CPU-only machine: the CPU)."""

    name = "gpu-only"

    def __init__(self, config, source=None, device=None):
        super().__init__(config, source, device)
        host = self.make_tables(pin=False)
        self.weights = [self.dev.to_device(w) for w in host.weights]
        self.state = [self.dev.to_device(s) for s in host.state]          # None stays None

    def train_step(self) -> StepRecord:
        started = time.perf_counter()
        stage = self.timer.stage
        with stage("data"):
            batch, ids, offsets = self.load_batch()
        with stage("transfer"):   # only the ids cross: tens of KB
            ids = [self.dev.to_device(i) for i in ids]
            offsets = [self.dev.to_device(o) for o in offsets]
        with stage("embedding_forward"):
            pooled = torch.stack([pooled_lookup(w, i, o) for w, i, o in
                                  zip(self.weights, ids, offsets)], dim=1)      # [B, T, dim]
        with stage("mlp"):
            loss, grad = self.dense_step(batch, pooled, self.next_batch)
        with stage("embedding_backward"):
            coalesced = [embedding_backward(ids[t], offsets[t], grad[:, t], self.weights[t].shape[0])
                         for t in range(len(self.weights))]
        with stage("update"):
            for t, (rows, grad_sum) in enumerate(coalesced):
                apply_update(self.weights[t], self.state[t], rows, grad_sum, self.config.optimizer)
        return self.make_record(loss, batch, started, hits=batch.lookups())

    def embedding_weights(self):
        return [self.dev.to_host(w) for w in self.weights]

    def embedding_state(self):
        return [self.dev.to_host(s) for s in self.state]                # None stays None
