"""The course's interactive widgets; the only module of the kit that imports ipywidgets.

    CacheExplorer        sliders for cache size, locality and look-ahead depth, a policy picker:
                         hit rate vs cache size, redrawn in a fraction of a second
    PipelineVisualizer   step through a small ScratchPipe run event by event: which batch is in
                         which stage, the scratchpad's slots, the step in words; hazard-lab switches
    TrainingDashboard    start/stop training in a background thread; one live figure of samples/s,
                         loss and hit rate per trainer

Each is an `ipywidgets.VBox`: display it by leaving it last in a cell. Everything can be driven
from Python too (set a slider's `.value`, call a button's `.click()`), which is how the tests
drive them. The logic lives in the package (hit_curves, pipeline_replay, hazard_lab, live); these
classes only wire controls to figures.
"""
from __future__ import annotations

import html
import threading
from dataclasses import replace

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go

from scratchkit.config import CacheParams, TrainConfig
from scratchkit.course.hazard_lab import HazardLab, LabResult
from scratchkit.course.hit_curves import POLICIES, HitCurves
from scratchkit.course.live import BackgroundRun
from scratchkit.course.pipeline_replay import STAGE_ORDER, Moment, SlotState, replay
from scratchkit.profiles import get_profile
from scratchkit.trainers import available_trainers, make_trainer
from scratchkit.trainers.scratchpipe import Hazards
from scratchkit.course.viz import hit_rate_curves, pipeline_view, training_curves
from scratchkit.course.viz.palette import CONFLICT, FREE, INSERTED, RESIDENT, VICTIM, batch_colour
from scratchkit.course.viz.pipeline import map_grid
from scratchkit.course.viz.timing import ROWS, training_series

_WIDE = widgets.Layout(width="420px")
_LABEL = {"description_width": "110px"}


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
                                               style=_LABEL, layout=_WIDE)
        self.zipf = widgets.FloatSlider(value=zipf, min=0.0, max=1.4, step=0.05, description="locality (zipf)",
                                        continuous_update=False, style=_LABEL, layout=_WIDE)
        self.depth = widgets.IntSlider(value=depth, min=1, max=8, description="look-ahead depth",
                                       style=_LABEL, layout=_WIDE)
        self.policies = widgets.SelectMultiple(options=POLICIES, value=tuple(policies), rows=len(POLICIES),
                                               description="policies", style=_LABEL)
        self.readout = widgets.HTML()
        x = 100 * self.curves.load_factors
        empty = {p: np.full(x.shape, np.nan) for p in POLICIES}
        self.figure = go.FigureWidget(hit_rate_curves(x, empty, x_title="load factor (% of the table's rows)",
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
        zipf, depth = self.zipf.value, self.depth.value
        with self.figure.batch_update():
            for policy in POLICIES:
                trace = _trace(self.figure, policy)
                shown = policy in self.policies.value
                trace.visible = shown
                if shown:
                    self._draw_curve(policy, zipf, depth)
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
            _trace(self.figure, "chosen size").x = [100 * capacity / self.curves.num_rows] * 2
            _trace(self.figure, "look-ahead window fits").x = [x_needed] * 2
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
    """Step event by event through a small ScratchPipe run; rerun it with a hazard switched on."""

    def __init__(self, lab: HazardLab | None = None, table: int = 0, columns: int = 12):
        self.lab = lab or HazardLab(visualizer_config(), steps=12)
        self.table, self.columns = table, columns
        self.holds = widgets.Checkbox(value=True, description="holds (invariant 4)", indent=False)
        self.write_back_order = widgets.Checkbox(value=True, description="write-back before collect (invariant 3)",
                                                 indent=False)
        self.rerun = widgets.Button(description="rerun with these switches", icon="refresh",
                                    layout=widgets.Layout(width="240px"))
        self.back = widgets.Button(description="step back", icon="step-backward", tooltip="step back")
        self.forward = widgets.Button(description="step", icon="step-forward", tooltip="step forward")
        self.moment = widgets.IntSlider(value=0, min=0, max=1, description="moment", style=_LABEL,
                                        layout=widgets.Layout(width="520px"))
        self.play = widgets.Play(value=0, min=0, max=1, interval=600, description="play")
        widgets.link((self.play, "value"), (self.moment, "value"))
        self.stages = widgets.HTML()
        self.words = widgets.HTML()
        self.verdict = widgets.HTML()
        self.back.on_click(lambda _: self._move(-1))
        self.forward.on_click(lambda _: self._move(+1))
        self.rerun.on_click(lambda _: self.run())
        self.moment.observe(lambda _: self.show(), names="value")
        self.figure: go.FigureWidget | None = None
        self.result: LabResult | None = None
        self.moments: list[Moment] = []
        self.run()
        super().__init__([widgets.HBox([self.back, self.forward, self.play, self.moment]), self.stages,
                          self.words, self.figure, widgets.HTML("<b>Hazard lab</b>: untick a safety rule, rerun, "
                                                                "and compare with the exact baseline."),
                          widgets.HBox([self.holds, self.write_back_order, self.rerun]), self.verdict])

    @property
    def current(self) -> Moment:
        return self.moments[self.moment.value]

    def _move(self, by: int) -> None:
        self.moment.value = int(np.clip(self.moment.value + by, 0, len(self.moments) - 1))

    def run(self) -> LabResult:
        """(Re)train the small run with the switches as set, and show its first moment."""
        hazards = Hazards(holds=self.holds.value, write_back_order=self.write_back_order.value)
        self.result = self.lab.run(hazards)
        self.moments = replay(self.result.events, self.table, self.result.capacities[self.table])
        divergence = (np.array([r.step for r in self.result.records]), self.result.train_hit_rate,
                      self.result.loss_gap)
        fresh = go.FigureWidget(pipeline_view(self.result.events, self.moments[0], self.columns, divergence))
        if self.figure is None:
            self.figure = fresh
        else:   # keep the widget on the page; copy the new run's data into it
            with self.figure.batch_update():
                for old, new in zip(self.figure.data, fresh.data):
                    old.update(new.to_plotly_json())
        self.verdict.value = "<br>".join(html.escape(line) for line in self.result.verdict())
        self.moment.value = 0
        self.moment.max = self.play.max = len(self.moments) - 1
        self.show()
        return self.result

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


# --- live training dashboard ---------------------------------------------------------------------
class TrainingDashboard(widgets.VBox):
    """Start/stop training in a background thread; samples/s, loss and hit rate per trainer, live.

    Changing the capacity or depth while a run is going restarts it with the new setting. Stopping
    ends the run after its current step and closes the trainer, which flushes its scratchpad.
    """

    def __init__(self, config: TrainConfig | None = None, steps: int = 200, every: float = 0.1,
                 trainers: list[str] | None = None, load_factor: float = 0.25, depth: int = 2):
        self.config = config or get_profile("small")
        self.steps, self.every = steps, every
        names = trainers or available_trainers()
        self.trainer = widgets.Dropdown(options=names, value="scratchpipe" if "scratchpipe" in names else names[0],
                                        description="trainer", style=_LABEL)
        self.load_factor = widgets.FloatSlider(value=load_factor, min=0.02, max=1.0, step=0.01,
                                               description="load factor", continuous_update=False,
                                               style=_LABEL, layout=_WIDE)
        self.depth = widgets.IntSlider(value=depth, min=1, max=8, description="look-ahead depth",
                                       continuous_update=False, style=_LABEL, layout=_WIDE)
        self.start = widgets.Button(description="start", icon="play", button_style="success")
        self.stop = widgets.Button(description="stop", icon="stop", button_style="danger")
        self.status = widgets.HTML("Pick a trainer and press start.")
        self.figure = go.FigureWidget(training_curves(trainers=names, title="Live training"))
        self.run: BackgroundRun | None = None
        self._lock = threading.Lock()
        self.start.on_click(lambda _: self.begin())
        self.stop.on_click(lambda _: self.end())
        for control in (self.load_factor, self.depth):
            control.observe(self._on_setting, names="value")
        super().__init__([widgets.HBox([self.trainer, self.start, self.stop]),
                          widgets.HBox([self.load_factor, self.depth]), self.status, self.figure])

    def train_config(self) -> TrainConfig:
        cache = CacheParams(load_factor=self.load_factor.value, depth=self.depth.value,
                            victim_policy=self.config.cache.victim_policy)
        return self.config.replace(cache=cache)

    def begin(self) -> BackgroundRun:
        """Stop any run going, then train the picked trainer in a background thread."""
        self.end()
        name, config = self.trainer.value, self.train_config()
        steps = min(self.steps, config.data.num_batches)   # a run cannot outlast its data
        self.run = BackgroundRun(lambda: make_trainer(name, config), steps,
                                 on_records=lambda records: self._draw(name, records), every=self.every,
                                 on_finish=lambda run: self._finished(name, run))
        self.status.value = f"training <b>{name}</b> (load factor {self.load_factor.value:.2f}, depth {self.depth.value}) ..."
        return self.run.start()

    def end(self) -> None:
        """Stop the run after its current step; the trainer is closed (its scratchpad flushed)."""
        if self.run is not None:
            self.run.stop()

    def _finished(self, name: str, run: BackgroundRun) -> None:
        if run.error is not None:
            self.status.value = (f"<b>{name} stopped with an error</b>: "
                                 f"{html.escape(type(run.error).__name__)}: {html.escape(str(run.error))}")
        else:
            self.status.value += f" &mdash; {'stopped' if len(run.records) < run.steps else 'finished'}, trainer closed."

    def _on_setting(self, change) -> None:
        if self.run is not None and self.run.running:
            self.begin()

    def _draw(self, name: str, records) -> None:
        """Called from the training thread, at most every `every` seconds: one batched redraw."""
        series = training_series(records)
        names = list(self.trainer.options)
        with self._lock, self.figure.batch_update():
            first = 3 * names.index(name)
            for offset, key in enumerate(ROWS):
                trace = self.figure.data[first + offset]
                trace.x, trace.y = series["step"], series[key]
        if records:
            last = records[-1]
            hit = "-" if last.hits is None else f"{last.hits / max(last.lookups, 1):.3f}"
            self.status.value = (f"<b>{name}</b>: step {last.step}, {series['samples_per_s'][-1]:,.0f} samples/s, "
                                 f"loss {last.loss:.4f}, hit rate {hit}")
