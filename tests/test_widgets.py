"""The widgets, driven from Python as a learner's clicks would: the figures' data must change."""

import re
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from scratchkit.config import DataConfig
from scratchkit.course.hazard_lab import HazardLab
from scratchkit.course.hit_curves import HitCurves
from scratchkit.sim import simulate
import scratchkit.course.pipeline_visualizer as visualizer_module
from scratchkit.course.cache_explorer import CacheExplorer
from scratchkit.course.dashboard import TrainingDashboard
from scratchkit.course.pipeline_visualizer import PipelineVisualizer, visualizer_config
from scratchkit.trainers.scratchpipe import Hazards


def trace_named(fig, name):
    (trace,) = [t for t in fig.data if t.name == name]
    return trace


@pytest.fixture(scope="module")
def explorer():
    curves = HitCurves(
        DataConfig(table_sizes=(800,), pooling=2, batch_size=16, num_batches=50), num_batches=10, points=8
    )
    return CacheExplorer(curves, policies=("lru", "static", "lookahead"), load_factor=0.05, zipf=1.0, depth=2)


def test_explorer_capacity_slider_moves_the_marker_and_the_readout(explorer):
    before = trace_named(explorer.figure, "chosen size").x
    explorer.load_factor.value = 0.25
    assert trace_named(explorer.figure, "chosen size").x == (25.0, 25.0) != before
    expected = simulate(explorer.curves.trace(1.0), "lru", 200).hit_rate
    assert "<b>200 rows</b>" in explorer.readout.value
    assert f"lru {100 * expected:.1f}%" in explorer.readout.value


def test_explorer_lines_have_y_values_so_they_are_drawn(explorer):
    """A line plotly holds with x values but no y values is never drawn: the chosen size and the
    window's line were invisible in the browser although their x moved."""
    explorer.load_factor.value = 0.1
    explorer.depth.value = 3
    for name in ("chosen size", "look-ahead window fits"):
        line = trace_named(explorer.figure, name)
        assert len(line.x) == 2 and tuple(line.y) == (0, 1), name
    explorer.depth.value = 2


def test_explorer_locality_change_shows_it_is_working_and_ends_idle(explorer):
    seen = []
    explorer.readout.observe(lambda change: seen.append(change["new"]), names="value")
    explorer.zipf.value = 0.6
    assert any("computing" in text for text in seen), seen
    assert not explorer.zipf.disabled and "computing" not in explorer.readout.value
    explorer.zipf.value = 1.0


def test_explorer_locality_slider_redraws_the_curves(explorer):
    before = np.array(trace_named(explorer.figure, "lru").y)
    explorer.zipf.value = 0.3
    after = np.array(trace_named(explorer.figure, "lru").y)
    np.testing.assert_allclose(after, explorer.curves.curve(0.3, "lru"))
    assert not np.allclose(before, after)
    explorer.zipf.value = 1.0


def test_explorer_depth_moves_the_window_line(explorer):
    explorer.depth.value = 1
    one = trace_named(explorer.figure, "look-ahead window fits").x[0]
    explorer.depth.value = 4
    four = trace_named(explorer.figure, "look-ahead window fits").x[0]
    assert four > one and four == pytest.approx(100 * explorer.curves.needed(1.0, 4) / 800)
    explorer.depth.value = 2


def test_explorer_lookahead_line_starts_where_the_window_fits(explorer):
    line = trace_named(explorer.figure, "lookahead")
    needed = explorer.curves.needed(1.0, 2)
    fits = explorer.curves.capacities >= needed
    np.testing.assert_allclose(line.x, 100 * explorer.curves.load_factors[fits])
    assert set(line.y) == {1.0}


def test_explorer_policy_picker_shows_and_hides(explorer):
    assert trace_named(explorer.figure, "opt").visible is False
    explorer.policies.value = ("lru", "opt")
    assert trace_named(explorer.figure, "opt").visible is True
    assert trace_named(explorer.figure, "static").visible is False
    np.testing.assert_allclose(trace_named(explorer.figure, "opt").y, explorer.curves.curve(1.0, "opt"))
    with pytest.raises(ValueError, match="unknown policies"):
        CacheExplorer(explorer.curves, policies=("fifo",))


@pytest.fixture(scope="module")
def visualizer():
    return PipelineVisualizer(HazardLab(visualizer_config(), steps=8, slow_write_back=0.005), columns=10)


def test_visualizer_steps_forward_and_back(visualizer):
    assert visualizer.moment.value == 0 and "Plan(0)" in visualizer.words.value
    first = trace_named(visualizer.figure, "this moment").to_plotly_json()
    visualizer.forward.click()
    assert visualizer.moment.value == 1
    assert trace_named(visualizer.figure, "this moment").to_plotly_json() != first
    m = visualizer.current
    assert m.words.split(":")[0].split(",")[0] in visualizer.words.value  # e.g. "Plan(1)"
    visualizer.back.click()
    visualizer.back.click()  # stays at 0
    assert visualizer.moment.value == 0
    assert trace_named(visualizer.figure, "this moment").to_plotly_json() == first


def test_visualizer_map_is_the_replayed_moment(visualizer):
    from scratchkit.course.viz.pipeline import map_grid

    visualizer.moment.value = len(visualizer.moments) // 2
    codes, _ = map_grid(visualizer.current, visualizer.columns)
    shown = np.array(trace_named(visualizer.figure, "slots").z, dtype=float)
    np.testing.assert_array_equal(np.nan_to_num(shown, nan=-1), np.nan_to_num(codes, nan=-1))
    assert "batch" in visualizer.stages.value and "slots now" in visualizer.words.value
    assert visualizer.moment.max == len(visualizer.moments) - 1 == visualizer.play.max


def test_visualizer_hazard_switch_reruns(visualizer):
    assert "Every invariant held" in visualizer.verdict.value
    first = visualizer.result
    visualizer.holds.value = False  # unticking reruns at once: the figure changes
    assert visualizer.result is not first and visualizer.result.hazards.holds is False
    before = visualizer.result
    visualizer.rerun.click()
    assert visualizer.result is not before and visualizer.result.hazards.holds is False
    assert len(trace_named(visualizer.figure, "stage events").x) == len(visualizer.result.events.stages)
    np.testing.assert_allclose(trace_named(visualizer.figure, "|loss - baseline loss|").y, visualizer.result.loss_gap)
    assert visualizer.verdict.value.startswith("Invariant") or "Every invariant" in visualizer.verdict.value
    visualizer.holds.value = True


@pytest.fixture
def dashboard(tiny_config):
    config = tiny_config.replace(data=replace(tiny_config.data, num_batches=5000))
    board = TrainingDashboard(
        config, steps=15, every=0.0, trainers=["hybrid", "lru", "scratchpipe"], load_factor=0.5, depth=2
    )
    yield board
    board.end()


def test_dashboard_start_fills_the_pickeds_trainer_lines(dashboard):
    dashboard.trainer.value = "lru"
    before = [len(t.x) for t in dashboard.figure.data]
    dashboard.start.click()
    dashboard.run.join(60)
    lines = [t for t in dashboard.figure.data if t.name == "lru"]
    assert [len(t.x) for t in lines] == [15, 15, 15] and before == [0] * 9
    loss = [r.loss for r in dashboard.run.records]
    np.testing.assert_allclose(lines[1].y, loss)
    assert all(len(t.x) == 0 for t in dashboard.figure.data if t.name != "lru")
    assert "finished, trainer closed" in dashboard.status.value


def test_dashboard_stop_and_restart_on_a_slider(dashboard):
    dashboard.steps = 4000
    dashboard.trainer.value = "lru"
    dashboard.start.click()
    first = dashboard.run
    dashboard.depth.value = 3  # while running: restart with the new depth
    second = dashboard.run
    assert second is not first and first.closed and not first.running
    dashboard.stop.click()  # says so at once; the trainer is closed once its step is done
    assert dashboard.figure.layout.title.text.startswith("Live: stopping lru<br>")
    second.join(30)
    assert second.closed and not second.running and second.error is None
    assert "stopped, trainer closed" in dashboard.status.value
    assert dashboard.figure.layout.title.text.startswith("Live: next, lru<br>")


def test_dashboard_stop_answers_at_once_even_while_a_chunk_is_planned(dashboard):
    """The stop button does not wait for the step in progress: right after a chunk's start, that
    step waits for ScratchPipe to plan the chunk (before: the click blocked the kernel that long)."""
    dashboard.steps = 4000
    dashboard.trainer.value = "scratchpipe"
    run = dashboard.begin()  # the first chunk is being planned: no step yet
    started = time.perf_counter()
    dashboard.stop.click()
    answered, closed_then = time.perf_counter() - started, run.closed
    assert "stopping scratchpipe" in dashboard.figure.layout.title.text and "stopping" in dashboard.status.value
    assert answered < 0.2 and not closed_then, answered  # the click did not wait for the run
    run.join(60)
    assert run.closed and "trainer closed" in dashboard.status.value


def test_dashboard_shows_a_trainers_error(dashboard):
    dashboard.load_factor.value = 0.02  # too small a scratchpad for depth 2
    dashboard.trainer.value = "scratchpipe"
    dashboard.start.click()
    dashboard.run.join(60)
    assert "stopped with an error" in dashboard.status.value and "too small" in dashboard.status.value


def test_dashboard_too_small_error_names_the_slider_not_a_flag_or_a_parameter(dashboard):
    """The learner holds a load-factor slider: the refusal says where to move it, and the load
    factor it names does train."""
    dashboard.load_factor.value = 0.02
    dashboard.trainer.value = "scratchpipe"
    dashboard.start.click()
    dashboard.run.join(60)
    status = dashboard.status.value
    assert "--capacity" not in status and "CacheParams" not in status
    found = re.search(r"move the load factor slider to ([0-9.]+) or more", status)
    assert found, status
    dashboard.load_factor.value = float(found.group(1))
    dashboard.start.click()
    dashboard.run.join(60)
    assert dashboard.run.error is None and "finished" in dashboard.status.value


def test_dashboard_settings_change_the_drawn_title_even_when_idle(dashboard):
    before = dashboard.figure.layout.title.text
    dashboard.depth.value = 4
    assert dashboard.figure.layout.title.text != before and "depth 4" in dashboard.figure.layout.title.text
    dashboard.trainer.value = "hybrid"
    assert "hybrid" in dashboard.figure.layout.title.text


def test_dashboard_start_shows_it_is_working_until_the_first_step(dashboard):
    dashboard.trainer.value = "scratchpipe"
    busy, said = [], []
    dashboard.start.observe(lambda change: busy.append(change["new"]), names="disabled")
    dashboard.status.observe(lambda change: said.append(change["new"]), names="value")
    dashboard.start.click()
    dashboard.run.join(60)
    assert busy == [True, False] and "starting" in said[0]
    assert dashboard.progress.value == 15 and not dashboard.start.disabled


def test_dashboard_stopped_run_is_made_when_the_learner_made_none(dashboard):
    run = dashboard.stopped_run(steps=5)
    # stopped at the step asked for, however fast the machine (polling for it let a fast one
    # finish all 15), and said so
    assert run.closed and not run.running and len(run.records) == 5 and run.error is None
    assert "stopped, trainer closed" in dashboard.status.value


def test_visualizer_shows_a_run_already_trained_without_training_again():
    lab = HazardLab(visualizer_config(), steps=6, slow_write_back=0.0)
    recorded = lab.run()
    calls = []
    # any training for the run shown would be seen (the runs one click away train in the background)
    lab.run = lambda *a, **k: (
        (calls.append(a) if threading.current_thread() is threading.main_thread() else None) or recorded
    )
    shown = PipelineVisualizer(lab, columns=10, result=recorded)
    assert shown.result is recorded and calls == [] and shown.progress.value == 6
    with pytest.raises(ValueError, match="switches start with every rule on"):
        PipelineVisualizer(lab, result=HazardLab(visualizer_config(), steps=4).run(Hazards(holds=False)))


def test_visualizer_gap_axis_follows_the_run(visualizer):
    """An exact run's gap axis reads 0 alone; a broken run's gap gets plotly's own axis."""
    assert list(visualizer.figure.layout.yaxis4.tickvals) == [0]
    visualizer.holds.value = False
    broken = visualizer.result.loss_gap.max() > 0
    assert (visualizer.figure.layout.yaxis4.tickvals is None) == broken
    visualizer.holds.value = True
    assert list(visualizer.figure.layout.yaxis4.tickvals) == [0]


def test_dashboard_made_without_steps_trains_until_stopped_or_the_data_ends(tiny_config):
    """As the notebook makes it: a run goes on to the end of its data (the status says how long),
    so a slider moved or stop pressed seconds after the start meets a running trainer."""
    config = tiny_config.replace(data=replace(tiny_config.data, num_batches=5000))
    board = TrainingDashboard(config, every=0.0, trainers=["hybrid"])
    try:
        board.start.click()
        deadline = time.time() + 60
        while len(board.run.records) < 30 and time.time() < deadline:
            time.sleep(0.05)
        assert board.run.running and board.progress.max == 5000
        assert "of 5,000 (stop ends it)" in board.status.value
        first = board.run
        board.load_factor.value = 0.5  # mid-run: restarts with the new setting
        assert board.run is not first and board.run.running
        board.stop.click()
        board.run.join(30)
        assert not board.run.running and "stopped, trainer closed" in board.status.value
    finally:
        board.end()


def test_visualizer_rerun_updates_the_figure_in_place_in_one_message_per_drawing(visualizer, monkeypatch):
    """A rerun draws each step's divergence, then the new run: one update message each, to the
    same traces (same uids: plotly.js would drop and re-create a trace given a new one), and the
    controls come back only after the last of them was sent (the page applies them in order)."""
    uids = [t.uid for t in visualizer.figure.data]
    sent = []
    update = visualizer.figure.plotly_update
    monkeypatch.setattr(
        visualizer.figure, "plotly_update", lambda *a, **k: (sent.append(visualizer.rerun.disabled), update(*a, **k))
    )
    visualizer.rerun.click()
    assert [t.uid for t in visualizer.figure.data] == uids
    # a run trained here draws each step as it goes; one trained ahead is drawn once
    steps_drawn = 0 if visualizer.trained_ahead else len(visualizer.result.records)
    assert len(sent) == steps_drawn + 1 and all(sent)
    assert not visualizer.rerun.disabled


def test_visualizer_switches_and_rerun_draw_runs_trained_ahead(visualizer, monkeypatch):
    """After a run is drawn, the runs one click away (each switch flipped, and a rerun of the same
    setting) train in the background; a click then draws one of them and trains nothing itself."""
    trained_here, replayed_here = [], []  # runs trained, and replayed for drawing, on the thread
    run = visualizer.lab.run  # that handles the clicks
    here = lambda done, a: done.append(a) if threading.current_thread() is threading.main_thread() else None
    monkeypatch.setattr(visualizer.lab, "run", lambda *a, **k: (here(trained_here, a), run(*a, **k))[1])
    replay = visualizer_module.replay
    monkeypatch.setattr(visualizer_module, "replay", lambda *a, **k: (here(replayed_here, a), replay(*a, **k))[1])
    for click, next_holds in (
        (lambda: setattr(visualizer.holds, "value", False), False),
        (visualizer.rerun.click, False),
        (lambda: setattr(visualizer.holds, "value", True), True),
    ):
        visualizer.ahead.wait(Hazards(holds=next_holds), timeout=120)
        before = visualizer.result
        click()
        assert visualizer.result is not before and visualizer.result.hazards == Hazards(holds=next_holds)
        assert visualizer.trained_ahead and visualizer.progress.value == visualizer.lab.steps
    assert trained_here == [] and replayed_here == []


def alive(thread_name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(thread_name)]


def test_the_visualizer_closes_what_it_starts_and_a_rerun_of_its_cell_stops_the_old_ones_runs():
    """Its runs trained ahead (RunsAhead) run on a thread of their own: a second visualizer of the
    same lab (the notebook cell run again) stops the first's, and the widget's close stops its own.
    Either way the thread ends: none survives."""
    lab = HazardLab(visualizer_config(), steps=6, slow_write_back=0.005)
    result = lab.run()
    first = PipelineVisualizer(lab, result=result)  # draws it, then trains the runs one click away
    assert alive(first.ahead.thread_name) and not first.ahead.closed
    second = PipelineVisualizer(lab, result=result)  # the cell, run again
    assert first.ahead.closed and alive(first.ahead.thread_name) == []
    assert not second.ahead.closed
    second.close()
    assert second.ahead.closed and alive(second.ahead.thread_name) == []
    first.holds.value = False  # a click on the old one still works: it trains in the caller's thread
    assert first.result.hazards == Hazards(holds=False) and not first.trained_ahead
    assert alive(first.ahead.thread_name) == []
