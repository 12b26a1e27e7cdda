"""The course's headline (scratchkit/course/headline.py): the projection record as the README's
and notebook 05's table, each design's samples/s and bound, ScratchPipe's speed over its peers."""

import json
from pathlib import Path

from scratchkit.course.headline import (
    DESIGNS,
    PIPELINE,
    SERVER,
    headline_markdown,
    headline_rows,
    headline_table,
    peer_rows,
)
from scratchkit.trainers import PEERS, PRODUCTION_PEER, versus

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


def test_a_row_per_workload_with_each_design_on_the_server_and_the_pipelines_ratios():
    head, rows = headline_rows(made_up_record())
    assert head[0] == "workload" and head[1 : 1 + len(DESIGNS)] == list(DESIGNS)
    (row,) = rows
    assert row[0] == "wide"
    assert row[1 + DESIGNS.index(PIPELINE)] == "123k, train"  # thousands, the bound named
    assert row[1] == "1k, stage0"  # the first design, not the V100's
    assert row[1 + len(DESIGNS) :] == [f"{4.0 + i:.2f}" for i in range(len(PEERS))]


def test_the_peer_table_has_a_column_per_server_with_what_bounds_the_peer():
    head, rows = peer_rows(made_up_record())
    assert head == ["workload", SERVER, "v100-pcie3"]
    peer = PEERS.index(PRODUCTION_PEER)
    bound = f"stage{DESIGNS.index(PRODUCTION_PEER)}"
    assert rows == [["wide", f"{4.0 + peer:.2f} ({bound})", f"{14.0 + peer:.2f} (elsewhere)"]]


def test_the_markdown_says_where_its_figures_come_from():
    text = headline_markdown(made_up_record())
    assert text.count("\n| wide |") == 2 and "results/projections.json" in text and "today" not in text
    assert "`made up`, commit abc1234, today" in headline_table(made_up_record())._repr_html_().replace("&#x27;", "'")


def test_the_readme_shows_the_recorded_headline():
    record = json.loads((REPO / "results" / "projections.json").read_text())
    readme = (REPO / "README.md").read_text()
    assert headline_markdown(record) in readme


def test_the_readme_stays_a_guide():
    """What it is, the two commands, the course, the CLI, your own data, the trainers, the layout and
    where results are, in at most 300 lines: the rest lives in docs/ and the records in results/."""
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md is {len(lines)} lines"
