"""What a learner sees, checked without a browser: every stage in a legend with a colour of its own
and room to show it, value labels that stand apart, tables that fit a 1,000-px notebook, and each
widget's figure short enough to share one screen with its controls (tests/test_browser.py measures
the drawn page)."""

from __future__ import annotations

import re

import pytest

from scratchkit.measure.report import bench_table
from scratchkit.course.viz import stage_breakdown, trainer_comparison
from scratchkit.course.viz.palette import stage_colour
from scratchkit.measure.bench import BenchResult

EVERY_STAGE = [
    "data",
    "embedding_forward",
    "transfer",
    "mlp",
    "embedding_backward",
    "update",
    "fetch",
    "write_back",
    "plan",
    "collect",
    "insert",
    "train",
]
LEGEND_ROW = 20  # px per legend entry at plotly's default font (and the legend's title: 2 rows)
MARGINS = 180  # plotly's default top + bottom margins, and the title


def test_every_stage_has_a_colour_of_its_own():
    colours = [stage_colour(s) for s in EVERY_STAGE]
    assert len(set(colours)) == len(EVERY_STAGE)
    assert stage_colour("transfer") == stage_colour("transfer")  # the same in every figure


@pytest.mark.parametrize("trainers", [1, 2, 6])
def test_a_stage_breakdown_shows_every_stage_in_its_legend(trainers):
    table = {f"trainer {t}": {s: 0.001 for s in EVERY_STAGE} for t in range(trainers)}
    fig = stage_breakdown(table)
    assert [t.name for t in fig.data] == EVERY_STAGE
    assert len({t.marker.color for t in fig.data}) == len(EVERY_STAGE)
    assert all(t.showlegend is not False for t in fig.data)
    assert fig.layout.height >= MARGINS + LEGEND_ROW * (len(EVERY_STAGE) + 2), "the legend would scroll"


def test_the_two_trainer_breakdown_of_notebook_01_has_room_for_its_six_stages():
    six = ["data", "embedding_forward", "transfer", "mlp", "embedding_backward", "update"]
    fig = stage_breakdown({"hybrid": dict.fromkeys(six, 0.001), "gpu-only": dict.fromkeys(six, 0.001)}, share=True)
    assert fig.layout.height >= MARGINS + LEGEND_ROW * (6 + 2)


def test_value_labels_of_grouped_bars_stand_upright_so_they_cannot_overlap():
    measured = {t: 100.0 for t in ("gpu-only", "hybrid", "static", "lru", "lfu", "scratchpipe")}
    fig = trainer_comparison(
        measured, {p: measured for p in ("this-cpu", "v100-pcie3", "h100-pcie5")}, relative_to="hybrid"
    )
    assert all(t.textangle == -90 for t in fig.data)


def results(trainers=6, stages=EVERY_STAGE):
    return [BenchResult(f"trainer-{i}", 30, 1000.0, 1.0, dict.fromkeys(stages, 0.001), 0.5) for i in range(trainers)]


def test_the_bench_table_has_a_column_per_trainer_and_fits_a_notebook():
    html = bench_table(results())._repr_html_()
    head = re.search(r"<thead>(.*?)</thead>", html).group(1)
    assert head.count("<th") == 1 + 6  # a label column, then one per trainer
    # samples/s, ratio, hit rate, ms/step, setup s, warm-up s; then the stage table: its head, a row per stage
    assert html.count("<tr>") == 1 + 6 + 1 + len(EVERY_STAGE)
    assert "max-width:1000px" in html and "white-space:nowrap" in html


def test_every_trainer_the_kit_has_is_split_into_tables_of_six_columns_at_most():
    from scratchkit import available_trainers

    trainers = len(available_trainers())
    html = bench_table(results(trainers))._repr_html_()
    heads = re.findall(r"<thead>(.*?)</thead>", html)
    columns = [head.count("<th") - 1 for head in heads]
    assert max(columns) <= 6 and max(columns) - min(columns) <= 1, columns  # as even as they split
    assert sum(columns) == 2 * trainers  # every trainer once among the figures, once among the stages
    assert all(f"trainer-{i}<" in html for i in range(trainers))


def test_the_bench_tables_projections_give_each_trainer_over_hybrid_and_the_production_peer():
    from scratchkit.projection.project import Projection

    named = [BenchResult(t, 30, 1000.0, 1.0, {}, None) for t in ("gpu-only", "hybrid", "prefetch-lru-device")]
    speeds = {"gpu-only": 800.0, "hybrid": 200.0, "prefetch-lru-device": 400.0}
    projections = [{"h100-pcie5": Projection(t, "h100-pcie5", {}, 1.0, s, "mlp", False)} for t, s in speeds.items()]
    html = bench_table(named, projections)._repr_html_()
    cells = lambda label: re.findall(r"<td[^>]*>([^<]*)</td>", html.split(label, 1)[1].split("</tr>", 1)[0])
    assert cells("h100-pcie5 x hybrid") == ["4.00", "1.00", "2.00"]
    assert cells("h100-pcie5 x prefetch-lru-device") == ["2.00", "0.50", "1.00"]
