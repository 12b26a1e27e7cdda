"""`gpu-only`: every table lives in device memory. The upper bound when the tables fit.

With SGD on CPU tables (`fused_sgd_fits`) the backward and the update are one pass, as FBGEMM's CPU
TBE does them: the backward stage only sorts and checks the lookups (`sort_lookups`), and the update
sums each distinct id's gradient and applies it to its row at once (`fused_sgd_update`), bit for bit
the unfused backward then update, without writing the summed gradients to memory and reading them
back (at `embedding-bound`, 100 MB a step). Elsewhere on a CPU (Adagrad) the two stay apart.

On a GPU (`Device.is_cuda`) the step is `DeviceTBE`'s (embedding/device_tbe.py): the ids cross in
one copy, every table's lookup is one kernel, the backward stage sorts the lookups, and the update
sums each distinct id's gradient and applies it in one more, with no wait but the loss's read."""

from __future__ import annotations

import time

from scratchkit.embedding.device_tbe import DeviceTBE
from scratchkit.embedding.fused_sgd import SortedLookups, fused_sgd_fits, fused_sgd_update, sort_lookups
from scratchkit.embedding.table_batched import apply_updates, pooled_lookup_tables
from scratchkit.trainers.base import StepRecord, Trainer
from scratchkit.designs.serial import GPU_ONLY


class DeviceOnlyTrainer(Trainer):
    """Tables, lookups and sparse updates all on the device (on a CPU-only machine: the CPU)."""

    name = GPU_ONLY.name

    def __init__(self, config, source=None, device=None):
        super().__init__(config, source, device)
        host = self.make_tables(pin=False)
        self.weights = [self.dev.to_device(w) for w in host.weights]
        self.state = [self.dev.to_device(s) for s in host.state]  # None stays None
        self.tbe = DeviceTBE(self.dev, config.data.table_sizes) if self.dev.is_cuda else None

    def train_step(self) -> StepRecord:
        if self.tbe is not None:
            return self.device_step()
        started = time.perf_counter()
        stage = self.timer.stage
        with stage("data"):
            batch, ids, offsets = self.load_batch()
        with stage("transfer"):  # only the ids cross: tens of KB
            moved = self.dev.to_device_together([*ids, *offsets])  # on a CPU: the arrays themselves
            ids, offsets = moved[: len(ids)], moved[len(ids) :]
        with stage("embedding_forward"):
            pooled = pooled_lookup_tables(self.weights, ids, offsets)  # [B, T, dim]
        with stage("mlp"):
            loss, grad = self.dense_step(batch, pooled, self.next_batch)
        with stage("embedding_backward"):
            backward = self.embedding_backward(ids, offsets, grad, [w.shape[0] for w in self.weights])
        self.update_weights(lambda: self.update_tables(backward, grad))
        return self.make_record(loss, batch, started, hits=batch.lookups())

    def device_step(self) -> StepRecord:
        """The step on a GPU: tbe.cu's kernels (embedding/device_tbe.py)."""
        started = time.perf_counter()
        stage, tbe = self.timer.stage, self.tbe
        with stage("data"):
            batch, ids, offsets = self.load_batch()
        with stage("transfer"):  # every table's ids and offsets in one copy: tens of KB
            lookups = tbe.lookups(ids, offsets)
        with stage("embedding_forward"):
            pooled = tbe.forward(self.weights, lookups)  # [B, T, dim]
        with stage("mlp"):
            loss, grad = self.dense_step(batch, pooled, self.next_batch)
        with stage("embedding_backward"):  # the lookups sorted by id: the sums are the update's
            tbe.sort(lookups)
        self.update_weights(lambda: tbe.update(self.weights, self.state, lookups, grad, self.config.optimizer))
        return self.make_record(loss, batch, started, hits=batch.lookups())

    def embedding_backward(self, ids, offsets, grad, num_rows, addresses=None):
        """With SGD on CPU tables, the fused path's part before the update: the lookups sorted and
        checked (`sort_lookups`: all that can fail), their sums left to the update; else the
        unfused backward (`Trainer.embedding_backward`)."""
        if addresses is None and fused_sgd_fits(self.weights, self.config.optimizer):
            return sort_lookups(ids, offsets, num_rows, self.backward_workspace, self.config.summation_order)
        return super().embedding_backward(ids, offsets, grad, num_rows, addresses)

    def update_tables(self, backward, grad) -> None:
        """The tables' update from `embedding_backward`'s result: fused with the sums, or not."""
        if isinstance(backward, SortedLookups):
            fused_sgd_update(self.weights, backward, grad, self.config.optimizer.lr)
        else:
            apply_updates(self.weights, self.state, backward, self.config.optimizer)

    def embedding_weights(self):
        return [self.dev.to_host(w) for w in self.weights]

    def embedding_state(self):
        return [self.dev.to_host(s) for s in self.state]  # None stays None
