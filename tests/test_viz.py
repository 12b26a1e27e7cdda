"""Figure builders: the figure's data is the input's, and bad input is refused with a clear error."""

import numpy as np
import plotly.graph_objects as go
import pytest

from scratchkit.course.analysis import WindowSizes
from scratchkit.measure.bench import BenchResult
from scratchkit.scratchpipe.events import EventLog
from scratchkit.course.pipeline_replay import SlotState, replay
from scratchkit.trainers.base import StepRecord
from scratchkit.course.viz import (
    amdahl_figure,
    hit_rate_curves,
    pipeline_view,
    reuse_figure,
    scratchpad_map,
    skew_cdf,
    stage_breakdown,
    timeline,
    trainer_comparison,
    training_curves,
    window_figure,
)
from scratchkit.course.viz.pipeline import map_grid
from scratchkit.course.viz.palette import BATCH_COLOURS, CONFLICT, INSERTED, VICTIM
from scratchkit.course.viz.timing import training_series
from toy_pipeline import toy_log


def by_name(fig, name):
    (trace,) = [t for t in fig.data if t.name == name]
    return trace


def test_stage_breakdown_from_a_mapping_and_from_bench_results():
    fig = stage_breakdown({"hybrid": {"embedding_forward": 0.003, "mlp": 0.001}, "gpu-only": {"mlp": 0.002}})
    assert isinstance(fig, go.Figure)
    np.testing.assert_allclose(by_name(fig, "embedding_forward").x, [3.0, 0.0])  # ms
    np.testing.assert_allclose(by_name(fig, "mlp").x, [1.0, 2.0])
    share = stage_breakdown({"hybrid": {"a": 0.003, "b": 0.001}}, share=True)
    np.testing.assert_allclose([by_name(share, "a").x[0], by_name(share, "b").x[0]], [75.0, 25.0])
    results = [BenchResult("lru", 10, 100.0, 1.0, {"fetch": 0.5})]
    assert by_name(stage_breakdown(results), "fetch").x[0] == pytest.approx(500.0)
    with pytest.raises(ValueError, match="at least one"):
        stage_breakdown({})
    with pytest.raises(ValueError, match="hybrid: stage 'mlp'"):
        stage_breakdown({"hybrid": {"mlp": -1.0}})


def records(n, hits=True):
    return [
        StepRecord(
            step=i,
            loss=1.0 / (i + 1),
            samples=100,
            seconds=0.1 * (1 + i % 2),
            lookups=10,
            hits=(i % 11) if hits else None,
        )
        for i in range(n)
    ]


def test_training_series_is_a_rolling_rate():
    series = training_series(records(4), window=2)
    # seconds 0.1, 0.2, 0.1, 0.2: samples/s over the last two steps
    np.testing.assert_allclose(series["samples_per_s"], [1000, 200 / 0.3, 200 / 0.3, 200 / 0.3])
    np.testing.assert_allclose(series["hit_rate"], [0, 0.1, 0.2, 0.3])
    assert np.isnan(training_series(records(2, hits=False))["hit_rate"]).all()
    with pytest.raises(ValueError, match="window"):
        training_series(records(2), window=0)


def test_training_curves_has_three_rows_per_trainer():
    fig = training_curves({"hybrid": records(5)}, trainers=["lru"])
    assert len(fig.data) == 6 and [t.name for t in fig.data] == ["hybrid"] * 3 + ["lru"] * 3
    np.testing.assert_allclose(fig.data[1].y, [1, 1 / 2, 1 / 3, 1 / 4, 1 / 5])  # loss
    assert len(fig.data[3].x) == 0
    with pytest.raises(ValueError, match="at least one"):
        training_curves()


def test_trainer_comparison():
    fig = trainer_comparison(
        {"hybrid": 100.0, "scratchpipe": 300.0},
        {"h100": {"hybrid": 1000.0, "scratchpipe": 5000.0}},
        relative_to="hybrid",
    )
    np.testing.assert_allclose(by_name(fig, "measured here").y, [1, 3])
    np.testing.assert_allclose(by_name(fig, "projected: h100").y, [1, 5])
    with pytest.raises(ValueError, match="no value for 'gpu-only'"):
        trainer_comparison({"hybrid": 1.0}, relative_to="gpu-only")


def test_cache_figures():
    fig = skew_cdf({"skewed": np.array([1, 1, 1, 2])})
    np.testing.assert_allclose(fig.data[0].y, [75, 100])
    fig = hit_rate_curves([10, 20], {"lru": [0.5, 0.7]}, marker=15, needed=20)
    assert by_name(fig, "chosen size").x == (15, 15) and by_name(fig, "look-ahead window fits").x == (20, 20)
    gaps = hit_rate_curves([10, 20, 30], {"lookahead": [np.nan, 1.0, 1.0]})
    assert list(gaps.data[0].x) == [20, 30] and list(gaps.data[0].y) == [1.0, 1.0]  # not at 10: left out
    with pytest.raises(ValueError, match="2 hit rates for 3 capacities"):
        hit_rate_curves([1, 2, 3], {"lru": [0.1, 0.2]})
    fig = reuse_figure(np.array([0.5, 0.25]))
    np.testing.assert_allclose(fig.data[0].y, [50, 25])
    sizes = WindowSizes(np.array([0, 1]), np.array([5.0, 8.0]), np.array([6, 9]), np.array([10, 20]))
    np.testing.assert_allclose(window_figure(sizes).data[0].y, [6, 9])
    assert len(amdahl_figure((2, 10)).data) == 3


def toy_moments(holds=True):
    rng = np.random.default_rng(3)
    batches = [rng.integers(0, 25, 8) for _ in range(6)]
    log, _, _ = toy_log(batches, capacity=20 if holds else 9, depth=1, holds=holds)
    return log, replay(log, capacity=20 if holds else 9)


def test_timeline_bars_are_the_events():
    log, moments = toy_moments()
    fig = timeline(log, moments[3])
    bars = by_name(fig, "stage events")
    assert len(bars.x) == len(log.stages)
    events = sorted(log.stages, key=lambda e: e.start)
    np.testing.assert_allclose(bars.base, [1000 * e.start for e in events])
    np.testing.assert_allclose(bars.x, [1000 * (e.end - e.start) for e in events])
    assert list(bars.text) == [str(e.batch) for e in events]
    # the same batch has the same colour on every row
    colours = {}
    for e, c in zip(events, bars.marker.color):
        assert colours.setdefault(e.batch, c) == c
    e = moments[3].event
    assert by_name(fig, "this moment").x == (1000 * (e.start + e.end) / 2,)
    assert by_name(fig, "this moment").y == (e.stage.value.replace("_", "-"),)
    with pytest.raises(ValueError, match="no stage events"):
        timeline(EventLog())


def test_scratchpad_map_grid_follows_the_states():
    log, moments = toy_moments()
    m = next(m for m in moments if m.count(SlotState.VICTIM))
    codes, text = map_grid(m, columns=6)
    assert codes.shape == (4, 6) and np.isnan(codes.ravel()[20:]).all()  # 20 slots, 4 rows of 6
    victims = np.flatnonzero(m.states == SlotState.VICTIM)
    assert len(set(codes.ravel()[victims])) == 1
    assert all("victim" in text.ravel()[v] for v in victims)
    held = np.flatnonzero(m.states == SlotState.HELD)
    # held slots take their holder's colour code: two slots of one holder share a code
    for a in held:
        for b in held:
            if m.holders[a] == m.holders[b]:
                assert codes.ravel()[a] == codes.ravel()[b]
    fig = scratchpad_map(m, columns=6)
    np.testing.assert_array_equal(
        np.nan_to_num(np.array(fig.data[0].z, dtype=float), nan=-1), np.nan_to_num(codes, nan=-1)
    )
    with pytest.raises(ValueError, match="columns"):
        map_grid(m, columns=0)


def test_pipeline_view_names_its_traces_and_shows_hazards():
    log, moments = toy_moments(holds=False)
    hazard = next(m for m in moments if m.count(SlotState.CONFLICT))
    fig = pipeline_view(log, hazard, columns=3, divergence=([0, 1], [1.0, 0.5], [0.0, 0.1]))
    for name in (
        "stage events",
        "this moment",
        "now",
        "slots",
        "Train hit rate",
        "|loss - baseline loss|",
        "batch now",
    ):
        by_name(fig, name)
    assert by_name(fig, "batch now").x == (hazard.event.batch,) * 2
    codes = np.array(by_name(fig, "slots").z, dtype=float).ravel()
    conflict = np.flatnonzero(hazard.states == SlotState.CONFLICT)
    assert len(set(codes[conflict])) == 1 and codes[conflict[0]] not in codes[hazard.states != SlotState.CONFLICT]


def test_the_loss_gap_axis_of_an_exact_run_reads_zero_and_its_colour_is_not_the_victims():
    """A run that matches its baseline has a gap of 0 at every step: its axis says 0 and nothing
    else (not ticks up to 0.95 over bars of height 0); a run that drifts gets the axis it needs.
    The gap's bars are not drawn in the slot map's victim red."""
    log, moments = toy_moments(holds=True)
    exact = pipeline_view(log, moments[0], columns=3, divergence=([0, 1, 2], [1.0, 0.9, 0.8], [0.0, 0.0, 0.0]))
    gap_axis = exact.layout.yaxis4
    assert gap_axis.title.text == "|loss gap|"
    assert list(gap_axis.tickvals) == [0] and list(gap_axis.range) == [0, 1]
    drifting = pipeline_view(log, moments[0], columns=3, divergence=([0, 1, 2], [1.0, 0.9, 0.8], [0.0, 0.2, 0.4]))
    assert drifting.layout.yaxis4.tickvals is None and drifting.layout.yaxis4.range is None
    assert by_name(exact, "|loss - baseline loss|").marker.color not in (VICTIM, INSERTED, CONFLICT, BATCH_COLOURS[0])
