"""The launches a Train step makes on a GPU, counted, against the launches the cost model prices.

A step on the device path (embedding/device_tbe.py) is counted where a GPU would run it: the
stand-in CUDA runtime, every op of torch counted too (scratchkit/device_ops.py). The cost model
prices a GPU's Train (designs/train.py `train_stages(kernels=True)`, designs/kit.py's `device_*`) in
CALL_OPS units: a "kernel" is one launch of a .cu kernel, an "op" one torch op, a copy one of
`pcie_copies`. The embedding work must be priced as the launches it makes, one for one, so that a
change to either side fails here instead of drifting; the dense step (kit.dense_step) is priced
by calibrated fixed costs in op units (`dense_base`, `dense_layer`), which must cover at least
the ops it launches.
"""

from __future__ import annotations

import pytest

from scratchkit.costmodel.hardware import CALL_OPS
from scratchkit.designs.step import StepWork
from scratchkit.device import Device
from scratchkit.device_ops import counting_ops
from scratchkit.projection.machines import get_machine
from scratchkit.projection.project import stage_work
from scratchkit.trainers import make_trainer
from stand_ins import StandInCuda

TRAIN_STAGES = {  # the stages that are Train's work in each trainer's priced step
    "gpu-only": ("transfer", "embedding_forward", "mlp", "embedding_backward", "update"),
    "lru": ("transfer", "embedding_forward", "mlp", "embedding_backward", "update"),
    "scratchpipe-device": ("train",),
}
EMBEDDING = ("tbe_", "torch.sort", "slots marked", "hit counter")  # the kernels and ops of the embedding path


def counted_step(name, config):
    """One step's launches on Train's path, through the stand-in, torch's ops counted."""
    with make_trainer(name, config, device=Device("cpu", StandInCuda())) as trainer:
        list(trainer.train(1))  # first use aside
        with counting_ops("cpu"):
            (record,) = list(trainer.train(1))
    return record


def priced(name, config):
    """The step's Train stages as a GPU's cost model prices them: (ops by call, copies)."""
    stages = stage_work(name, StepWork.from_config(config), get_machine("h200"))
    calls, copies = {}, 0.0
    for stage in TRAIN_STAGES[name]:
        for call, count in stages[stage].device_calls:
            calls[call] = calls.get(call, 0) + count * CALL_OPS[call]
        copies += stages[stage].pcie_copies
    return calls, copies


@pytest.mark.parametrize("name", list(TRAIN_STAGES))
def test_the_embedding_launches_priced_are_the_launches_counted(tiny_config, name):
    record = counted_step(name, tiny_config)
    launches = record.launches
    embedding = sum(n for what, n in launches.items() if what.startswith(EMBEDDING))
    calls, copies = priced(name, tiny_config)
    dense = {"dense_base", "dense_layer"}
    priced_embedding = sum(n for call, n in calls.items() if call not in dense)
    if name == "scratchpipe-device":  # on a GPU Plan's slots are CuPy's, joined on the device by
        priced_embedding -= CALL_OPS["op"]  # an op; the stand-in's are host arrays, in the one copy
    assert embedding == priced_embedding, (launches, calls)
    assert launches["copy to device"] == copies  # the ids (slots) and offsets; the dense features and labels


@pytest.mark.parametrize("name", list(TRAIN_STAGES))
def test_the_dense_steps_priced_ops_cover_the_ops_it_launches(tiny_config, name):
    record = counted_step(name, tiny_config)
    dense_ops = sum(
        n for what, n in record.launches.items() if what.startswith("torch.") and not what.startswith(EMBEDDING)
    )
    calls, _ = priced(name, tiny_config)
    assert 0 < dense_ops <= calls["dense_base"] + calls["dense_layer"]
