"""The command line: output shapes, exit codes, and clear errors for bad input."""

import json

import numpy as np
import pytest

from scratchkit.commands.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_info_prints_one_line(capsys):
    code, out, _ = run(capsys, "info")
    assert code == 0 and out.count("\n") == 1 and "torch" in out and "CuPy" in out
    code, out, _ = run(capsys, "info", "--json")
    assert json.loads(out)["device"] in ("cpu", "cuda")


def test_verify_json_reports_exact_zero(capsys):
    code, out, _ = run(capsys, "verify", "--profile", "tiny", "--trainers", "gpu-only,hybrid", "--json")
    results = json.loads(out)
    assert code == 0
    assert [r["trainer"] for r in results] == ["gpu-only", "hybrid"]
    assert all(r["max_abs_diff"] == 0.0 for r in results)


def test_verify_exits_nonzero_when_over_tolerance(capsys, monkeypatch):
    import scratchkit.embedding.optim as optim
    import torch

    def coalesce_by_index_add(index, grads, num_rows):
        rows = torch.unique(index)
        return rows, torch.zeros(num_rows, grads.shape[1]).index_add_(0, index, grads)[rows]

    monkeypatch.setattr(optim, "coalesce", coalesce_by_index_add)
    monkeypatch.setenv("SCRATCHKIT_NATIVE", "0")  # the per-table twins, which call coalesce
    code, out, _ = run(capsys, "verify", "--profile", "tiny", "--trainers", "hybrid", "--zipf", "1.5")
    assert code == 1 and "FAIL" in out


def test_bench_json_has_the_documented_keys(capsys):
    code, out, _ = run(capsys, "bench", "--profile", "tiny", "--trainers", "gpu-only,hybrid", "--quick", "--json")
    results = json.loads(out)
    assert code == 0 and len(results) == 2
    for r in results:
        assert {"trainer", "samples_per_s", "steps", "stage_seconds"} <= set(r)
        assert r["steps"] == 10 and r["samples_per_s"] > 0
        assert {"embedding_forward", "mlp", "embedding_backward", "update", "transfer"} <= set(r["stage_seconds"])
    assert results[0]["ratio"] == 1.0


def test_bench_table_lists_stages(capsys):
    code, out, _ = run(capsys, "bench", "--profile", "tiny", "--trainers", "hybrid", "--quick")
    assert code == 0 and "samples/s" in out and "embedding_forward" in out


def test_trace_writes_npy(capsys, tmp_path):
    code, out, _ = run(capsys, "trace", "--profile", "tiny", "--steps", "3", "--out", str(tmp_path / "ids.npy"))
    trace = np.load(tmp_path / "ids.npy")
    assert code == 0 and trace.dtype == np.int64 and len(trace) == 3 * 32 * 3 * 2
    assert f"192 lookups a batch (32 samples x 3 tables x 2 ids a bag), in {tmp_path / 'ids.layout.json'}" in out


def test_simulate_cuts_a_trace_where_its_batches_end_without_being_told(capsys, tmp_path):
    """`trace` writes the layout beside the ids; `simulate` reads it where --batch-size is not
    given, and gets what the batch size it names gives."""
    path = str(tmp_path / "ids.npy")
    run(capsys, "trace", "--profile", "tiny", "--steps", "12", "--out", path)
    for policy in (["--policy", "lookahead", "--capacity", "300"], ["--policy", "lru", "--capacity", "min"]):
        code, out, err = run(capsys, "simulate", "--trace", path, *policy, "--json")
        assert (
            code == 0
            and f"note: batches of 192 lookups a batch (32 samples x 3 tables x 2 ids a bag), from {tmp_path / 'ids.layout.json'}"
            in err
        )
        told = run(capsys, "simulate", "--trace", path, *policy, "--json", "--batch-size", "192")
        assert told[0] == 0 and json.loads(told[1]) == json.loads(out)
    np.save(path, np.arange(100, dtype=np.int64))  # a new trace where the old one was: its layout is stale
    code, _, err = run(capsys, "simulate", "--trace", path, "--policy", "lookahead", "--capacity", "5")
    assert code == 2 and "describes 12 batches of 192 lookups a batch" in err and "holds 100 lookups" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "--profile", "enormous"], "unknown profile 'enormous'"),
        (["bench", "--trainers", "gpu-only,warp"], "unknown trainer 'warp'"),
        (["bench", "--profile", "tiny", "--steps", "0"], "--steps must be >= 1, got 0"),
        (
            ["verify", "--capacity", "-3"],
            "--capacity must be >= 1 (rows in the cache), got -3; or --capacity min: the fewest rows",
        ),
        (["verify", "--capacity", "0"], "--capacity must be >= 1 (rows in the cache), got 0; or --capacity min"),
        (["verify", "--optimizer", "adam"], "unknown optimizer 'adam'"),
        (["verify", "--batch-size", "0"], "--batch-size must be >= 1 (samples per batch), got 0"),
        (["verify", "--lr", "nan"], "--lr must be > 0 (the learning rate), got nan"),
        (["bench", "--load-factor", "1.5"], "--load-factor must be a share of each table in (0, 1], got 1.5"),
        (["bench", "--scale", "0.1"], "--scale applies to the profiles criteo-like, embedding-bound"),
    ],
)
def test_bad_input_gets_a_clear_error_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_capacity_min_is_the_smallest_scratchpipe_accepts(capsys):
    code, out, err = run(
        capsys,
        "verify",
        "--profile",
        "tiny",
        "--trainers",
        "scratchpipe",
        "--capacity",
        "min",
        "--depth",
        "2",
        "--steps",
        "8",
        "--json",
    )
    (result,) = json.loads(out)
    assert code == 0 and result["max_abs_diff"] == 0.0 and result["train_hit_rate"] == 1.0
    minimum = int(err.split("capacity min = ")[1].split()[0])
    code, out, err = run(
        capsys,
        "verify",
        "--profile",
        "tiny",
        "--trainers",
        "scratchpipe",
        "--capacity",
        str(minimum - 1),
        "--depth",
        "2",
        "--steps",
        "8",
    )
    assert code == 2 and "3 batches in flight (look-ahead depth 2)" in err
    assert f"use --capacity {minimum} (the fewest" in err and "CacheParams" not in err


def test_capacity_must_be_a_number_or_min(capsys):
    with pytest.raises(SystemExit):
        main(["verify", "--capacity", "lots"])
    assert "expected a number of rows or 'min'" in capsys.readouterr().err


def test_the_bench_command_line_the_benchmarks_build_runs_bench(capsys):
    """benchmarks/bench_commits.py and bench_distributed.py run bench through `bench_command` (a
    fresh interpreter) and `bench_argv` (the ranks): its argv is bench's own, --json at the end."""
    import sys

    from scratchkit.commands.bench import bench_argv, bench_command

    argv = bench_argv("tiny", "gpu-only,hybrid", 2, 1, "--batch-size", "16")
    assert bench_command("tiny", "gpu-only,hybrid", 2, 1, "--batch-size", "16") == [
        sys.executable,
        "-m",
        "scratchkit.commands.cli",
        *argv,
    ]
    code, out, _ = run(capsys, *argv)
    rows = json.loads(out)
    assert code == 0 and [r["trainer"] for r in rows] == ["gpu-only", "hybrid"] and rows[0]["steps"] == 2
