"""The stages every design trains with: forward, MLP, backward and update with every row it reads
in device memory (gpu-only's tables, a cache's or a scratchpad's slots), and the ids' trip to the
device. Each family's module adds what its design does around them (designs/__init__.py)."""

from __future__ import annotations

from scratchkit.config import OptimizerKind
from scratchkit.designs import kit
from scratchkit.designs.step import StepWork
from scratchkit.designs.work import FLOAT_BYTES, ID_BYTES, Work


def total(parts) -> Work:
    """The parts added up, in order."""
    summed = Work()
    for part in parts:
        summed = summed + part
    return summed


def train_stages(
    w: StepWork, *, footprint: str, by_slot: bool, batched: bool = False, kernels: bool = False, fused: bool = False
) -> dict[str, Work]:
    """Forward, MLP, backward and update with every row in device memory: in tables of their own
    (`footprint="table"`) or in a cache or scratchpad of `capacity` rows (`"capacity"`).
    `batched`: the device is a CPU with the C++ loops, so the trainers make one table-batched
    call per stage for all tables (table_batched.py; Adagrad's update stays optim.py's, per table).
    `kernels`: the device is a GPU, where Train runs tbe.cu's kernels for every table at once
    (embedding/device_tbe.py), the dense features and labels crossing in one copy.
    `fused` (with `batched` and SGD): the backward only sorts, the update sums and applies in one
    pass (fused_sgd.py: gpu-only's step on a CPU)."""
    B, rb, d = w.batch_size, w.row_bytes, w.dim
    rows = lambda t: t.rows if footprint == "table" else t.capacity
    mlp = kit.dense_step(w) + Work(pcie=B * (w.num_dense + 1) * FLOAT_BYTES, pcie_copies=1 if kernels else 2)
    if kernels:
        return {
            "embedding_forward": kit.device_lookups(w.tables, rb, [rows(t) * rb for t in w.tables], B),
            "mlp": mlp,
            "embedding_backward": kit.device_sort(w.lookups),
            "update": kit.device_update(w.tables, d, w.state_width, w.optimizer, [rows(t) for t in w.tables], B),
        }
    per_table_update = total(
        kit.update(True, t.unique, d, w.state_width, w.optimizer, rows(t)) for t in w.tables
    ) + kit.calls(True, "update_stage")
    if batched:
        footprints = [rows(t) * rb for t in w.tables]
        if fused and w.optimizer is OptimizerKind.SGD:
            backward, update = kit.fused_sgd_tables(True, w.tables, rb, B, footprints)
            return {
                "embedding_forward": kit.lookup_tables(True, w.tables, rb, footprints, B),
                "mlp": mlp,
                "embedding_backward": backward,
                "update": update,
            }
        update = (
            kit.update_tables(True, w.tables, rb, footprints) if w.optimizer is OptimizerKind.SGD else per_table_update
        )
        return {
            "embedding_forward": kit.lookup_tables(True, w.tables, rb, footprints, B),
            "mlp": mlp,
            "embedding_backward": kit.backward_tables(True, w.tables, rb, B),
            "update": update,
        }
    forward = total(kit.lookup(True, t.lookups, t.unique, B, rb, rows(t) * rb) for t in w.tables)
    forward += kit.calls(True, "forward_stage") + kit.stream(True, 2 * B * w.num_tables * rb)  # the stack
    backward = total(kit.backward(True, t.lookups, B, d) for t in w.tables) + kit.calls(True, "backward_stage")
    if by_slot:  # the coalesced ids' slots: searchsorted in the working set
        backward += total(kit.slots_of_unique(True, t.lookups, t.unique) for t in w.tables)
    return {"embedding_forward": forward, "mlp": mlp, "embedding_backward": backward, "update": per_table_update}


def id_transfer(w: StepWork, arrays: int, kernels: bool = False) -> Work:
    """Each table's ids (and slots: `arrays`=2) and offsets to the device: a copy each, or with
    `kernels` (a GPU: embedding/device_tbe.py) every table's packed into one."""
    return Work(
        pcie=arrays * w.lookups * ID_BYTES + w.batch_size * w.num_tables * ID_BYTES,
        pcie_copies=1 if kernels else (arrays + 1) * w.num_tables,
    )
