"""The pipeline visualizer: step event by event through a small ScratchPipe run (which batch is in
which stage, the scratchpad's slots, the step in words), and rerun it with the hazard lab's
switches: a rule switched off, its hazard seen.

An `ipywidgets.VBox`: display it by leaving it last in a cell, or drive it from Python (press a
button's `.click()`, set a switch's `.value`), as the tests do. The run is hazard_lab.py's, its
moments pipeline_replay.py's, its figure viz/pipeline.py's; this class only wires the controls to
the figure. A rerun slower than about half a second disables its controls, says it is working,
and draws what it has as it goes.
"""

from __future__ import annotations

import html
from dataclasses import replace

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go

from scratchkit.config import CacheParams, TrainConfig
from scratchkit.course.fit_width import FitWidth, live, row
from scratchkit.course.hazard_lab import HazardLab, LabResult
from scratchkit.course.pipeline_replay import STAGE_ORDER, Moment, SlotState, replay
from scratchkit.course.viz import pipeline_view, trace_named
from scratchkit.course.viz.palette import CONFLICT, FREE, INSERTED, RESIDENT, VICTIM, batch_colour
from scratchkit.course.viz.pipeline import gap_axis, map_grid
from scratchkit.profiles import get_profile
from scratchkit.trainers.scratchpipe import Hazards


def _swatch(colour: str, text: str) -> str:
    return (
        f'<span style="display:inline-block;width:0.9em;height:0.9em;background:{colour};'
        f'border:1px solid #888;vertical-align:middle;margin-right:3px"></span>{html.escape(text)}'
    )


def visualizer_config() -> TrainConfig:
    """A run small enough to read slot by slot: 2 tables, 8 samples of 2 ids, depth 2."""
    config = get_profile("tiny")
    return config.replace(
        data=replace(config.data, table_sizes=(200, 100), batch_size=8, pooling=2), cache=CacheParams(depth=2)
    )


class PipelineVisualizer(widgets.VBox):
    """Step event by event through a small ScratchPipe run; rerun it with a hazard switched on.

    Laid out to fit one screen: the step controls and the hazard switches above, the run in words,
    then one figure: the timeline across the top, the slot map and the run against the exact
    baseline side by side below it. Ticking a switch or pressing rerun shows a run with those
    switches: once a run is drawn, the runs one click away are trained in the background (`ahead`),
    so a click only draws one; a click that comes before its run is trained waits for it, or
    trains it (about 1 s) with a bar counting its steps and the bottom-right plot filling in. The
    controls are disabled until the new run is drawn. The bar turns green when the runs one
    click away are trained.
    """

    def __init__(
        self, lab: HazardLab | None = None, table: int = 0, columns: int = 12, result: LabResult | None = None
    ):
        """`result`: a run of `lab` already trained (with every rule on) to show first, instead
        of training one now (about 2 s)."""
        self.lab = lab or HazardLab(visualizer_config(), steps=12)
        self.ahead = self.lab.ahead(prepare=self._drawing, pause=1.0)  # closes the lab's widget before's
        self.trained_ahead = False  # whether the run shown was trained before it was asked for
        self._runs_asked = 0
        self.table, self.columns = table, columns
        self.holds = widgets.Checkbox(
            value=True, description="holds (invariant 4)", indent=False, layout=widgets.Layout(width="170px")
        )
        self.write_back_order = widgets.Checkbox(
            value=True,
            description="write-back before collect (invariant 3)",
            indent=False,
            layout=widgets.Layout(width="300px"),
        )
        self.rerun = widgets.Button(
            description="rerun", icon="refresh", tooltip="train the run again", layout=widgets.Layout(width="110px")
        )
        self.progress = widgets.IntProgress(value=0, min=0, max=self.lab.steps, layout=widgets.Layout(width="160px"))
        self.back = widgets.Button(
            description="step back", icon="step-backward", tooltip="step back", layout=widgets.Layout(width="110px")
        )
        self.forward = widgets.Button(
            description="step", icon="step-forward", tooltip="step forward", layout=widgets.Layout(width="90px")
        )
        self.moment = widgets.IntSlider(
            value=0,
            min=0,
            max=1,
            description="moment",
            style={"description_width": "60px"},
            layout=widgets.Layout(width="400px"),  # within a 540 px window's 424 px output
        )
        self.play = widgets.Play(value=0, min=0, max=1, interval=600, description="play")
        widgets.link((self.play, "value"), (self.moment, "value"))
        self.stages = widgets.HTML()
        self.words = widgets.HTML()
        self.verdict = widgets.HTML()
        self.back.on_click(lambda _: self._move(-1))
        self.forward.on_click(lambda _: self._move(+1))
        self.rerun.on_click(lambda _: self.run())
        for switch in (self.holds, self.write_back_order):
            switch.observe(lambda _: self.run(), names="value")
        self.moment.observe(lambda _: self.show(), names="value")
        self.figure: go.FigureWidget | None = None
        self.result: LabResult | None = None
        self.moments: list[Moment] = []
        if result is not None and result.hazards != Hazards():
            raise ValueError(f"result was trained with {result.hazards}; the switches start with every rule on")
        self.run(result)
        super().__init__(
            [
                row(self.back, self.forward, self.play, self.moment),
                row(
                    widgets.HTML('<b style="white-space:nowrap">Hazard lab:</b>', layout=widgets.Layout(width="100px")),
                    self.holds,
                    self.write_back_order,
                    self.rerun,
                    self.progress,
                ),
                self.stages,
                self.words,
                self.figure,
                FitWidth(),
                self.verdict,
            ]
        )

    @property
    def current(self) -> Moment:
        return self.moments[self.moment.value]

    def _move(self, by: int) -> None:
        self.moment.value = int(np.clip(self.moment.value + by, 0, len(self.moments) - 1))

    def run(self, result: LabResult | None = None) -> LabResult:
        """(Re)train the small run with the switches as set (or take `result`), and show its first moment."""
        hazards = Hazards(holds=self.holds.value, write_back_order=self.write_back_order.value)
        busy = (self.rerun, self.holds, self.write_back_order)
        self._runs_asked += 1
        self.progress.bar_style = ""
        for control in busy:
            control.disabled = True
        # "training..." only once a step is trained here (_partial): a run trained ahead is only drawn
        self.rerun.description, self.progress.value = "working...", 0
        try:
            if result is None:
                result, drawing, self.trained_ahead = self.ahead.take(hazards, on_step=self._partial)
            else:
                drawing = self._drawing(result)
            self.result = result
            self.rerun.description = "drawing..."
            self._draw_run(*drawing)
        finally:
            # only now: the page applies the kernel's messages in order, so the controls stay busy
            # until the figure update above has reached the page (plotly draws it in the next frames)
            for control in busy:
                control.disabled = False
            self.rerun.description = "rerun"
            self.progress.value = len(self.result.records) if self.result else 0
        # the runs one click away: each switch flipped, then a rerun of this setting; the bar
        # turns green once they are trained (a click then only draws)
        asked = self._runs_asked
        self.ahead.expect(
            replace(hazards, holds=not hazards.holds),
            replace(hazards, write_back_order=not hazards.write_back_order),
            hazards,
            then=lambda: self._ready(asked),
        )
        return self.result

    def _ready(self, asked: int) -> None:
        if asked == self._runs_asked:  # no other run asked for since
            self.progress.bar_style = "success"

    def _drawing(self, result: LabResult) -> tuple[list[Moment], go.Figure]:
        """A run's moments and its figure: made ahead with the run (RunsAhead), so that a click
        only sends the figure's new data."""
        moments = replay(result.events, self.table, result.capacities[self.table])
        divergence = (np.array([r.step for r in result.records]), result.train_hit_rate, result.loss_gap)
        return moments, pipeline_view(result.events, moments[0], self.columns, divergence)

    def _draw_run(self, moments: list[Moment], fresh: go.Figure) -> None:
        """The new run's events, slot map and divergence (`_drawing`), and its first moment, in one
        update of the figure in place (a second would draw the page twice)."""
        self.moments = moments
        first = self.figure is None
        if first:
            self.figure = live(fresh)
        with self.figure.batch_update():
            if not first:  # the data only: a trace given a new uid is dropped and drawn anew
                for old, new in zip(self.figure.data, fresh.data):
                    old.update({k: v for k, v in new.to_plotly_json().items() if k not in ("uid", "type")})
                self._gap_axis(self.result.loss_gap)
            self.moment.max = self.play.max = len(self.moments) - 1
            if self.moment.value == 0:
                self.show()
            else:
                self.moment.value = 0  # shows it (the slider's observer)
        self.verdict.value = "<br>".join(html.escape(line) for line in self.result.verdict())

    def _partial(self, records) -> None:
        """After each step of a rerun: the progress bar, and the run so far against the baseline."""
        self.progress.value, self.rerun.description = len(records), "training..."
        if self.figure is None:
            return
        losses = self.lab.baseline()[0][: len(records)]
        steps = [r.step for r in records]
        with self.figure.batch_update():
            hit = trace_named(self.figure, "Train hit rate")
            hit.x, hit.y = steps, [r.hits / r.lookups if r.lookups else 1.0 for r in records]
            gap = trace_named(self.figure, "|loss - baseline loss|")
            gap.x, gap.y = steps, np.abs(np.array([r.loss for r in records]) - losses)
            self._gap_axis(gap.y)

    def _gap_axis(self, loss_gap) -> None:
        self.figure.update_yaxes(row=2, col=2, secondary_y=True, **gap_axis(loss_gap))

    def close(self) -> None:
        """Close the widget and stop what it started: the runs trained ahead, and their thread."""
        self.ahead.close()
        super().close()

    def show(self) -> None:
        """Draw the current moment: the highlighted event, the slot map, and the words."""
        m = self.current
        codes, text = map_grid(m, self.columns)
        ms = lambda t: 1000.0 * (t - min(e.start for e in self.result.events.stages))
        label = m.event.stage.value.replace("_", "-")
        with self.figure.batch_update():
            now = trace_named(self.figure, "this moment")
            now.x, now.y = [(ms(m.event.start) + ms(m.event.end)) / 2], [label]
            trace_named(self.figure, "now").x = [ms(m.time)] * 2
            slots = trace_named(self.figure, "slots")
            slots.z, slots.customdata = codes, text
            trace_named(self.figure, "batch now").x = [m.event.batch] * 2
            self.figure.layout.title.text = f"moment {m.index}: {label}({m.event.batch}), table {self.table}"
        chips = []
        for stage in STAGE_ORDER:
            if stage in m.stage_batches:
                b, running = m.stage_batches[stage]
                state = "running" if running else "done"
                chips.append(_swatch(batch_colour(b), f"{stage.value}: batch {b} ({state})"))
        self.stages.value = " &nbsp; ".join(chips)
        counts = [
            (FREE, "free", SlotState.FREE),
            (RESIDENT, "resident", SlotState.RESIDENT),
            (batch_colour(m.event.batch), "held", SlotState.HELD),
            (VICTIM, "victim", SlotState.VICTIM),
            (INSERTED, "just inserted", SlotState.INSERTED),
            (CONFLICT, "hazard", SlotState.CONFLICT),
        ]
        self.words.value = f"<b>{html.escape(m.words)}</b><br>slots now: " + " &nbsp; ".join(
            _swatch(c, f"{m.count(s)} {n}") for c, n, s in counts
        )
