"""The course's headline (scratchkit/course/headline.py): the projection record as the README's
and notebook 05's table, each design's samples/s and bound, ScratchPipe's speed over its peers."""

import json
from pathlib import Path

from scratchkit.course.headline import (
    PIPELINE,
    SERVER,
    headline_markdown,
    headline_rows,
    headline_table,
    peer_rows,
    shown_designs,
)
from scratchkit.designs import BASELINE, PEERS, PRODUCTION_PEER, versus

# the headline's designs, in its order: the baseline, the peers, ScratchPipe both ways, the upper bound
DESIGNS = ["hybrid", "prefetch-lru", "prefetch-lru-device", "scratchpipe", "scratchpipe-device", "gpu-only"]

REPO = Path(__file__).resolve().parents[1]


def made_up_record() -> dict:
    at = lambda speed, bound, **ratios: {
        SERVER: {"samples_per_s": speed, "bound_stage": bound, **ratios},
        "v100-pcie3": {"samples_per_s": 1.0, "bound_stage": "elsewhere", **{k: v + 10 for k, v in ratios.items()}},
    }
    trainers = {d: at(1000.0 * (i + 1), f"stage{i}") for i, d in enumerate(DESIGNS)}
    trainers[PIPELINE] = at(123_456.0, "train", **{versus(peer): 4.0 + i for i, peer in enumerate(PEERS)})
    return {
        "command": "made up",
        "commit": "abc1234",
        "date": "today",
        "machine": "none",
        "figures": {"wide": trainers},
    }


def test_a_column_per_workload_a_row_per_design_on_the_server_and_the_pipelines_ratios():
    record = made_up_record()
    assert shown_designs(record) == DESIGNS
    head, rows = headline_rows(record)
    assert head == ["design", "wide"]
    assert [r[0] for r in rows] == [*DESIGNS, f"{PIPELINE} x {BASELINE}"]
    speeds = dict(rows[: len(DESIGNS)])
    assert speeds[PIPELINE] == "123k, train"  # thousands, the bound named
    assert speeds[DESIGNS[0]] == "1k, stage0"  # the first design, on the server, not the V100's
    assert rows[-1][1] == f"{4.0 + PEERS.index(BASELINE):.2f}"


def test_the_peer_table_has_a_column_per_server_with_what_bounds_the_peer():
    head, rows = peer_rows(made_up_record())
    assert head == ["workload", SERVER, "v100-pcie3"]
    peer = PEERS.index(PRODUCTION_PEER)
    bound = f"stage{DESIGNS.index(PRODUCTION_PEER)}"
    assert rows == [["wide", f"{4.0 + peer:.2f} ({bound})", f"{14.0 + peer:.2f} (elsewhere)"]]


def test_the_markdown_says_where_its_figures_come_from():
    text = headline_markdown(made_up_record())
    assert (
        text.count("\n| wide |") == 1
        and "| design | wide |" in text
        and "results/projections.json" in text
        and "today" not in text
    )
    assert "`made up`, commit abc1234, today" in headline_table(made_up_record())._repr_html_().replace("&#x27;", "'")


def test_the_headline_says_it_is_projected_and_which_design_is_the_papers():
    record = made_up_record()
    for text in (headline_markdown(record), headline_table(record).caption):
        assert "projected by the cost model, not measured" in text
        assert f"{PIPELINE} is the paper's design at its best" in text
    assert "same projection, not measured" in headline_markdown(record)


def test_the_readme_says_what_the_headline_is_before_and_after_it():
    """A newcomer read the table as measured: the words around it say it is a projection, which
    row is the paper's design, and that only the paper's abstract was at hand."""
    readme = (REPO / "README.md").read_text()
    before = readme.split("<!-- headline")[0].split("## What the comparison shows")[1]
    after = readme.split("<!-- end of headline -->")[1].strip().split("\n\n")[0]
    assert (
        "not measured" in " ".join(before.split()) and f"`{PIPELINE}` is ScratchPipe as the paper builds it" in before
    )
    assert " ".join(after.split()).startswith("In the cost model's projection, not in a measurement")
    assert "Only the paper's abstract was at hand" in " ".join(after.split())


def test_the_readme_shows_the_recorded_headline():
    record = json.loads((REPO / "results" / "projections.json").read_text())
    readme = (REPO / "README.md").read_text()
    assert headline_markdown(record) in readme


def test_the_readme_stays_a_guide():
    """What it is, the two commands, the course, the CLI, your own data, the trainers, the layout and
    where results are, in at most 300 lines: the rest lives in docs/ and the records in results/."""
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md is {len(lines)} lines"
