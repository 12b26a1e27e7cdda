"""The command line's advice, followed: each error that suggests a flag, a value or a step is taken
at its word, and the command run again must succeed. And the README's own-data commands, as
written, on a file of a few batches."""

from __future__ import annotations

import re

import pytest

from scratchkit.commands.cli import main
from test_cli_data import U_DATA
from test_own_data import criteo_rows, write


def run(capsys, argv):
    """(exit code, stdout, stderr) of `scratchkit ARGV`; argparse's own exits are codes too."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def mine(tmp_path, monkeypatch):
    """A 400-row Criteo file, as a new user's first file might be: 3 batches of 128, 16 rows over."""
    monkeypatch.chdir(tmp_path)
    return write(tmp_path / "mine.tsv", criteo_rows(400, hashes=1000))


def follow(argv: list[str], err: str) -> list[str]:
    """`argv` changed as the error advises: "did you mean --FLAG", "use --FLAG VALUE [--FLAG
    VALUE]", "drop --FLAG" or "mkdir -p FOLDER" (the first that appears)."""
    argv = [str(a) for a in argv]
    if m := re.search(r"did you mean (--[\w-]+)", err):
        wrong = re.search(r"unrecognized arguments: (--[\w-]+)", err).group(1)
        return [m.group(1) if a == wrong else a for a in argv]
    if m := re.search(r"use ((?:--[\w-]+ [^\s,;)]+\s?)+)", err):
        for flag, value in re.findall(r"(--[\w-]+) ([^\s,;)]+)", m.group(1)):
            if flag in argv:
                i = argv.index(flag)
                argv = argv[:i] + [flag, value] + argv[i + 2 :]
            else:
                argv = argv + [flag, value]
        return argv
    if m := re.search(r"drop (--[\w-]+)", err):
        i = argv.index(m.group(1))
        takes_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
        return argv[:i] + argv[i + 1 + takes_value :]
    if m := re.search(r"mkdir -p (\S+?)[,;)]?(?:\s|$)", err):
        from pathlib import Path

        Path(m.group(1)).mkdir(parents=True)
        return argv
    raise AssertionError(f"no advice to follow in {err!r}")


def test_the_readmes_own_data_commands_run_as_written_on_a_small_file(capsys, mine):
    code, out, err = run(
        capsys, ["bench", "--data", "criteo:mine.tsv", "--trainers", "gpu-only,hybrid,scratchpipe", "--capacity", "min"]
    )
    assert code == 0, err
    assert "the data has 3 batches of 128" in err and "start-up costs" in err
    assert "16 rows of the incomplete last batch left out" in err
    code, out, err = run(capsys, ["verify", "--data", "criteo:mine.tsv", "--trainers", "hybrid,lru,scratchpipe"])
    assert code == 0 and out.count(": OK") == 3 and "after 3 steps" in out, err
    assert "the data has 3 batches of 128" in err
    code, out, err = run(capsys, ["trace", "--data", "criteo:mine.tsv", "--steps", "1000", "--out", "ids.npy"])
    assert code == 0 and "of 3 batches to ids.npy" in out, err
    assert "the data has 3 batches of 128" in err


def bad_line_file(path):
    """mine.tsv with its 7th line broken (a tab turned into a space)."""
    lines = path.read_text().splitlines()
    lines[6] = lines[6].replace("\t", " ", 1)
    return write(path.with_name("bad.tsv"), [line.split("\t") for line in lines])


ADVISED = [  # (what, argv, what the error must say)
    (
        "cache too small",
        ["bench", "--data", "criteo:mine.tsv", "--trainers", "lru,prefetch-lru", "--capacity", "10"],
        "--capacity min",
    ),
    (
        "scratchpad too small",
        ["verify", "--data", "criteo:mine.tsv", "--trainers", "scratchpipe", "--capacity", "10"],
        "--capacity min",
    ),
    ("data kind", ["verify", "--data", "movielens:mine.tsv", "--trainers", "hybrid"], "criteo:"),
    ("data kind, the other way", ["verify", "--data", f"criteo:{U_DATA}", "--trainers", "hybrid"], "movielens:"),
    ("mistyped flag", ["bench", "--profle", "tiny", "--trainers", "hybrid", "--quick"], "usage: scratchkit bench"),
    ("missing folder", ["trace", "--profile", "tiny", "--steps", "2", "--out", "missing/ids.npy"], "missing"),
    (
        "--quick and --steps",
        ["bench", "--profile", "tiny", "--trainers", "hybrid", "--quick", "--steps", "3"],
        "--quick",
    ),
    ("malformed line", ["verify", "--data", "criteo:bad.tsv", "--trainers", "hybrid"], "--bad-lines skip"),
    (
        "sharded run longer than the data",
        ["bench", "--data", "criteo:mine.tsv", "--trainers", "hybrid", "--world-size", "2"],
        "--warmup",
    ),  # ranks do not fit it
]


@pytest.mark.parametrize("what, argv, says", ADVISED, ids=[case[0] for case in ADVISED])
def test_every_errors_advice_works_when_followed(capsys, mine, what, argv, says):
    bad_line_file(mine)
    code, _, err = run(capsys, argv)
    assert code == 2 and says in err and "Errno" not in err and "Traceback" not in err
    said = [line for line in err.splitlines() if not line.startswith("note: ")]
    assert len(said) == 1 or said[0].startswith("usage:"), err  # one line, or usage and one line
    followed = follow(argv, err)
    code, _, err = run(capsys, followed)
    assert code == 0, f"{' '.join(followed)}: {err}"


def test_the_capacity_advised_is_the_true_minimum_warm_up_included(capsys, mine):
    argv = ["bench", "--data", "criteo:mine.tsv", "--trainers", "lru", "--capacity", "10"]
    _, _, err = run(capsys, argv)
    need = int(re.search(r"use --capacity (\d+)", err).group(1))
    code, _, err = run(capsys, argv[:-1] + [need - 1])
    assert code == 2 and f"use --capacity {need}" in err  # one less: refused, same minimum
    code, _, _ = run(capsys, argv[:-1] + ["min"])
    assert code == 0


def test_a_mistyped_flag_gets_the_nearest_flag(capsys):
    code, _, err = run(capsys, ["bench", "--profle", "tiny"])
    assert code == 2 and "did you mean --profile" in err and "scratchkit bench: error:" in err


def test_skipped_lines_and_dropped_rows_are_counted_on_the_command_line(capsys, mine, tmp_path):
    bad = bad_line_file(mine)
    for command in (
        ["bench", "--trainers", "hybrid", "--steps", "2", "--warmup", "1"],
        ["verify", "--trainers", "hybrid"],
        ["trace", "--out", "ids.npy"],
    ):
        code, _, err = run(capsys, [*command, "--data", f"criteo:{bad}", "--bad-lines", "skip"])
        assert code == 0 and "1 malformed line skipped" in err, err
        assert "15 rows of the incomplete last batch left out" in err  # 399 rows: 3 x 128 + 15


def test_a_short_bench_keeps_one_warm_up_step_and_says_its_figures_include_start_up(capsys, mine):
    code, out, err = run(capsys, ["bench", "--data", "criteo:mine.tsv", "--trainers", "hybrid", "--json"])
    import json

    assert code == 0 and json.loads(out)[0]["steps"] == 2  # 3 batches: 1 warm-up, 2 timed
    assert "1 warm-up and 2 timed steps" in err and "start-up costs" in err
