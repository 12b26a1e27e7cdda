"""Figures quoted in the docs come from run records (results/*.json), rendered into
docs/results.md by one script; the rendered page is never edited by hand."""
import json
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
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "render_results.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_readme_quotes_the_fault_campaign_as_recorded():
    figures = json.loads((REPO / "results" / "faults.json").read_text())["figures"]
    readme = " ".join((REPO / "README.md").read_text().split())
    scratchpipe = figures["scratchpipe"].values()
    steps = figures["steps"].values()
    capacity, saves = figures["capacity"], figures["saves"]
    quoted = [f"{sum(k['run'] for k in scratchpipe)} ScratchPipe faults",
              f"{sum(k['exact'] for k in scratchpipe)} exact, {sum(k['lost rows'] for k in scratchpipe)} rows lost",
              f"{sum(t['cases'] for t in steps)} step faults over the {len(figures['steps'])} trainers",
              f"on {capacity['configurations']} random configurations at the capacity it names, "
              f"{capacity['refused']} calls refused, {capacity['exact']} exact",
              f"{saves['kills']} SIGKILLs of a checkpoint save ({saves['inside_a_save']} inside a save), "
              f"{saves['torn_files']} torn files, {saves['left_after_next_save']} temporary files"]
    assert all(t["ok"] == t["cases"] for t in steps)   # the README says "all ok"
    for text in quoted:
        assert text in readme, text
