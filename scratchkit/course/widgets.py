"""The course's interactive widgets; with dashboard.py, the only modules of the kit that import ipywidgets.

    CacheExplorer        sliders for cache size, locality and look-ahead depth, a policy picker:
                         hit rate vs cache size, redrawn in a fraction of a second
    PipelineVisualizer   step through a small ScratchPipe run event by event: which batch is in
                         which stage, the scratchpad's slots, the step in words; hazard-lab switches
    TrainingDashboard    start/stop training in a background thread; one live figure of samples/s,
                         loss and hit rate per trainer (scratchkit/course/dashboard.py)

Each is an `ipywidgets.VBox`: display it by leaving it last in a cell. Everything can be driven
from Python too (set a slider's `.value`, call a button's `.click()`), which is how the tests
drive them. The logic lives in the package (hit_curves, pipeline_replay, hazard_lab, live); these
classes only wire controls to figures. Every control changes the drawn figure; an action slower
than about half a second (a new locality's curves, a rerun of the visualizer's run, a trainer's
start) disables its control and says it is working, and draws what it has as it goes.
"""
from __future__ import annotations

import html
from dataclasses import replace

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go

from scratchkit.config import CacheParams, TrainConfig
from scratchkit.course.dashboard import LABEL, WIDE, TrainingDashboard
from scratchkit.course.hazard_lab import HazardLab, LabResult, RunsAhead
from scratchkit.course.hit_curves import POLICIES, HitCurves
from scratchkit.course.pipeline_replay import STAGE_ORDER, Moment, SlotState, replay
from scratchkit.profiles import get_profile
from scratchkit.trainers.scratchpipe import Hazards
from scratchkit.course.viz import hit_rate_curves, pipeline_view
from scratchkit.course.viz.palette import CONFLICT, FREE, INSERTED, RESIDENT, VICTIM, batch_colour
from scratchkit.course.viz.pipeline import gap_axis, map_grid

__all__ = ["CacheExplorer", "PipelineVisualizer", "TrainingDashboard", "visualizer_config"]
# cheapest first, so a new locality shows its fast curves at once (opt ~15 ms, lfu ~0.5 s on small)
DRAW_ORDER = ("lookahead", "lru", "static", "opt", "lfu")


def _trace(fig: go.FigureWidget, name: str):
    """The figure's one trace called `name`."""
    found = [t for t in fig.data if t.name == name]
    if len(found) != 1:
        raise KeyError(f"the figure has {len(found)} traces named {name!r}")
    return found[0]


def _swatch(colour: str, text: str) -> str:
    return (f'<span style="display:inline-block;width:0.9em;height:0.9em;background:{colour};'
            f'border:1px solid #888;vertical-align:middle;margin-right:3px"></span>{html.escape(text)}')


# --- cache explorer ------------------------------------------------------------------------------
class CacheExplorer(widgets.VBox):
    """Hit rate vs cache size for several policies; sliders for load factor, Zipf exponent, depth."""

    def __init__(self, curves: HitCurves | None = None, policies=("static", "lru", "lfu", "lookahead"),
                 load_factor: float = 0.05, zipf: float = 1.05, depth: int = 2):
        self.curves = curves or HitCurves(get_profile("small").data)
        unknown = [p for p in policies if p not in POLICIES]
        if unknown:
            raise ValueError(f"unknown policies {unknown}; choose from {', '.join(POLICIES)}")
        self.load_factor = widgets.FloatSlider(value=load_factor, min=0.005, max=0.5, step=0.005,
                                               readout_format=".3f", description="load factor",
                                               style=LABEL, layout=WIDE)
        self.zipf = widgets.FloatSlider(value=zipf, min=0.0, max=1.4, step=0.05, description="locality (zipf)",
                                        continuous_update=False, style=LABEL, layout=WIDE)
        self.depth = widgets.IntSlider(value=depth, min=1, max=8, description="look-ahead depth",
                                       style=LABEL, layout=WIDE)
        self.policies = widgets.SelectMultiple(options=POLICIES, value=tuple(policies), rows=len(POLICIES),
                                               description="policies", style=LABEL)
        self.readout = widgets.HTML()
        x = 100 * self.curves.load_factors
        empty = {p: np.full(x.shape, np.nan) for p in POLICIES}
        # the two vertical lines get their y (0 to 1) now: a line with x values only is never drawn
        self.figure = go.FigureWidget(hit_rate_curves(x, empty, marker=0.0, needed=0.0,
                                                      x_title="load factor (% of the table's rows)",
                                                      title="Hit rate vs cache size"))
        for name, slot in ((self.load_factor, self._on_size), (self.depth, self._on_size),
                           (self.zipf, self._on_curves), (self.policies, self._on_curves)):
            name.observe(slot, names="value")
        super().__init__([widgets.HBox([widgets.VBox([self.load_factor, self.zipf, self.depth]), self.policies]),
                          self.readout, self.figure])
        self._on_curves()

    @property
    def capacity(self) -> int:
        return max(1, min(self.curves.num_rows, int(round(self.load_factor.value * self.curves.num_rows))))

    def _on_curves(self, change=None) -> None:
        """A new locality or policy choice: each curve drawn as soon as it is computed, cheapest
        first, with the controls that would start another computation disabled meanwhile."""
        zipf, depth = self.zipf.value, self.depth.value
        slow = not self.curves.has_trace(zipf) or any(
            (round(zipf, 6), p) not in self.curves.computed() for p in self.policies.value if p in ("lfu", "opt"))
        if slow:
            self.zipf.disabled = self.policies.disabled = True
            self.readout.value = f"<i>computing the curves for locality {zipf:.2f} (about a second the first time) ...</i>"
        try:
            for policy in POLICIES:
                if policy not in self.policies.value:
                    _trace(self.figure, policy).visible = False
            for policy in (p for p in DRAW_ORDER if p in self.policies.value):
                with self.figure.batch_update():
                    _trace(self.figure, policy).visible = True
                    self._draw_curve(policy, zipf, depth)
            for d in range(self.depth.min, self.depth.max + 1):
                self.curves.needed(zipf, d)        # the depth slider then only reads a number
        finally:
            self.zipf.disabled = self.policies.disabled = False
        self._on_size()

    def _draw_curve(self, policy: str, zipf: float, depth: int) -> None:
        rates = self.curves.curve(zipf, policy, depth)
        runs = ~np.isnan(rates)            # NaN: cannot run at that size; leave the point out
        trace = _trace(self.figure, policy)
        trace.x, trace.y = 100 * self.curves.load_factors[runs], rates[runs]

    def _on_size(self, change=None) -> None:
        zipf, depth, capacity = self.zipf.value, self.depth.value, self.capacity
        needed = self.curves.needed(zipf, depth)
        x_needed = 100 * needed / self.curves.num_rows
        with self.figure.batch_update():
            chosen = _trace(self.figure, "chosen size")
            chosen.x, chosen.y = [100 * capacity / self.curves.num_rows] * 2, [0, 1]
            window = _trace(self.figure, "look-ahead window fits")
            window.x, window.y = [x_needed] * 2, [0, 1]
            if "lookahead" in self.policies.value:
                self._draw_curve("lookahead", zipf, depth)
        rates = []
        for policy in self.policies.value:
            rate = self.curves.hit_rate(zipf, policy, capacity, depth)
            rates.append(f"{policy} {'cannot run' if np.isnan(rate) else f'{100 * rate:.1f}%'}")
        fits = ("it fits: every lookup hits" if capacity >= needed
                else "too small for look-forward caching at this depth")
        self.readout.value = (f"<b>{capacity:,} rows</b> of {self.curves.num_rows:,} "
                              f"(load factor {self.load_factor.value:.3f}). Hit rates: {', '.join(rates) or '-'}.<br>"
                              f"The {depth + 1} batches in flight at depth {depth} touch up to "
                              f"<b>{needed:,}</b> distinct rows: {fits}.")


# --- pipeline visualizer -------------------------------------------------------------------------
def visualizer_config() -> TrainConfig:
    """A run small enough to read slot by slot: 2 tables, 8 samples of 2 ids, depth 2."""
    config = get_profile("tiny")
    return config.replace(data=replace(config.data, table_sizes=(200, 100), batch_size=8, pooling=2),
                          cache=CacheParams(depth=2))


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

    def __init__(self, lab: HazardLab | None = None, table: int = 0, columns: int = 12,
                 result: LabResult | None = None):
        """`result`: a run of `lab` already trained (with every rule on) to show first, instead
        of training one now (about 2 s)."""
        self.lab = lab or HazardLab(visualizer_config(), steps=12)
        self.ahead = RunsAhead(self.lab, prepare=self._drawing, pause=1.0)
        self.trained_ahead = False       # whether the run shown was trained before it was asked for
        self._runs_asked = 0
        self.table, self.columns = table, columns
        self.holds = widgets.Checkbox(value=True, description="holds (invariant 4)", indent=False,
                                      layout=widgets.Layout(width="170px"))
        self.write_back_order = widgets.Checkbox(value=True, description="write-back before collect (invariant 3)",
                                                 indent=False, layout=widgets.Layout(width="300px"))
        self.rerun = widgets.Button(description="rerun", icon="refresh", tooltip="train the run again",
                                    layout=widgets.Layout(width="110px"))
        self.progress = widgets.IntProgress(value=0, min=0, max=self.lab.steps, layout=widgets.Layout(width="160px"))
        self.back = widgets.Button(description="step back", icon="step-backward", tooltip="step back",
                                   layout=widgets.Layout(width="110px"))
        self.forward = widgets.Button(description="step", icon="step-forward", tooltip="step forward",
                                      layout=widgets.Layout(width="90px"))
        self.moment = widgets.IntSlider(value=0, min=0, max=1, description="moment",
                                        style={"description_width": "60px"}, layout=widgets.Layout(width="430px"))
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
        super().__init__([widgets.HBox([self.back, self.forward, self.play, self.moment]),
                          widgets.HBox([widgets.HTML('<b style="white-space:nowrap">Hazard lab:</b>', layout=widgets.Layout(width="100px")),
                                        self.holds, self.write_back_order, self.rerun, self.progress]),
                          self.stages, self.words, self.figure, self.verdict])

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
            # until the figure update above has been drawn
            for control in busy:
                control.disabled = False
            self.rerun.description = "rerun"
            self.progress.value = len(self.result.records) if self.result else 0
        # the runs one click away: each switch flipped, then a rerun of this setting; the bar
        # turns green once they are trained (a click then only draws)
        asked = self._runs_asked
        self.ahead.expect(replace(hazards, holds=not hazards.holds),
                          replace(hazards, write_back_order=not hazards.write_back_order), hazards,
                          then=lambda: self._ready(asked))
        return self.result

    def _ready(self, asked: int) -> None:
        if asked == self._runs_asked:       # no other run asked for since
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
            self.figure = go.FigureWidget(fresh)
        with self.figure.batch_update():
            if not first:    # the data only: a trace given a new uid is dropped and drawn anew
                for old, new in zip(self.figure.data, fresh.data):
                    old.update({k: v for k, v in new.to_plotly_json().items() if k not in ("uid", "type")})
                self._gap_axis(self.result.loss_gap)
            self.moment.max = self.play.max = len(self.moments) - 1
            if self.moment.value == 0:
                self.show()
            else:
                self.moment.value = 0          # shows it (the slider's observer)
        self.verdict.value = "<br>".join(html.escape(line) for line in self.result.verdict())

    def _partial(self, records) -> None:
        """After each step of a rerun: the progress bar, and the run so far against the baseline."""
        self.progress.value, self.rerun.description = len(records), "training..."
        if self.figure is None:
            return
        losses = self.lab.baseline()[0][:len(records)]
        steps = [r.step for r in records]
        with self.figure.batch_update():
            hit = _trace(self.figure, "Train hit rate")
            hit.x, hit.y = steps, [r.hits / r.lookups if r.lookups else 1.0 for r in records]
            gap = _trace(self.figure, "|loss - baseline loss|")
            gap.x, gap.y = steps, np.abs(np.array([r.loss for r in records]) - losses)
            self._gap_axis(gap.y)

    def _gap_axis(self, loss_gap) -> None:
        self.figure.update_yaxes(row=2, col=2, secondary_y=True, **gap_axis(loss_gap))

    def show(self) -> None:
        """Draw the current moment: the highlighted event, the slot map, and the words."""
        m = self.current
        codes, text = map_grid(m, self.columns)
        ms = lambda t: 1000.0 * (t - min(e.start for e in self.result.events.stages))
        label = m.event.stage.value.replace("_", "-")
        with self.figure.batch_update():
            now = _trace(self.figure, "this moment")
            now.x, now.y = [(ms(m.event.start) + ms(m.event.end)) / 2], [label]
            _trace(self.figure, "now").x = [ms(m.time)] * 2
            slots = _trace(self.figure, "slots")
            slots.z, slots.customdata = codes, text
            _trace(self.figure, "batch now").x = [m.event.batch] * 2
            self.figure.layout.title.text = f"moment {m.index}: {label}({m.event.batch}), table {self.table}"
        chips = []
        for stage in STAGE_ORDER:
            if stage in m.stage_batches:
                b, running = m.stage_batches[stage]
                state = "running" if running else "done"
                chips.append(_swatch(batch_colour(b), f"{stage.value}: batch {b} ({state})"))
        self.stages.value = " &nbsp; ".join(chips)
        counts = [(FREE, "free", SlotState.FREE), (RESIDENT, "resident", SlotState.RESIDENT),
                  (batch_colour(m.event.batch), "held", SlotState.HELD), (VICTIM, "victim", SlotState.VICTIM),
                  (INSERTED, "just inserted", SlotState.INSERTED), (CONFLICT, "hazard", SlotState.CONFLICT)]
        self.words.value = (f"<b>{html.escape(m.words)}</b><br>slots now: " +
                            " &nbsp; ".join(_swatch(c, f"{m.count(s)} {n}") for c, n, s in counts))
