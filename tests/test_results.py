"""Figures quoted in the docs come from run records (results/*.json), rendered into
docs/results.md by one script; the rendered page is never edited by hand."""

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_record_says_what_ran_where_and_when():
    records = sorted((REPO / "results").glob("*.json"))
    assert records, "no run records in results/"
    for path in records:
        record = json.loads(path.read_text())
        assert {"command", "commit", "date", "machine", "figures"} <= set(record), path
        assert record["figures"], path


def test_docs_results_is_rendered_from_the_records():
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "render_results.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_the_readme_points_at_the_fault_campaign_s_record_instead_of_quoting_it():
    """The README names what the campaign does and links to its rendered record, whose counts come
    from results/faults.json alone (no count typed into the README can go stale)."""
    readme = (REPO / "README.md").read_text()
    assert "(docs/results.md#faults-resultsfaultsjson)" in readme
    assert "## faults (`results/faults.json`)" in (REPO / "docs" / "results.md").read_text()
    figures = json.loads((REPO / "results" / "faults.json").read_text())["figures"]
    assert f"{sum(k['run'] for k in figures['scratchpipe'].values())} ScratchPipe faults" not in readme


# --- every benchmark keeps its run as a record; the renderer takes any record's shape -------------

OWNED_ELSEWHERE = {"bench_peers.py", "bench_validate.py", "bench_projections.py"}  # their own --record


def renderer():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import render_results
    finally:
        sys.path.pop(0)
    return render_results


def test_every_benchmark_takes_record_through_the_shared_option():
    for path in sorted((REPO / "benchmarks").glob("bench_*.py")):
        if path.name in OWNED_ELSEWHERE:
            continue
        text = path.read_text()
        assert re.search(r"add_record_option\(\s*parser", text) and re.search(r"record\.keep\(\s*args\.record", text), (
            f"{path.name}: no --record (scratchkit/measure/record.py: add_record_option, RunRecord.keep)"
        )


def test_a_benchmark_run_with_record_writes_a_record_that_renders(tmp_path):
    target = tmp_path / "results" / "kernels.json"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_kernels.py"),
            "--quick",
            "--rounds",
            "1",
            "--capacity",
            "1024",
            "--batch",
            "256",
            "--record",
            str(target),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(target.read_text())
    assert record["command"].startswith("benchmarks/bench_kernels.py --quick --rounds 1")
    assert {"commit", "date", "machine"} <= set(record) and record["figures"]["capacity"] == 1024
    assert set(record["figures"]["engines"]) >= {"twin", "host"}
    page = renderer().render(target.parent)
    assert "## kernels (`results/kernels.json`)" in page and "| twin |" in page


def test_no_record_option_writes_nothing(tmp_path, monkeypatch):
    from scratchkit.measure.record import RunRecord

    monkeypatch.chdir(tmp_path)
    record = RunRecord.of_run("/somewhere/benchmarks/bench_x.py", ["--steps", "3", "a b"])
    assert record.head["command"] == "benchmarks/bench_x.py --steps 3 'a b'"
    assert record.keep(None, {"x": 1}) is None and not list(tmp_path.iterdir())
    assert json.loads(record.keep(tmp_path / "x.json", {"x": 1}).read_text())["figures"] == {"x": 1}


def test_records_of_any_shape_render(tmp_path):
    """As the peers', validation's and projections' records would come: lists of rows, rows with
    nested figures, groups of tables, plain figures."""
    head = {
        "command": "benchmarks/bench_peers.py --record results/peers.json",
        "commit": "abc",
        "date": "d",
        "machine": "m",
    }
    figures = {
        "rows": [
            {"trainer": "hybrid", "samples/s": 1234.5, "x": {"a": 0.5}},
            {"trainer": "torchrec", "samples/s": 99.25, "x": {"a": 2}},
        ],
        "cases": {"small": {"gpu-only": {"ratio": 1.0}}, "tiny": {"lru": {"ratio": 0.75}}},
        "profiles": ["small", "tiny"],
        "long": list(range(40)),
        "steps": 100,
        "group": {"spread": 0.1, "by": {"a": 1, "b": 2}},
        "deep": {"a": {"b": {"c": {"d": 1}}}},
    }
    (tmp_path / "peers.json").write_text(json.dumps(head | {"figures": figures}))
    page = renderer().render(tmp_path)
    for line in [
        "## peers (`results/peers.json`)",
        "| | samples/s | x.a |",
        "| hybrid | 1,234 | 0.5 |",
        "| torchrec | 99.2 | 2 |",
        "| | gpu-only.ratio | lru.ratio |",
        "| small | 1 |  |",
        "| tiny |  | 0.75 |",
        "**profiles**: small, tiny",
        "**long**: (40 values: see the record)",
        "**steps**: 100",
        "**group**: spread 0.1",
        "**group: by**: a 1, b 2",
        "**deep: a**",
        "| b | 1 |",
    ]:
        assert line in page, line


def guides() -> dict[str, str]:
    """The README and every page in docs/ but the rendered results.md: name -> text."""
    pages = {"README.md": (REPO / "README.md").read_text()}
    pages |= {f"docs/{p.name}": p.read_text() for p in sorted((REPO / "docs").glob("*.md")) if p.name != "results.md"}
    return pages


DATED = re.compile(r"\b20\d\d-\d\d-\d\d\b|\b\d\d:\d\d UTC\b|\brun [a-p]\b")


def dated_lines(pages: dict[str, str]) -> list[str]:
    return [
        f"{name}, line {number}: {line.strip()!r}"
        for name, text in pages.items()
        for number, line in enumerate(text.splitlines(), 1)
        if DATED.search(line)
    ]


def test_the_guides_hold_no_run_diary():
    """Dated runs live in results/ as records; the README and the docs describe what is measured,
    how to measure it again, and quote the records, never dating a run (the rendered
    docs/results.md does)."""
    pages = guides()
    assert {"README.md", "docs/benchmarks.md", "docs/course.md", "docs/gpu-expected.md"} <= set(pages)
    assert dated_lines(pages) == [], "a dated run in the guides: keep it in results/"
    assert dated_lines({"diary": "The same command again at 11:07 UTC read 0.95 (run p)."}) == [
        "diary, line 1: 'The same command again at 11:07 UTC read 0.95 (run p).'"
    ]


def test_records_the_docs_quote_are_there():
    text = "".join(guides().values())
    for name in set(re.findall(r"results/([\w-]+\.json)", text)):
        if name in {"validate.json", "peers.json", "projections.json"}:  # their benchmarks' owners record them
            continue
        if name == "notebooks.json":  # recorded on a quiet machine; the README's course table says when none is
            continue
        assert (REPO / "results" / name).exists(), f"the docs quote results/{name}, which is not there"
