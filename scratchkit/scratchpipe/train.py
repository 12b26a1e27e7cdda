"""ScratchPipe's Train stage: forward, backward and update of one batch through its slots only.

Plan(b) mapped every lookup of batch b to a slot and Insert(b) put the rows there, so Train(b)
never reads a host table. It does exactly the float operations the plain PyTorch reference does
(scratchkit/embedding/optim.py says why that makes it exact): the same `embedding_bag` over the same
rows in the same order, and gradients coalesced on the *table ids*, the very array the reference
coalesces, then written to the rows by slot.

It also checks invariant 1 as it goes: `count_hits` counts the lookups whose slot really holds
their id (all of them, unless the hazard lab switched a rule off).

On a GPU (`train_on_device`) the same step runs as tbe.cu's kernels (embedding/device_tbe.py) and
waits for the device once, for the loss: the hit count is a device counter read with it, and the
end of the update is an event the evicting stages wait for on their own thread
(`HostStages.trained`), where the host used to wait for the update before releasing the slots.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from scratchkit.config import OptimizerConfig
from scratchkit.device import Device
from scratchkit.device_work import launched
from scratchkit.embedding.device_tbe import DeviceTBE
from scratchkit.embedding.table_batched import Coalesced, apply_updates, pooled_lookup_tables
from scratchkit.scratchpipe.host_stages import InFlight
from scratchkit.scratchpipe.rows import ScratchpadRows, as_tensor

# (batch, pooled [B, T, dim], step) -> (loss, grad of pooled): the dense model's forward and
# backward, the trainer's `dense_step` (no weight changes there)
DenseStep = Callable[[object, torch.Tensor, int], tuple[float, torch.Tensor]]
# (ids, offsets, grad, num_rows, addresses) -> each table's coalesced gradients: the trainer's
# `embedding_backward` (its buffers, its summation order)
Backward = Callable[..., Coalesced]
# (update_tables) -> None: the trainer's `update_weights`, the one place a step changes weights
UpdateWeights = Callable[[Callable[[], None]], None]


def train_through_slots(
    item: InFlight,
    pads: list[ScratchpadRows],
    dev: Device,
    dense_step: DenseStep,
    backward: Backward,
    update_weights: UpdateWeights,
    optimizer: OptimizerConfig,
) -> float:
    """Train(b) on `item` = Plan(b) with its rows inserted. -> the loss. Marks the slots trained.
    Everything that can fail runs before `update_weights`: a failure there changes no weight."""
    b, batch = item.index, item.batch
    arrays = [*(plan.lookup_slots for plan in item.tables), *batch.ids, *batch.offsets]
    moved = dev.to_device_together([as_tensor(a) for a in arrays])  # on a CPU: the arrays themselves
    T = len(item.tables)
    slots, ids, offsets = moved[:T], moved[T : 2 * T], moved[2 * T :]  # per table [n], [n], [B]
    pooled = pooled_lookup_tables([pad.rows for pad in pads], slots, offsets)  # [B, T, dim]
    loss, grad = dense_step(batch, pooled, b)  # grad [B, T, dim]
    # coalesce on table ids, as the reference does; each distinct id's sum goes to its slot, the
    # one Plan(b) mapped it to (`decision.slots`, in the same sorted order)
    coalesced = backward(ids, offsets, grad, [pad.num_rows for pad in pads], addresses=slots)
    for t, ((where, _), plan) in enumerate(zip(coalesced, item.tables)):
        if len(where) != len(plan.decision.unique_ids):
            raise RuntimeError(
                f"table {t}: {len(where)} distinct ids coalesced, but Plan({b}) mapped {len(plan.decision.unique_ids)}"
            )

    def update_tables():
        apply_updates([pad.rows for pad in pads], [pad.state for pad in pads], coalesced, optimizer)
        for pad, plan in zip(pads, item.tables):
            pad.mark_trained(plan.decision.slots, b)  # held by batch b: no other stage touches them

    update_weights(update_tables)
    return loss


def train_on_device(
    item: InFlight,
    pads: list[ScratchpadRows],
    dev: Device,
    tbe: DeviceTBE,
    dense_step: DenseStep,
    update_weights: UpdateWeights,
    optimizer: OptimizerConfig,
) -> tuple[float, object]:
    """Train(b) through slots as tbe.cu's kernels. -> (the loss, the hits: an int, or a
    `Device.read_later` reading filled by the loss's read). Marks the slots trained; the update
    and the marks are queued, not done, when it returns (the caller hands the evicting stages an
    event to wait for: `HostStages.trained`)."""
    b, batch = item.index, item.batch
    lookups = tbe.lookups(batch.ids, batch.offsets, [plan.lookup_slots for plan in item.tables])
    books = [pad.slot_ids for pad in pads]
    books_on_device = bool(pads) and tbe.reads_books(books[0])
    if books_on_device:  # a device counter, read with the loss
        hits = dev.read_later(tbe.count_hits(books, lookups), "hits")
    else:  # the host planner's books are host arrays: the host counts, waiting for nothing
        hits = count_hits(item, pads)
    rows, states = [pad.rows for pad in pads], [pad.state for pad in pads]
    pooled = tbe.forward(rows, lookups)  # [B, T, dim]
    loss, grad = dense_step(batch, pooled, b)  # the step's one wait: the loss, and the hits with it
    tbe.sort(lookups)  # summed on the table ids, as the reference coalesces, applied by slot

    def update_tables():
        tbe.update(rows, states, lookups, grad, optimizer)
        with dev.kernel_stream():  # after the update, in its stream
            for pad, plan in zip(pads, item.tables):
                pad.mark_trained(plan.decision.slots, b)
        if books_on_device:  # two array ops a table, on the device's books
            launched("slots marked trained", 2 * len(pads))

    update_weights(update_tables)
    return loss, hits


def count_hits(item: InFlight, pads: list[ScratchpadRows]) -> int:
    """Invariant 1, checked: how many lookups of the batch find their own id in their slot. The
    working sets are checked first, every table's at once (every lookup is one of their ids; on a
    GPU one answer to wait for, not one per table); each lookup only when one fails."""
    xp = np if not pads or not pads[0].books_on_device else pads[0].engine.xp
    found = [
        pad.slot_ids[plan.decision.slots] == plan.decision.unique_ids  # per table [u]
        for pad, plan in zip(pads, item.tables)
    ]
    if not found or bool(xp.concatenate(found).all()):
        return sum(len(ids) for ids in item.batch.ids)
    return sum(
        int(xp.count_nonzero(pad.slot_ids[plan.lookup_slots] == xp.asarray(ids)))
        for pad, plan, ids in zip(pads, item.tables, item.batch.ids)
    )
