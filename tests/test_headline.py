"""The course's headline (scratchkit/course/headline.py): the projection record as the README's
and notebook 05's table, each design's samples/s and bound, ScratchPipe's speed over its peers."""

import json
from pathlib import Path

import pytest

from scratchkit.course.headline import (
    PIPELINE,
    SERVER,
    headline_markdown,
    headline_rows,
    headline_table,
    peer_rows,
    peer_table,
    shown_designs,
    takeaway,
)
from scratchkit.designs import BASELINE, PEERS, PRODUCTION_PEER, versus
from scratchkit.projection.project import SOCKET_SHARE

# the headline's designs, in its order: the baseline, the peers, ScratchPipe both ways, the upper bound
DESIGNS = [
    "hybrid",
    "lru-device",
    "prefetch-lru",
    "prefetch-lru-device",
    "scratchpipe",
    "scratchpipe-device",
    "gpu-only",
]
SOCKET = versus(BASELINE, SOCKET_SHARE)

REPO = Path(__file__).resolve().parents[1]


def made_up_record(socket: bool = True, workloads: int = 1) -> dict:
    """`workloads` made-up workloads ("w0", ...), the pipeline's ratios 4, 5, 6 ... over the peers
    in w0 and growing with the workload; with `socket`, the baseline priced on a whole socket too."""
    at = lambda speed, bound, **ratios: {
        SERVER: {"samples_per_s": speed, "bound_stage": bound, **ratios},
        "v100-pcie3": {"samples_per_s": 1.0, "bound_stage": "elsewhere", **{k: v + 10 for k, v in ratios.items()}},
    }

    def workload(k: int) -> dict:
        trainers = {d: at(1000.0 * (i + 1), f"stage{i}") for i, d in enumerate(DESIGNS)}
        ratios = {versus(peer): 4.0 + i + k for i, peer in enumerate(PEERS)}
        if socket:
            ratios[SOCKET] = 2.0 + k
            trainers[BASELINE][SERVER][SOCKET_SHARE] = {"samples_per_s": 5000.0, "bound_stage": "cores"}
        trainers[PIPELINE] = at(123_456.0, "train", **ratios)
        return trainers

    figures = {f"w{k}": workload(k) for k in range(workloads)}
    return {"command": "made up", "commit": "abc1234", "date": "today", "machine": "none", "figures": figures}


def test_a_column_per_workload_a_row_per_design_on_the_server_and_the_pipelines_ratios():
    record = made_up_record()
    assert shown_designs(record) == DESIGNS
    head, rows = headline_rows(record)
    assert head == ["design", "w0"]
    baseline = [f"{BASELINE}, one GPU's share", f"{BASELINE}, a whole socket"]
    over = [*baseline, *PEERS[1:]]
    assert [r[0] for r in rows] == [*baseline, *DESIGNS[1:], *(f"{PIPELINE} x {o}" for o in over)]
    speeds = dict(rows[: len(DESIGNS) + 1])
    assert speeds[PIPELINE] == "123k, train"  # thousands, the bound named
    assert speeds[baseline[0]] == "1k, stage0"  # the first design, on the server, not the V100's
    assert speeds[baseline[1]] == "5k, cores"  # and on a whole socket of it
    ratios = dict(rows[len(DESIGNS) + 1 :])
    assert ratios[f"{PIPELINE} x {baseline[1]}"] == "2.00"
    assert [ratios[f"{PIPELINE} x {peer}"] for peer in PEERS[1:]] == [f"{4.0 + i:.2f}" for i in range(1, len(PEERS))]


def test_a_record_without_the_socket_shows_the_share_it_has():
    head, rows = headline_rows(made_up_record(socket=False))
    assert f"{BASELINE}, one GPU's share" in dict(rows) and not any("socket" in r[0] for r in rows)
    assert "socket" not in takeaway(made_up_record(socket=False))


def test_the_takeaway_gives_each_ratios_range_and_where_its_ends_are():
    text = takeaway(made_up_record(workloads=3))
    assert text.startswith(
        f"On {SERVER}, across the workloads above, {PIPELINE} is projected at 4.00x (w0) to 6.00x (w2) "
    )
    assert "2.00x (w0) to 4.00x (w2) hybrid on a whole socket" in text
    assert f"6.00x (w0) to 8.00x (w2) {PRODUCTION_PEER}." in text
    assert takeaway(made_up_record()).count(" to ") == 0  # one workload: one figure each


def test_the_peer_table_has_a_column_per_server_with_what_bounds_the_peer():
    head, rows = peer_rows(made_up_record())
    assert head == ["workload", SERVER, "v100-pcie3"]
    peer = PEERS.index(PRODUCTION_PEER)
    bound = f"stage{DESIGNS.index(PRODUCTION_PEER)}"
    assert rows == [["w0", f"{4.0 + peer:.2f} ({bound})", f"{14.0 + peer:.2f} (elsewhere)"]]


def test_the_markdown_says_where_its_figures_come_from():
    text = headline_markdown(made_up_record())
    assert "| design | w0 |" in text and "results/projections.json" in text and "today" not in text
    assert text.endswith(takeaway(made_up_record()))
    assert "`made up`, commit abc1234, today" in headline_table(made_up_record())._repr_html_().replace("&#x27;", "'")


def test_the_headline_says_it_is_projected_and_which_design_is_the_papers():
    record = made_up_record()
    for text in (headline_markdown(record), headline_table(record).tables[0].caption):
        assert "projected by the cost model, not measured" in text
        assert f"{PIPELINE} is the paper's design at its best" in text
    assert "same projection, not measured" in peer_table(record).caption  # notebook 05's
    assert f"{PIPELINE} is projected at" in takeaway(record) and headline_markdown(record).endswith(takeaway(record))


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


def test_the_readme_sets_the_gpu_record_measured_beside_projected():
    """Once a GPU run is recorded (results/gpu-h200.json), the README shows it under the headline:
    each trainer's measured and projected samples/s and their ratio, read from the record."""
    from scratchkit.course.measured import measured_markdown, measured_rows, recorded as gpu_recorded

    record = gpu_recorded()
    assert record is not None and measured_markdown(record) in (REPO / "README.md").read_text()
    head, rows = measured_rows(record)
    benches = record["figures"]["benches"]
    assert len(head) == 1 + len(benches)
    for row in rows:
        for cell, trainers in zip(row[1:], benches.values()):
            if row[0] not in trainers:
                assert cell == "-"
                continue
            r = trainers[row[0]]
            ratio = r["measured_samples_per_s"] / r["projected_now"]
            assert cell.endswith(f"= {ratio:.2f}") and ratio == pytest.approx(
                r["measured_over_projected_now"], abs=1e-3
            )
