"""scripts/host_core.py: a calibration's table-batched calls folded into the GPU servers' host core
(costmodel/host_core.json) with their provenance, so a server's hybrid is priced on the batched
C++ path its host runs (Hardware.batched_host), not as per-table torch ops."""

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from scratchkit.costmodel import servers
from scratchkit.designs.step import StepWork, TableWork
from scratchkit.config import OptimizerKind
from scratchkit.projection.project import project, stage_work

from tests.test_costmodel import batched

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import host_core  # noqa: E402


def embedding_bound_step() -> StepWork:
    return StepWork(
        batch_size=2048,
        dim=64,
        state_width=0,
        optimizer=OptimizerKind.SGD,
        num_dense=13,
        tables=tuple(TableWork(1_000_000, 81_920.0, 56_000.0, 250_000) for _ in range(8)),
        bottom=(13, 64),
        top=(100, 1),
    )


def test_the_file_is_written_back_as_it_reads():
    text = servers.HOST_CORE_FILE.read_text()
    assert host_core.dump(json.loads(text)) == text


def test_a_servers_hybrid_prices_the_batched_calls_once_the_host_core_has_them(tmp_path, monkeypatch):
    calibration = replace(batched(), origin="calibrated 2030-01-01 00:00 UTC on a quiet Xeon, 2 cores")
    calibration.sources["host_tbe_backward"] = "embedding_backward_tables (C++, one thread)"
    core = json.loads(servers.HOST_CORE_FILE.read_text())
    before = servers.server("h100-pcie5")
    assert not before.batched_host  # the per-table torch ops, until a calibration is folded in
    folded = host_core.fold(core, calibration, [*host_core.TBE_FIELDS, "host_calls"], "abc1234")
    path = tmp_path / "host_core.json"
    path.write_text(host_core.dump(folded))
    monkeypatch.setattr(servers, "HOST_CORE_FILE", path)
    servers.host_core.cache_clear()
    try:
        h100 = servers.server("h100-pcie5")
        assert h100.batched_host and h100.host_tbe_backward == calibration.host_tbe_backward
        assert "a quiet Xeon" in h100.sources["host_tbe_backward"] and "abc1234" in h100.sources["host_tbe_backward"]
        assert h100.host_calls["tbe_backward"] == pytest.approx(calibration.host_calls["tbe_backward"], rel=1e-3)
        assert h100.host_calls["lookup"] == before.host_calls["lookup"]  # the rest kept
        work = embedding_bound_step()
        parts = stage_work("hybrid", work, h100)
        assert all(parts[s].host_tbe for s in ("embedding_forward", "embedding_backward", "update"))
        assert not stage_work("gpu-only", work, h100)["embedding_backward"].host_tbe  # the device's own
        assert project("hybrid", work, h100).samples_per_s > 0
    finally:
        servers.host_core.cache_clear()


def test_only_host_fields_the_calibration_measured_are_folded():
    core = json.loads(servers.HOST_CORE_FILE.read_text())
    with pytest.raises(ValueError, match="'device_sort' is not a host field"):
        host_core.fold(core, batched(), ["device_sort"], "abc1234")
    with pytest.raises(ValueError, match="did not measure host_tbe_update"):
        host_core.fold(core, batched(host_tbe_update=None), ["host_tbe_update"], "abc1234")
