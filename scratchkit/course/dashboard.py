"""The live training dashboard: start and stop trainers in a background thread, one live figure.

    TrainingDashboard   pick a trainer, press start: samples/s, loss and hit rate per step, drawn
                        every `every` seconds; load factor and depth sliders (a run going restarts
                        with the new setting); stop flushes the trainer

A run lasts until stop is pressed or its data ends (`steps`, by default the data's length: ten
thousand steps of the small profile, a minute or more), so a slider moved or stop pressed a few
seconds in meets a run still going; the figure shows its last SHOWN steps. It trains CHUNK steps
at a time (ScratchPipe plans all the steps it is asked for before its first: a whole run at once
would start in a minute, not a second), so ScratchPipe pauses about a second every CHUNK steps.

Every control changes the drawn figure: the title says which trainer and settings the next (or
current) run uses. Starting a trainer takes about a second (building it, forking ScratchPipe's host
process), so until its first step the start button is busy and the status says so; a progress bar
counts the steps. A refusal of a scratchpad too small for the depth is said in the dashboard's own
terms: where to move the load-factor slider (`slider_words`), not a CLI flag or a Python parameter.
"""

from __future__ import annotations

import html
import math
import threading

import ipywidgets as widgets

from scratchkit.config import CacheParams, TrainConfig
from scratchkit.course.fit_width import FitWidth, live, row
from scratchkit.course.live import BackgroundRun
from scratchkit.course.viz import training_curves
from scratchkit.course.viz.timing import ROWS, training_series
from scratchkit.profiles import get_profile
from scratchkit.scratchpipe.capacity import ScratchpadTooSmall
from scratchkit.trainers import available_trainers, make_trainer

LABEL = {"description_width": "130px"}  # wide enough for "look-ahead depth" in JupyterLab's font


def wide() -> widgets.Layout:
    """A slider's layout, its own: 400 px, its label, track and readout within the 424 px output of
    a 540 px window (a slider does not shrink: its readout ran past the output's edge)."""
    return widgets.Layout(width="400px")


LOAD_FACTOR_STEP = 0.01
SHOWN = 2000  # steps drawn: the latest, so a long run's redraws stay small
CHUNK = 300  # steps a trainer is asked for at a time: ScratchPipe plans them all before its first


def slider_words(error: BaseException, table_sizes, step: float = LOAD_FACTOR_STEP) -> str:
    """An error in the words of the dashboard's controls. A scratchpad too small for the depth
    names the load factor to move the slider to: the smallest slider position at which every
    table gets at least the capacity that fits them all (`fits_all`)."""
    if not isinstance(error, ScratchpadTooSmall):
        return f"{type(error).__name__}: {error}"
    share = error.fits_all / min(table_sizes)
    if share > 1:
        return f"{error.problem()} No load factor fits at this depth: lower the look-ahead depth."
    load_factor = math.ceil(round(share / step, 9)) * step
    rows = max(1, round(load_factor * min(table_sizes)))
    return (
        f"{error.problem()} To train, move the load factor slider to {load_factor:.2f} or more "
        f"({rows:,} rows of the smallest table), or lower the look-ahead depth."
    )


class TrainingDashboard(widgets.VBox):
    """Start/stop training in a background thread; samples/s, loss and hit rate per trainer, live.

    Changing the capacity or depth while a run is going restarts it with the new setting. Stopping
    ends the run after its current step and closes the trainer, which flushes its scratchpad.
    """

    def __init__(
        self,
        config: TrainConfig | None = None,
        steps: int | None = None,
        every: float = 0.1,
        trainers: list[str] | None = None,
        load_factor: float = 0.25,
        depth: int = 2,
    ):
        self.config = config or get_profile("small")
        self.steps, self.every = steps, every
        names = trainers or available_trainers()
        self.trainer = widgets.Dropdown(
            options=names,
            value="scratchpipe" if "scratchpipe" in names else names[0],
            description="trainer",
            style=LABEL,
        )
        self.load_factor = widgets.FloatSlider(
            value=load_factor,
            min=0.02,
            max=1.0,
            step=LOAD_FACTOR_STEP,
            description="load factor",
            continuous_update=False,
            style=LABEL,
            layout=wide(),
        )
        self.depth = widgets.IntSlider(
            value=depth,
            min=1,
            max=8,
            description="look-ahead depth",
            continuous_update=False,
            style=LABEL,
            layout=wide(),
        )
        self.start = widgets.Button(description="start", icon="play", button_style="success")
        self.stop = widgets.Button(description="stop", icon="stop", button_style="danger")
        self.progress = widgets.IntProgress(
            value=0, min=0, max=1, description="steps", style=LABEL, layout=widgets.Layout(width="300px")
        )
        self.status = widgets.HTML("Pick a trainer and press start.")
        self.figure = live(training_curves(trainers=names, title=self._title_text(names[0])))
        self.figure.layout.height = 520
        self.run: BackgroundRun | None = None
        self._running = ""  # the trainer of the run going, or of the last one
        self._lock = threading.Lock()
        self.start.on_click(lambda _: self.begin())
        self.stop.on_click(lambda _: self.end(wait=False))
        for control in (self.load_factor, self.depth):
            control.observe(self._on_setting, names="value")
        self.trainer.observe(lambda _: self._title(), names="value")
        self._title()
        super().__init__(
            [
                row(self.trainer, self.start, self.stop, self.progress),
                row(self.load_factor, self.depth),
                self.status,
                self.figure,
                FitWidth(),
            ]
        )

    def train_config(self) -> TrainConfig:
        cache = CacheParams(
            load_factor=self.load_factor.value, depth=self.depth.value, victim_policy=self.config.cache.victim_policy
        )
        return self.config.replace(cache=cache)

    def _title(self, running: str | None = None) -> None:
        self.figure.layout.title.text = self._title_text(running or f"next, {self.trainer.value}")

    def _title_text(self, what: str) -> str:
        """On two lines, each short enough for a narrow page, so the figure keeps room for both."""
        return f"Live: {what}<br>load factor {self.load_factor.value:.2f}, depth {self.depth.value}"

    def begin(self, stop_after: int | None = None) -> BackgroundRun:
        """Stop any run going, then train the picked trainer in a background thread (stopped
        after `stop_after` steps, as the stop button would, if given)."""
        self.end()
        name, config = self.trainer.value, self.train_config()
        steps = min(self.steps or config.data.num_batches, config.data.num_batches)  # nor outlast its data
        self.progress.max, self.progress.value = steps, 0
        self.start.disabled, self.start.description = True, "starting..."
        self.status.value = (
            f"starting <b>{html.escape(name)}</b> (load factor {self.load_factor.value:.2f}, "
            f"depth {self.depth.value}): building the trainer, its first step comes in about a "
            f"second; it trains {steps:,} steps unless you press stop"
        )
        self._title(running=f"training {name}")
        self._running = name
        self.run = BackgroundRun(
            lambda: make_trainer(name, config),
            steps,
            on_records=lambda records: self._draw(name, records),
            every=self.every,
            on_finish=lambda run: self._finished(name, run),
            stop_after=stop_after,
            chunk=CHUNK,
        )
        return self.run.start()

    def end(self, wait: bool = True) -> None:
        """Stop the run after its current step; the trainer is closed (its scratchpad flushed).
        `wait`: return once it is (before a new run, in a cell). The stop button does not wait:
        the step in progress may be the first of a chunk, which ScratchPipe plans whole before
        it (a second), so the figure's title says at once that the run is stopping, the kernel
        stays free for the other controls, and the status says when the trainer is closed."""
        if self.run is None:
            return
        if not wait and self.run.running:
            self._title(running=f"stopping {self._running}")
            self.status.value = (
                f"stopping <b>{html.escape(self._running)}</b> after its current step, then writing its "
                f"scratchpad back to the host tables ..."
            )
        self.run.stop(timeout=30.0 if wait else 0)

    def stopped_run(self, steps: int = 20, timeout: float = 120.0) -> BackgroundRun:
        """A run stopped by `stop`: the learner's last one, stopped now if it is still going, or,
        if there is none, the picked trainer started and stopped after `steps` steps here (what
        pressing start, then stop, does), so a notebook run top to bottom has one too."""
        if self.run is None:
            self.begin(stop_after=steps).join(timeout)
        self.end()
        return self.run

    def _finished(self, name: str, run: BackgroundRun) -> None:
        self.start.disabled, self.start.description = False, "start"
        self._title()
        if run.error is not None:
            words = slider_words(run.error, self.config.data.table_sizes)
            self.status.value = f"<b>{html.escape(name)} stopped with an error</b>: {html.escape(words)}"
        else:
            self.status.value += (
                f" &mdash; {'stopped' if len(run.records) < run.steps else 'finished'}, trainer closed."
            )

    def _on_setting(self, change) -> None:
        self._title()
        if self.run is not None and self.run.running:
            self.begin()

    def _draw(self, name: str, records) -> None:
        """Called from the training thread, at most every `every` seconds: one batched redraw."""
        series = training_series(records[-SHOWN:])
        names = list(self.trainer.options)
        with self._lock, self.figure.batch_update():
            first = 3 * names.index(name)
            for offset, key in enumerate(ROWS):
                trace = self.figure.data[first + offset]
                trace.x, trace.y = series["step"], series[key]
        if records:
            self.start.description = "start"
            self.progress.value = len(records)
            last = records[-1]
            hit = "-" if last.hits is None else f"{last.hits / max(last.lookups, 1):.3f}"
            self.status.value = (
                f"<b>{html.escape(name)}</b>: step {len(records):,} of {self.progress.max:,} "
                f"(stop ends it), {series['samples_per_s'][-1]:,.0f} samples/s, "
                f"loss {last.loss:.4f}, hit rate {hit}"
            )
