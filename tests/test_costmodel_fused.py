"""gpu-only's step on a CPU is the fused SGD path (trainers/device_only.py, fused_sgd.py): the
backward stage only sorts the lookups, the update sums each id's gradients and applies them in the
same pass. The model prices the two by the fused path's own curves (calibration/fused_timings.py);
a machine without them prices it as the unfused backward and update it computes bit for bit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scratchkit.config import OptimizerKind
from scratchkit.costmodel.curves import RowCurve
from scratchkit.costmodel.hardware import Hardware
from scratchkit.projection.project import stage_work
from tests.test_costmodel import US, batched, tables

SORT_S, FUSED_S = 0.5e-9, 4e-9  # per lookup: the fused path's two calls on `fused()`


def fused(**changes) -> Hardware:
    """batched() with the fused path measured: 0.5 ns per lookup sorted, 4 ns per lookup summed
    and applied (its unfused pair: 2 ns per lookup's backward, 3 ns per distinct row updated)."""
    curve = lambda s: RowCurve(((64, 1e6, 1, s),))
    return batched(host_tbe_sort=curve(SORT_S), host_tbe_fused=curve(FUSED_S), **changes)


@pytest.mark.parametrize("count", [1, 8])
def test_gpu_only_on_a_cpu_is_priced_by_the_fused_path(count):
    """Each table's 1000 lookups (500 distinct): the backward stage their sort at 0.5 ns, the
    update their sums and rows at 4 ns, each call with the unfused call's fixed costs (10 us + 1
    us a table). Priced unfused, the backward was 2 ns a lookup and the update 3 ns a row."""
    machine = fused()
    stages = stage_work("gpu-only", tables(count), machine)
    assert stages["embedding_backward"].seconds(machine) == pytest.approx((10 + count) * US + count * 1000 * SORT_S)
    assert stages["update"].seconds(machine) == pytest.approx((10 + count) * US + count * 1000 * FUSED_S)


@pytest.mark.parametrize("trainer", ["hybrid", "lru", "static"])
def test_the_trainers_that_do_not_fuse_keep_the_unfused_prices(trainer):
    """Only gpu-only's trainer fuses: hybrid's host stages and a cache's slots are the unfused calls."""
    machine = fused()
    stages = stage_work(trainer, tables(8), machine)
    kinds = {entry[0] for part in stages.values() for entry in part.host_tbe + part.device_tbe}
    assert "backward" in kinds and "sgd" in kinds and not kinds & {"sort", "fused"}


def test_a_machine_without_the_fused_curves_prices_the_fused_path_as_the_unfused_pair():
    """Calibrations saved before the fused curves (and datasheet machines) keep their prices: the
    sort priced as the whole backward, the fused update as the SGD update of the distinct rows."""
    machine = batched()
    stages = stage_work("gpu-only", tables(8), machine)
    assert stages["embedding_backward"].seconds(machine) == pytest.approx(18 * US + 8 * 1000 * 2e-9)
    assert stages["update"].seconds(machine) == pytest.approx(18 * US + 8 * 500 * 3e-9)


def test_adagrad_is_not_fused():
    """The fused path is SGD's: with Adagrad gpu-only's update stays torch's, after the batched backward."""
    machine = fused()
    stages = stage_work("gpu-only", replace(tables(8), optimizer=OptimizerKind.ADAGRAD), machine)
    assert [e[0] for e in stages["embedding_backward"].device_tbe] == ["backward"] * 8
    assert ("update_adagrad", 1) in stages["update"].device_calls
