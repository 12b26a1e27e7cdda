"""benchmarks/bench_peers.py: the three peers run on `tiny` in a few steps, FBGEMM where it is
installed (the `peers` extra) and skipped with a message where not; and FBGEMM's peer trains the
same model as plain PyTorch, so the benchmark compares like with like."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from scratchkit.data.synthetic import SyntheticSource
from scratchkit.measure.reference import ReferenceRun
from scratchkit.profiles import get_profile

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_peers.py"
spec = importlib.util.spec_from_file_location("bench_peers", PATH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
needs_fbgemm = pytest.mark.skipif(
    bench.fbgemm_missing() is not None, reason=f"FBGEMM not installed (make peers): {bench.fbgemm_missing()}"
)


def run_json(capsys, *argv):
    bench.main(["--profiles", "tiny", "--threads", "1", "--steps", "2", "--rounds", "2", "--json", *argv])
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_the_bench_times_every_installed_peer_against_plain_pytorch(capsys):
    rows, err = run_json(capsys)
    peers = [r["peer"] for r in rows]
    expected = ["gpu-only", "gpu-only-by-id", "hybrid", "pytorch"] + (
        ["fbgemm"] if bench.fbgemm_missing() is None else []
    )
    assert peers == expected
    assert ("FBGEMM skipped" in err) == ("fbgemm" not in peers)
    for row in rows:
        assert row["profile"] == "tiny" and row["threads"] == 1 and len(row["rounds_samples_per_s"]) == 2
        assert row["samples_per_s"] > 0
    by_peer = {r["peer"]: r for r in rows}
    plain = by_peer["pytorch"]["rounds_samples_per_s"]
    assert by_peer["pytorch"]["ratio_to_pytorch"] == 1.0
    kit = rows[0]["rounds_samples_per_s"]  # the median of two round ratios: their mean
    assert rows[0]["ratio_to_pytorch"] == pytest.approx((kit[0] / plain[0] + kit[1] / plain[1]) / 2)
    if "fbgemm" in peers:
        fbgemm = by_peer["fbgemm"]["rounds_samples_per_s"]
        assert rows[0]["ratio_to_fbgemm"] == pytest.approx((kit[0] / fbgemm[0] + kit[1] / fbgemm[1]) / 2)
    else:
        assert rows[0]["ratio_to_fbgemm"] is None


def test_without_fbgemm_the_bench_says_so_and_times_the_others(capsys, monkeypatch):
    monkeypatch.setattr(bench, "fbgemm_missing", lambda: "ImportError: No module named 'fbgemm_gpu'")
    rows, err = run_json(capsys)
    assert [r["peer"] for r in rows] == ["gpu-only", "gpu-only-by-id", "hybrid", "pytorch"]
    assert "FBGEMM skipped" in err and "No module named 'fbgemm_gpu'" in err and "make peers" in err


def test_bad_threads_name_the_flag(capsys):
    with pytest.raises(SystemExit) as stop:
        bench.main(["--threads", "one"])
    assert stop.value.code == 2 and "--threads 'one'" in capsys.readouterr().err


def test_steps_come_one_per_profile_or_one_for_all(capsys):
    bench.main(["--profiles", "tiny,tiny", "--threads", "1", "--steps", "2,3", "--rounds", "1", "--json"])
    assert [r["steps"] for r in json.loads(capsys.readouterr().out) if r["peer"] == "gpu-only"] == [2, 3]
    with pytest.raises(SystemExit) as stop:
        bench.main(["--profiles", "tiny,small", "--steps", "2,3,4"])
    assert stop.value.code == 2 and "3 counts for 2 profiles" in capsys.readouterr().err


def test_table_batched_inputs_lay_tables_out_table_major():
    import numpy as np

    ids = [np.array([4, 5, 6]), np.array([7]), np.array([8, 9])]
    offsets = [np.array([0, 2]), np.array([0, 1]), np.array([0, 0])]  # bags of 2+1, 1+0, 0+2
    flat_ids, flat_offsets = bench.table_batched_inputs(ids, offsets)
    assert flat_ids.tolist() == [4, 5, 6, 7, 8, 9]
    assert flat_offsets.tolist() == [0, 2, 3, 4, 4, 4, 6]


@needs_fbgemm
def test_fbgemm_trains_the_same_model_as_plain_pytorch():
    """Same batches, initial weights, dense model and SGD: FBGEMM's tables and losses stay within
    float rounding of the reference's (its kernels add in their own order, so not bit for bit)."""
    config = get_profile("tiny")
    source = SyntheticSource(config.data)
    initial = [t.weight.detach().clone() for t in ReferenceRun(config, source).model.tables]
    fbgemm, reference = bench.FbgemmRun(config, source), ReferenceRun(config, source)
    assert fbgemm.train(8) == pytest.approx(reference.train(8), abs=1e-6)
    for mine, table, before in zip(fbgemm.tbe.split_embedding_weights(), reference.model.tables, initial):
        assert torch.allclose(mine, table.weight.detach(), atol=1e-6, rtol=0)
        assert not torch.equal(mine, before)  # it trained: not two untouched copies compared


def test_the_embedding_work_alone_is_timed_beside_the_per_table_ops(capsys):
    bench.main(["--profiles", "tiny", "--threads", "1", "--steps", "2", "--rounds", "1", "--json", "--embeddings"])
    rows = json.loads(capsys.readouterr().out)
    expected = ["gpu-only", "hybrid", "per-table"] + (["fbgemm"] if bench.fbgemm_missing() is None else [])
    assert [r["peer"] for r in rows] == expected
    assert all(r["ms_per_step"] > 0 for r in rows)
    assert rows[2]["speedup_over_per_table"] == 1.0
    assert rows[0]["speedup_over_per_table"] == pytest.approx(rows[2]["ms_per_step"] / rows[0]["ms_per_step"])


def test_a_profile_takes_a_scale_and_a_bad_one_names_the_flag(capsys):
    config = bench.profile_config("embedding-bound@0.001")
    assert config.data.table_sizes == get_profile("embedding-bound", 0.001).data.table_sizes
    assert bench.profile_config("small") == get_profile("small")
    for bad in ("small@0.5", "embedding-bound@x"):
        with pytest.raises(SystemExit) as stop:
            bench.main(["--profiles", bad])
        assert stop.value.code == 2 and f"--profiles: profile {bad!r}" in capsys.readouterr().err


def test_the_run_is_recorded_with_its_command_and_rows(capsys, tmp_path):
    path = tmp_path / "peers.json"
    rows, _ = run_json(capsys, "--record", str(path))
    record = json.loads(path.read_text())
    assert record["command"].startswith("benchmarks/bench_peers.py --profiles tiny")
    assert {"commit", "date", "machine"} <= set(record)
    figures = record["figures"]
    assert figures["steps"] == {"tiny": 2} and figures["rounds"] == 2
    assert list(figures["peers"]) == [f"tiny, 1 thread, {r['peer']}" for r in rows]
    gpu_only = figures["peers"]["tiny, 1 thread, gpu-only"]
    assert gpu_only["samples_per_s"] == round(rows[0]["samples_per_s"])
    if bench.fbgemm_missing() is None:  # each round's ratio to FBGEMM kept: the spread
        rounds = [float(x) for x in gpu_only["x_fbgemm_rounds"].split()]
        assert len(rounds) == 2 and min(rounds) <= gpu_only["x_fbgemm"] <= max(rounds)


def test_every_peer_runs_on_its_columns_threads(monkeypatch):
    """A column of n threads gives every peer n: torch's (the dense model, FBGEMM's OpenMP) and the
    kit's own C++ loops (`TrainConfig.threads`), whose default, every core, would give gpu-only the
    whole machine in the one-thread column."""
    from scratchkit.embedding import tbe_native

    seen = []

    def timed(name, config, source, steps):
        if name == "gpu-only":
            with bench.make_trainer("gpu-only", config, source=source):
                seen.append((config.cpu_threads, tbe_native.host_threads(), torch.get_num_threads()))
        return 1.0

    monkeypatch.setattr(bench, "time_run", timed)
    bench.measure(["tiny"], [1, 2], [1], 1, ["gpu-only", "pytorch"])
    assert seen == [(1, 1, 1), (2, 2, 2)]
