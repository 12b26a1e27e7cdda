"""The command line on your own data (--data) and the first-hour frictions of issue 13."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scratchkit.commands.cli import main

REPO = Path(__file__).resolve().parents[1]
CRITEO = REPO / "datasets" / "samples" / "criteo-synthetic.tsv"  # 48 rows
U_DATA = REPO / "datasets" / "samples" / "movielens-synthetic-u.data"  # 200 rows


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "data, extra",
    [
        (f"criteo:{CRITEO}", ["--batch-size", "4", "--steps", "12"]),
        (f"movielens:{U_DATA}", ["--batch-size", "16", "--steps", "12"]),
    ],
)
def test_verify_on_a_data_file_is_exact(capsys, data, extra):
    code, out, _ = run(capsys, "verify", "--data", data, "--trainers", "hybrid,lru,scratchpipe", *extra, "--json")
    results = json.loads(out)
    assert code == 0 and [r["trainer"] for r in results] == ["hybrid", "lru", "scratchpipe"]
    assert all(r["max_abs_diff"] == 0.0 for r in results)


def test_bench_on_a_data_file_names_it_and_hybrid_has_no_hit_rate(capsys):
    code, out, err = run(
        capsys,
        "bench",
        "--data",
        f"movielens:{U_DATA}",
        "--batch-size",
        "16",
        "--trainers",
        "hybrid,lru,scratchpipe",
        "--quick",
        "--capacity",
        "min",
    )
    assert code == 0 and out.startswith(f"data movielens:{U_DATA}: 2 tables, batch 16")
    assert "over 12 batches" in err  # --quick: 10 timed + 2 warm-up
    hybrid = next(line for line in out.splitlines() if line.startswith("hybrid "))
    assert hybrid.split()[3] == "-"


def test_bench_table_has_a_fixed_stage_order_and_stays_narrow(capsys):
    tables = []
    for trainers in ("scratchpipe,gpu-only,lru", "lru,scratchpipe"):
        code, out, _ = run(capsys, "bench", "--profile", "tiny", "--trainers", trainers, "--quick")
        lines = out.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("stage ms/step"))
        tables.append([line.split()[0] for line in lines[start + 2 :] if line.strip()])
        assert max(len(line) for line in lines) < 110
    common = [s for s in tables[0] if s in tables[1]]
    assert common == [s for s in tables[1] if s in tables[0]] and "plan" in common


def test_trace_of_a_data_file_is_the_sources_trace(capsys, tmp_path):
    import scratchkit
    from scratchkit.data.trace import make_trace

    code, out, _ = run(
        capsys,
        "trace",
        "--data",
        f"criteo:{CRITEO}",
        "--batch-size",
        "4",
        "--max-rows",
        "10",
        "--out",
        tmp_path / "ids.npy",
    )
    source, _ = scratchkit.data.open("criteo", CRITEO, batch_size=4, max_rows=10)
    assert code == 0 and "of 12 batches" in out
    np.testing.assert_array_equal(np.load(tmp_path / "ids.npy"), make_trace(source, 12))


def test_simulate_a_data_file_through_its_trace(capsys, tmp_path):
    """--data writes the trace with trace's writer and simulates it: the same as by hand."""
    code, out, _ = run(
        capsys, "simulate", "--data", f"movielens:{U_DATA}", "--policy", "lru", "--capacity", "40", "--json"
    )
    by_hand = tmp_path / "ids.npy"
    run(capsys, "trace", "--data", f"movielens:{U_DATA}", "--out", by_hand)
    _, expected, _ = run(capsys, "simulate", "--trace", by_hand, "--policy", "lru", "--capacity", "40", "--json")
    assert code == 0 and json.loads(out) == json.loads(expected)
    assert json.loads(out)["lookups"] == 128 * 2  # one batch of 128, two tables
    code, out, _ = run(capsys, "simulate", "--data", f"movielens:{U_DATA}", "--mrc", "--json")
    assert code == 0 and json.loads(out)["lookups"] == 256


def test_simulate_capacity_min_is_the_lookahead_minimum(capsys, tmp_path):
    trace = np.random.default_rng(0).zipf(1.2, 4000) % 500
    np.save(tmp_path / "t.npy", trace)
    code, out, err = run(
        capsys,
        "simulate",
        "--trace",
        tmp_path / "t.npy",
        "--policy",
        "lookahead",
        "--capacity",
        "min",
        "--batch-size",
        "100",
        "--json",
    )
    result = json.loads(out)
    assert code == 0 and result["capacity"] == result["min_capacity"] and result["hit_rate"] == 1.0
    assert f"capacity min = {result['capacity']} rows for depth 2 over 40 batches" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["verify", "--data", f"criteo:{CRITEO}", "--profile", "tiny"],
            "--data derives the model from the data: drop --profile",
        ),
        (["verify", "--max-rows", "10"], "--max-rows apply to --data only"),
        (["bench", "--data", "parquet:x"], "unknown data kind 'parquet'"),
        (["bench", "--data", "criteo"], "is not KIND:PATH"),
        (["trace", "--data", "criteo:/no/such.tsv", "--out", "x.npy"], "data file /no/such.tsv does not exist"),
        (["verify", "--depth", "0"], "--depth must be >= 1"),
    ],
)
def test_bad_data_flags_get_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "--capacity", "0"], "--capacity must be >= 1 (rows in the cache), got 0; or --capacity min"),
        (["verify", "--depth", "0"], "--depth must be >= 1 (batches planned ahead of training), got 0"),
        (["verify", "--optimizer", "adam"], "unknown optimizer 'adam'"),
        (["bench", "--warmup", "-1"], "--warmup must be >= 0 (untimed steps before the timed ones), got -1"),
        (["bench", "--max-rows", "0"], "--max-rows must be >= 1 (rows a table), got 0"),
        (["verify", "--batches-ahead", "-1"], "--batches-ahead must be >= 0 (batches made ahead of the steps), got -1"),
        (["bench", "--loader-threads", "0"], "--loader-threads must be >= 1, got 0"),
        (["trace", "--steps", "0", "--out", "ids.npy"], "--steps must be >= 1, got 0"),
        (["simulate", "--policy", "lookahead", "--capacity", "4", "--depth", "0"], "--depth must be >= 1"),
        (["simulate", "--policy", "lru", "--capacity", "0"], "--capacity must be >= 1 (rows in the cache), got 0"),
        (["simulate", "--policy", "mru", "--capacity", "4"], "unknown cache policy 'mru'"),
        (["simulate", "--mrc", "--batch-size", "0"], "--batch-size must be >= 1 (lookups per batch), got 0"),
    ],
)
def test_a_bad_flag_is_refused_by_name_before_any_data_is_read(capsys, argv, message):
    """The data file does not exist: a flag refused before it is read is refused for what it is."""
    code, _, err = run(capsys, *argv, "--data", "criteo:/no/such.tsv")
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_a_bad_line_names_file_and_line_from_the_command_line(capsys, tmp_path):
    lines = CRITEO.read_text().splitlines()
    lines[6] = lines[6].replace("\t", " ", 1)
    bad = tmp_path / "bad.tsv"
    bad.write_text("\n".join(lines) + "\n")
    code, _, err = run(capsys, "verify", "--data", f"criteo:{bad}", "--batch-size", "4")
    assert code == 2 and err.startswith(f"scratchkit verify: error: {bad}:7: expected 40 tab-separated")
    code, out, _ = run(
        capsys,
        "trace",
        "--data",
        f"criteo:{bad}",
        "--batch-size",
        "4",
        "--bad-lines",
        "skip",
        "--out",
        tmp_path / "ids.npy",
    )
    assert code == 0 and "of 11 batches" in out


def test_info_json_has_the_python_and_kit_versions(capsys):
    import platform

    code, out, _ = run(capsys, "info", "--json")
    info = json.loads(out)
    assert info["python_version"] == platform.python_version() and info["scratchkit_version"] == "0.1.0"


def test_trace_help_lists_no_training_flags(capsys):
    with pytest.raises(SystemExit):
        main(["trace", "--help"])
    out = capsys.readouterr().out
    assert "--data" in out and not any(f in out for f in ("--optimizer", "--capacity", "--depth", "--lr"))


@pytest.mark.parametrize("extra", [["--mrc"], ["--policy", "lru", "--capacity", "5"]])
def test_a_data_file_given_as_a_trace_points_to_data(capsys, extra):
    """It used to answer with numpy's 'pickled (object) data' under --mrc."""
    code, out, err = run(capsys, "simulate", "--trace", CRITEO, *extra)
    assert code == 2 and "pickle" not in err and "is not a .npy file (it is text" in err
    assert "a data file goes in --data KIND:PATH" in err and err.count("\n") == 1


def test_verify_on_torchrec_npy_files_is_exact(capsys, tmp_path):
    from test_own_data import write_torchrec_days

    write_torchrec_days(tmp_path, days=2, rows=48)
    code, out, _ = run(
        capsys,
        "verify",
        "--data",
        f"criteo-npy:{tmp_path}",
        "--batch-size",
        "8",
        "--steps",
        "12",
        "--max-rows",
        "500",
        "--trainers",
        "hybrid,scratchpipe",
        "--json",
    )
    results = json.loads(out)
    assert code == 0 and all(r["max_abs_diff"] == 0.0 for r in results)
