"""The trainers' GPU path (embedding/device_tbe.py: tbe.cu's kernels), run through the stand-in CUDA
runtime: against an independent implementation bit for bit, and against plain PyTorch to rounding.

On CUDA the trainers sum each id's gradients in lookup order, one thread per row and column
(tbe.cu). The CPU's C++ loops do the same with `summation_order="by-id"` (table_batched.cpp, a
different program: loops over sorted runs, fused with SGD in gpu-only): so a run through the
stand-in must equal a CPU by-id run bit for bit, and plain PyTorch (measure/reference.py:
nn.EmbeddingBag, torch.optim) to float rounding, with every optimizer.
"""

from __future__ import annotations

import pytest
import torch

from conftest import cupy_stand_in_engine
from scratchkit.config import OptimizerConfig, OptimizerKind, SummationOrder
from scratchkit.device import Device
from scratchkit.measure.verify import GPU_TOLERANCE, largest_difference, verify
from scratchkit.trainers import make_trainer
from stand_ins import StandInCuda

ON_THE_DEVICE = [
    "gpu-only",
    "lru",
    "static",
    "prefetch-lru",
    "scratchpipe",
    "scratchpipe-device",
    "prefetch-lru-device",
    "lru-device",
]


def stand_in(kernels: str = "twin") -> Device:
    """The stand-in runtime, Train's kernels on the NumPy twins or on the CuPy launcher's own lines
    (the real NVRTC compile, each kernel found in the cubin, run by the host build)."""
    return Device("cpu", StandInCuda(), kernels=cupy_stand_in_engine(90) if kernels == "cupy" else None)


def trained(name, config, device, steps=6):
    with make_trainer(name, config, device=device) as trainer:
        assert (getattr(trainer, "tbe", None) is not None) == isinstance(device, Device)
        records = list(trainer.train(steps))
        trainer.close()
        weights, state = trainer.embedding_weights(), trainer.embedding_state()
        dense = [p.detach().clone() for p in trainer.model.parameters()]
    return records, weights, state, dense


@pytest.mark.parametrize("name", ON_THE_DEVICE)
def test_the_device_path_is_the_cpus_by_id_run_bit_for_bit(tiny_config, name):
    by_id = tiny_config.replace(summation_order=SummationOrder.BY_ID)
    _, weights, _, dense = trained(name, tiny_config, stand_in())
    _, cpu_weights, _, cpu_dense = trained(name, by_id, "cpu")
    assert largest_difference(weights, cpu_weights) == 0.0
    assert largest_difference(dense, cpu_dense) == 0.0


@pytest.mark.parametrize("name", ["gpu-only", "scratchpipe-device"])
def test_the_cupy_launchers_lines_train_as_the_twins_do(tiny_config, name):
    """The CuPy launcher (cupy_loader.py, launched.py) with the stand-in cupy: the same bits."""
    _, twin_weights, _, _ = trained(name, tiny_config, stand_in("twin"), steps=4)
    records, weights, _, _ = trained(name, tiny_config, stand_in("cupy"), steps=4)
    assert largest_difference(weights, twin_weights) == 0.0
    assert all(r.kernel_launches >= 3 for r in records)  # forward, update, copies: counted launches


@pytest.mark.parametrize("kind", list(OptimizerKind))
@pytest.mark.parametrize("name", ["gpu-only", "lru", "scratchpipe-device"])
def test_every_optimizer_on_the_device_path_is_plain_pytorchs_to_rounding(tiny_config, name, kind):
    config = tiny_config.replace(optimizer=OptimizerConfig(kind=kind))
    (result,) = verify(config, [name], steps=8, device=stand_in())
    assert result.tolerance == GPU_TOLERANCE and result.passed, result
    assert result.max_abs_diff < 1e-6, result  # rounding: the order of an id's sums


def test_the_device_path_changes_nothing_before_the_update(tiny_config):
    """A non-finite loss stops the step on the device path too (invariant 7): the loss is read
    before anything is applied, and the tables are as they were."""
    import math

    from scratchkit.trainers.base import NonFiniteLossError

    with make_trainer("gpu-only", tiny_config, device=stand_in()) as trainer:
        list(trainer.train(2))
        before = [w.clone() for w in trainer.weights]
        with torch.no_grad():
            next(trainer.model.parameters()).fill_(math.nan)
        with pytest.raises(NonFiniteLossError, match="step 2"):
            trainer.train_step()
        assert trainer.next_batch == 2 and largest_difference(trainer.weights, before) == 0.0
