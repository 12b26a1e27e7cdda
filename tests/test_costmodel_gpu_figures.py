"""The GPU servers' device side beyond their datasheets (costmodel/gpu_figures.py, designs/work.py's
link): the link's two directions at once, rows over it by their order, a sort's fixed part, a
kernel's launch, the backward fused with the update, each held to the measurement it comes from
(a published one, or this workplace's reading of an H200, costmodel/gpu_reading.json)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scratchkit.config import OptimizerKind
from scratchkit.costmodel.gpu_figures import gpu_reading, sort_curve
from scratchkit.costmodel.hardware import CALL_OPS
from scratchkit.costmodel.servers import SERVERS
from scratchkit.designs import StepWork, TableWork, Work, kit
from scratchkit.designs.train import train_stages
from scratchkit.designs.work import sort_units
from scratchkit.projection.machines import get_machine

ROW = 512  # bytes: 128 float32, the published records' and the reading's rows


def test_a_stage_that_reads_rows_in_and_writes_them_back_takes_its_busier_direction():
    """PCIe carries both directions at once: the published H100 backward (gpu_figures.py) read and
    wrote 366,979 rows of 512 B in 4.8 ms, 78 GB/s together, more than one direction carries."""
    h200 = get_machine("h200")
    read, written = kit.rows_over_link(366_979, ROW), kit.rows_over_link(366_979, ROW, written=True)
    assert (read + written).pcie_seconds(h200) == pytest.approx(read.pcie_seconds(h200))
    assert (read + written).pcie_seconds(h200) < 4.817e-3  # the published backward, sort and update included
    copies = Work(pcie=8e6, pcie_out=2e6, pcie_copies=2)
    assert copies.pcie_seconds(h200) == pytest.approx(8e6 / h200.pcie_bw + 2 * h200.pcie_latency)


def test_rows_over_the_link_in_lookup_order_cross_at_the_published_share_in_id_order_at_the_copies():
    h100 = get_machine("h100-sxm5")
    rows = 366_979
    lookup_order = kit.rows_over_link(rows, ROW, by_id=False).pcie_seconds(h100)
    assert lookup_order == pytest.approx(8.03e-3, rel=0.01)  # "trc_eval_ms": 8.03, the forward alone
    assert kit.rows_over_link(rows, ROW).pcie_seconds(h100) == pytest.approx(rows * ROW / h100.pcie_bw)
    # this workplace's H200 (a microVM) read them in id order at 3x its rate in lookup order
    read = gpu_reading()[0]["link_rows"]
    assert read["396940 rows in id order"]["read GB/s"] > 2.5 * read["396940 rows in lookup order"]["read GB/s"]


@pytest.mark.parametrize("keys", [65536, 1 << 20, 1 << 22])
def test_a_device_sort_is_priced_as_the_reading_timed_it_its_fixed_part_included(keys):
    """On the reading's H200, priced at the launch cost it measured, torch.sort(stable=True) of n
    int64 keys within 10% of the time it took: 126 us at 65,536 keys, most of it fixed."""
    figures, _ = gpu_reading()
    curve, _ = sort_curve(SERVERS["h200"]["stream"][0], figures["torch_op_us"] * 1e-6)
    measured = figures["sort_stable_int64_us"][str(keys)] * 1e-6
    assert sort_units(keys) / curve.at(keys) == pytest.approx(measured, rel=0.10)


def test_a_kernel_of_the_cu_files_costs_what_a_cupy_launch_took_over_a_torch_op():
    figures, _ = gpu_reading()
    for name in SERVERS:
        machine = get_machine(name)
        assert machine.device_calls["kernel"] / machine.device_calls["op"] == pytest.approx(
            figures["cupy_kernel_launch_us"] / figures["torch_op_us"]
        )
        assert CALL_OPS["kernel"] == 1  # still one launch, as tests/test_costmodel_launches.py counts it


def one_table(lookups: float, unique: float, batch: int, rows: int = 1 << 24) -> StepWork:
    return StepWork(
        batch_size=batch,
        dim=128,
        state_width=0,
        optimizer=OptimizerKind.SGD,
        num_dense=0,
        tables=(TableWork(rows=rows, lookups=lookups, unique=unique, capacity=rows),),
        bottom=(1, 128),
        top=(129, 1),
    )


def test_the_fused_update_reads_each_lookups_gradient_once():
    """tbe_backward_<optimizer> walks the sorted lookups once: each reads its bag's gradient row
    and the run's first updates its row. No value is moved or summed apart, as a coalesce would:
    a twice larger batch of the same rows costs its extra gradient rows and keys, nothing more."""
    h200 = get_machine("h200")
    w = one_table(lookups=1 << 20, unique=300_000, batch=1 << 20)
    update = train_stages(w, footprint="table", by_slot=False, kernels=True)["update"]
    assert update.device_sort_values == 0
    gradient = [r for r in update.device_rows if r[0] == "gather"]
    assert gradient == [("gather", w.lookups, ROW, w.batch_size * ROW)]
    twice = replace(w, batch_size=2 << 20, tables=(replace(w.tables[0], lookups=2 << 20),))
    more = train_stages(twice, footprint="table", by_slot=False, kernels=True)["update"]
    extra = kit.gather(True, w.lookups, ROW, twice.batch_size * ROW) + kit.stream(True, 2 * w.lookups * 8)
    grown = more.in_step(w.unique_rows).device_seconds(h200) - update.in_step(w.unique_rows).device_seconds(h200)
    assert grown == pytest.approx(extra.in_step(w.unique_rows).device_seconds(h200), rel=0.05)


def test_the_h100_sxm_server_streams_what_its_datasheet_says():
    sxm, pcie = get_machine("h100-sxm5"), get_machine("h100-pcie5")
    assert sxm.device_stream_bw == pytest.approx(0.85 * 3350e9) and "3.35 TB/s" in sxm.sources["device_stream_bw"]
    assert sxm.device_stream_bw > 1.6 * pcie.device_stream_bw and sxm.pcie_bw == pcie.pcie_bw
