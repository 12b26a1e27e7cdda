"""`scratchkit simulate`: table and JSON output, curves, and clear errors (exit 2) for bad input."""

from __future__ import annotations

import json
from collections import OrderedDict

import numpy as np
import pytest

from scratchkit.commands.cli import main


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def lru_hits(trace, capacity):
    stack, hits = OrderedDict(), 0
    for row in trace.tolist():
        hits += row in stack
        stack[row] = None
        stack.move_to_end(row)
        if len(stack) > capacity:
            stack.popitem(last=False)
    return hits


@pytest.fixture
def trace_file(tmp_path):
    rng = np.random.default_rng(0)
    weights = 1.0 / np.arange(1, 301)
    trace = rng.choice(300, size=3_000, p=weights / weights.sum()).astype(np.int64)
    path = tmp_path / "ids.npy"
    np.save(path, trace)
    return path, trace


def test_json_record_has_the_counts(capsys, trace_file):
    path, trace = trace_file
    code, out, _ = run(capsys, "simulate", "--trace", path, "--policy", "lru", "--capacity", 50, "--json")
    data = json.loads(out)
    assert code == 0
    assert (data["policy"], data["capacity"], data["lookups"]) == ("lru", 50, 3_000)
    assert data["hits"] == lru_hits(trace, 50)
    assert data["misses"] == 3_000 - data["hits"]
    assert data["hit_rate"] == pytest.approx(data["hits"] / 3_000)
    assert data["fetched_rows"] == data["misses"]
    assert "written_back_rows" in data


def test_table_output_is_readable(capsys, trace_file):
    path, trace = trace_file
    code, out, _ = run(capsys, "simulate", "--trace", path, "--policy", "LRU", "--capacity", 50)
    lines = dict(line.split(None, 1) for line in out.strip().splitlines())
    assert code == 0 and lines["hits"].strip() == str(lru_hits(trace, 50))


def test_lookahead_reports_batches_and_full_hits(capsys, trace_file):
    path, _ = trace_file
    code, out, _ = run(
        capsys,
        "simulate",
        "--trace",
        path,
        "--policy",
        "lookahead",
        "--capacity",
        400,
        "--batch-size",
        100,
        "--depth",
        2,
        "--json",
    )
    data = json.loads(out)
    assert code == 0 and data["hit_rate"] == 1.0
    assert len(data["batches"]["hits"]) == 30 and sum(data["batches"]["fetched"]) == data["fetched_rows"]
    code, out, _ = run(
        capsys,
        "simulate",
        "--trace",
        path,
        "--policy",
        "lookahead",
        "--capacity",
        400,
        "--batch-size",
        100,
        "--depth",
        2,
    )
    assert code == 0 and "min_capacity" in out and "30 (per-batch series: --json)" in out


@pytest.mark.parametrize(
    "policy, extra", [("static", ["--prefix-share", "0.5"]), ("lfu", []), ("opt", []), ("setassoc", ["--ways", "5"])]
)
def test_other_policies_run(capsys, trace_file, policy, extra):
    path, _ = trace_file
    code, out, _ = run(capsys, "simulate", "--trace", path, "--policy", policy, "--capacity", 50, *extra, "--json")
    assert code == 0 and json.loads(out)["policy"] == policy


def test_mrc_json_lists_every_capacity(capsys, trace_file):
    path, trace = trace_file
    code, out, _ = run(capsys, "simulate", "--trace", path, "--mrc", "--capacities", "1,10,100", "--json")
    data = json.loads(out)
    unique = len(set(trace.tolist()))
    assert code == 0 and data["unique_ids"] == unique
    assert [row["capacity"] for row in data["lru"]] == list(range(1, unique + 1))
    assert data["lru"][9]["hits"] == lru_hits(trace, 10)
    assert [row["capacity"] for row in data["opt"]] == [1, 10, 100]
    assert all(o["hits"] >= data["lru"][o["capacity"] - 1]["hits"] for o in data["opt"])


def test_mrc_table_and_single_curve(capsys, trace_file):
    path, _ = trace_file
    code, out, _ = run(capsys, "simulate", "--trace", path, "--mrc", "--points", 5)
    assert code == 0 and "lru hits" in out and "opt hits" in out and "--json prints all" in out
    code, out, _ = run(capsys, "simulate", "--trace", path, "--mrc", "--policy", "lru", "--json")
    assert code == 0 and "opt" not in json.loads(out)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--policy", "fifo", "--capacity", "5"], "unknown cache policy 'fifo'"),
        (["--policy", "lru", "--capacity", "0"], "--capacity must be >= 1 (rows in the cache), got 0"),
        (["--policy", "lru", "--capacity", "-3"], "--capacity must be >= 1 (rows in the cache), got -3"),
        (
            ["--policy", "lookahead", "--capacity", "5", "--batch-size", "0"],
            "--batch-size must be >= 1 (lookups per batch), got 0",
        ),
        (
            ["--policy", "lookahead", "--capacity", "5"],
            "--policy lookahead cuts the trace into batches: give --batch-size (lookups per batch)",
        ),
        (
            ["--policy", "lookahead", "--capacity", "5", "--batch-size", "100", "--depth", "0"],
            "--depth must be >= 1 (batches planned ahead of training), got 0",
        ),
        (["--policy", "lru", "--capacity", "8", "--depth", "2"], "--policy lru does not take --depth"),
        (["--policy", "lru", "--capacity", "min"], "--capacity min cuts the trace into batches: give --batch-size"),
        (
            ["--policy", "lookahead", "--capacity", "5", "--batch-size", "100", "--depth", "1"],
            "the minimum capacity is",
        ),
        (["--policy", "lru"], "--policy and --capacity are required"),
        (["--policy", "lru", "--capacity", "8", "--ways", "4"], "--policy lru does not take --ways"),
        (["--policy", "setassoc", "--capacity", "10", "--ways", "4"], "not a multiple of ways 4"),
        (["--mrc", "--capacity", "5"], "--mrc does not take --capacity"),
        (["--mrc", "--policy", "lfu"], "--mrc draws lru and opt curves, not lfu"),
        (["--mrc", "--capacities", "1,x"], "comma-separated integers"),
    ],
)
def test_bad_options_exit_2_with_a_clear_message(capsys, trace_file, argv, message):
    path, _ = trace_file
    code, out, err = run(capsys, "simulate", "--trace", path, *argv)
    assert code == 2 and out == "" and message in err


@pytest.mark.parametrize(
    "content, message",
    [
        (np.array([[1, 2], [3, 4]], dtype=np.int64), "1-D"),
        (np.array([1.0, 2.0]), "float64, not int64"),
        (np.array([4, -1, 2], dtype=np.int64), "ids must be >= 0"),
    ],
)
def test_bad_trace_files_exit_2(capsys, tmp_path, content, message):
    path = tmp_path / "bad.npy"
    np.save(path, content)
    code, _, err = run(capsys, "simulate", "--trace", path, "--policy", "lru", "--capacity", 4)
    assert code == 2 and message in err


def test_missing_trace_file_exits_2(capsys, tmp_path):
    code, _, err = run(capsys, "simulate", "--trace", tmp_path / "nope.npy", "--policy", "lru", "--capacity", 4)
    assert code == 2 and "does not exist" in err


def test_mrc_sampled_reports_its_rate_and_error_against_the_exact_curve(capsys, trace_file):
    path, trace = trace_file
    code, out, _ = run(capsys, "simulate", "--trace", path, "--mrc", "--sample", 0.5, "--vs-exact", "--json")
    data = json.loads(out)
    assert code == 0 and "opt" not in data and data["sample"]["rate"] == 0.5
    assert data["unique_ids"] == len(set(trace.tolist()))
    error = data["error_vs_exact"]
    assert error["from_capacity"] == 2 and 0 <= error["mae"] <= error["max"] <= 1
    code, out, _ = run(capsys, "simulate", "--trace", path, "--mrc", "--sample-size", 50, "--vs-exact")
    assert code == 0 and "sampled by SHARDS" in out and "mean |error|" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--mrc", "--sample", "0"], "--sample must be a rate in (0, 1], got 0.0"),
        (["--mrc", "--sample", "1.5"], "--sample must be a rate in (0, 1], got 1.5"),
        (["--mrc", "--sample-size", "0"], "--sample-size must be >= 1 (ids the sample keeps), got 0"),
        (["--mrc", "--vs-exact"], "--vs-exact compares a sampled curve with the exact one"),
        (["--mrc", "--sample", "0.1", "--policy", "opt"], "OPT needs the whole trace"),
        (["--policy", "lru", "--capacity", "4", "--sample", "0.1"], "--sample applies to --mrc"),
    ],
)
def test_bad_sampling_options_exit_2(capsys, trace_file, argv, message):
    path, _ = trace_file
    code, out, err = run(capsys, "simulate", "--trace", path, *argv)
    assert code == 2 and out == "" and message in err
