"""The sharded cost model (scratchkit/distributed/sharded_cost.py): its traffic against the bytes a real
2-rank job counted on the wire, its link arithmetic, and TorchRec's traffic for comparison."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from scratchkit.commands.cli import main as cli
from scratchkit.costmodel.hardware import GB, US
from scratchkit.distributed.sharded_cost import Links, measure_work, project_sharded, scaling, torchrec_traffic


@pytest.mark.parametrize("sharding", ["row", "table"])
def test_the_models_traffic_is_what_a_real_job_sent(capsys, tiny_config, sharding):
    """2 ranks of `tiny` (a global batch of 32) on batches 0 and 1: the exchanges counted the bytes
    they sent to the other rank (exchange.py); the model counts them from the data alone."""
    status = cli(
        [
            "bench",
            "--profile",
            "tiny",
            "--trainers",
            "hybrid",
            "--steps",
            "2",
            "--warmup",
            "0",
            "--world-size",
            "2",
            "--sharding",
            sharding,
            "--json",
        ]
    )
    (row,) = json.loads(capsys.readouterr().out)
    assert status == 0
    per_rank = replace(tiny_config, data=replace(tiny_config.data, batch_size=16))
    work = measure_work(per_rank, sharding, 2, batches=2)
    modelled = 2 * (work.traffic["ids"] + work.traffic["rows"] + work.traffic["grads"])  # both ranks
    assert row["sent_bytes_per_step"] == modelled


def test_an_exchange_uses_nvlink_within_a_server_and_the_nic_beyond():
    links = Links(
        gpus_per_server=8,
        nvlink_bw=100 * GB,
        nvlink_latency=10 * US,
        nic_bw=10 * GB,
        nic_latency=20 * US,
        peer_latency=1 * US,
    )
    assert links.seconds(1e9, 1) == 0.0
    assert links.seconds(1e9, 8) == pytest.approx(10e-6 + 7e-6 + 1e9 / 100e9)
    # 16 GPUs: 7 of 15 peers in the server, 8 beyond it; the NIC's share takes longer
    assert links.seconds(1e9, 16) == pytest.approx(20e-6 + 15e-6 + 1e9 * 8 / 15 / 10e9)


def test_torchrecs_row_wise_sends_n_times_the_pooled_vectors_of_table_wise(tiny_config):
    table, row = (torchrec_traffic(tiny_config, s, 4, lookups=192) for s in ("table", "row"))
    assert row["rows"] == 4 * table["rows"] == 4 * 32 * 3 * 8 * 4 * 3 / 4
    assert row["ids"] == table["ids"] == 192 * 8 * 3 / 4


def test_one_gpu_is_the_one_process_projection_and_more_gpus_add_exchanges(tiny_config):
    rows = scaling(tiny_config, "scratchpipe", gpu_counts=(1, 2, 16))
    assert [(r.sharding, r.gpus) for r in rows] == [
        ("table", 1),
        ("table", 2),
        ("row", 1),
        ("row", 2),
        ("row", 16),
    ]  # table-wise: 3 tables at most
    one, two = rows[2], rows[3]
    assert one.exchange_seconds == dict.fromkeys(one.exchange_seconds, 0.0)
    assert one.step_seconds == one.compute_seconds and one.servers == 1
    assert all(v > 0 for v in two.exchange_seconds.values()) and rows[4].servers == 2
    hidden = project_sharded(tiny_config, "hybrid", "row", 2, overlap_ids=True)
    shown = project_sharded(tiny_config, "hybrid", "row", 2)
    assert shown.step_seconds - hidden.step_seconds == pytest.approx(shown.exchange_seconds["ids"])
