"""Where the time goes: stage breakdown bars, training curves, and measured vs projected speed."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scratchkit.course.viz.words import lines, wrapped
from scratchkit.course.viz.palette import BATCH_COLOURS, SERIES_COLOURS, STAGE_COLOURS, stage_colour

LEGEND_ROW = 20  # px per legend entry (plotly's default font): a legend taller than the plot scrolls
MARGINS = 180  # the title and plotly's default top and bottom margins
NAMES_PX = 140  # below a comparison's bars: the trainers' names, upright ("prefetch-lru-device")
NOTE_LINE_PX = 15  # a line of a figure's note at 11 px


def _breakdown_table(breakdown) -> dict[str, dict[str, float]]:
    """{trainer: {stage: seconds per step}} from that mapping or from a list of BenchResults."""
    if isinstance(breakdown, Mapping):
        table = {str(k): dict(v) for k, v in breakdown.items()}
    else:
        table = {r.trainer: dict(r.stage_seconds) for r in breakdown}
    if not table:
        raise ValueError("nothing to plot: give at least one trainer's stage times")
    for trainer, stages in table.items():
        for stage, seconds in stages.items():
            if not np.isfinite(seconds) or seconds < 0:
                raise ValueError(f"{trainer}: stage {stage!r} has time {seconds}; times must be >= 0")
    return table


def stage_breakdown(breakdown, share: bool = False, title: str = "Where a training step's time goes") -> go.Figure:
    """Stacked horizontal bars: one bar per trainer, one segment per stage (ms per step, or % if share)."""
    table = _breakdown_table(breakdown)
    stages = list(dict.fromkeys(s for stages in table.values() for s in stages))
    trainers = list(table)
    fig = go.Figure()
    unknown = [s for s in stages if s not in STAGE_COLOURS]
    for stage in stages:
        values = np.array([table[t].get(stage, 0.0) for t in trainers]) * 1000.0
        if share:
            totals = np.array([sum(table[t].values()) for t in trainers]) * 1000.0
            values = 100.0 * values / np.where(totals > 0, totals, 1.0)
        fig.add_bar(
            name=stage,
            y=trainers,
            x=values,
            orientation="h",
            marker_color=stage_colour(stage, unknown.index(stage) if stage in unknown else 0),
            hovertemplate=f"{stage}: %{{x:.2f}} {'%' if share else 'ms'}<extra>%{{y}}</extra>",
        )
    # tall enough for a bar per trainer and for every stage in the legend, and its title: plotly
    # scrolls a legend taller than the plot area
    height = max(160 + 40 * len(trainers), MARGINS + LEGEND_ROW * (len(stages) + 2))
    fig.update_layout(
        barmode="stack",
        title=wrapped(title),
        height=height,
        xaxis_title="share of the step (%)" if share else "ms per step",
        legend_title_text="stage",
        yaxis_autorange="reversed",
    )
    return fig


def training_series(records, window: int = 10) -> dict[str, np.ndarray]:
    """step, samples/s (over the last `window` steps), loss and hit rate (NaN without a cache)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    records = list(records)
    steps = np.array([r.step for r in records], dtype=np.int64)
    samples = np.array([r.samples for r in records], dtype=np.float64)
    seconds = np.array([r.seconds for r in records], dtype=np.float64)
    # rolling sums over the last `window` steps: cumsum[i] - cumsum[i - window]
    cs, ct = np.cumsum(np.r_[0.0, samples]), np.cumsum(np.r_[0.0, seconds])
    lo = np.maximum(np.arange(1, len(records) + 1) - window, 0)
    hi = np.arange(1, len(records) + 1)
    elapsed = ct[hi] - ct[lo]
    speed = np.divide(cs[hi] - cs[lo], elapsed, out=np.full(len(records), np.nan), where=elapsed > 0)
    hit_rate = np.array(
        [np.nan if r.hits is None or r.lookups == 0 else r.hits / r.lookups for r in records], dtype=np.float64
    )
    loss = np.array([r.loss for r in records], dtype=np.float64)
    return {"step": steps, "samples_per_s": speed, "loss": loss, "hit_rate": hit_rate}


ROWS = ("samples_per_s", "loss", "hit_rate")
ROW_TITLES = ("samples/s", "loss", "hit rate")


def training_curves(
    runs: Mapping[str, list] | None = None, trainers=(), window: int = 10, title: str = "Training, step by step"
) -> go.Figure:
    """Three stacked plots over steps: samples/s, loss, hit rate; one line per trainer.

    `runs` maps a trainer's name to its StepRecords; `trainers` adds empty lines (to fill live).
    Traces come in the order (trainer 0: samples/s, loss, hit rate), (trainer 1: ...), ...
    """
    runs = dict(runs or {})
    for name in trainers:
        runs.setdefault(name, [])
    if not runs:
        raise ValueError("give at least one trainer's records (or a name in `trainers`)")
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06, subplot_titles=ROW_TITLES)
    for i, (name, records) in enumerate(runs.items()):
        series = training_series(records, window)
        colour = BATCH_COLOURS[i % len(BATCH_COLOURS)]
        for row, key in enumerate(ROWS, start=1):
            fig.add_scatter(
                x=series["step"],
                y=series[key],
                name=name,
                legendgroup=name,
                showlegend=row == 1,
                line_color=colour,
                mode="lines",
                row=row,
                col=1,
            )
    fig.update_yaxes(range=[0, 1.05], row=3, col=1)
    fig.update_xaxes(title_text="step", row=3, col=1)
    title = wrapped(title)  # each line more is a line more of margin above the first plot's title
    fig.update_layout(
        title=title, height=560 + 22 * (lines(title) - 1), margin=dict(t=70 + 22 * (lines(title) - 1), b=40)
    )
    return fig


def trainer_comparison(
    measured: Mapping[str, float],
    projected: Mapping[str, Mapping[str, float]] | None = None,
    relative_to: str | None = None,
    title: str = "Trainers side by side",
    step_errors: Mapping[str, float] | None = None,
) -> go.Figure:
    """Grouped bars per trainer: the measured samples/s beside the cost model's projections.

    `projected` maps a machine's name to {trainer: samples/s}. With `relative_to` a
    trainer's name, every series is divided by that trainer's value in the same series (speed-up).
    `step_errors` {trainer: predicted / measured - 1 of the step on this machine} is written under
    the bars: how far the projections can be trusted. Value labels stand upright inside their
    bars, all at one size, and a bar too narrow for its label (dozens of bars in a 424 px figure)
    goes without it: neighbours never overlap, and the hover still gives the value.
    """
    series = {"measured here": dict(measured)} | {f"projected: {p}": dict(v) for p, v in (projected or {}).items()}
    trainers = list(dict.fromkeys(t for s in series.values() for t in s))
    if not trainers:
        raise ValueError("nothing to compare: give at least one measured trainer")
    fig = go.Figure()
    for i, (name, values) in enumerate(series.items()):
        y = np.array([values.get(t, np.nan) for t in trainers], dtype=np.float64)
        if relative_to is not None:
            if relative_to not in values:
                raise ValueError(f"{name}: no value for {relative_to!r} to divide by; it has {sorted(values)}")
            y = y / values[relative_to]
        fig.add_bar(
            name=name,
            x=trainers,
            y=y,
            marker_color=SERIES_COLOURS[i % len(SERIES_COLOURS)],
            text=[f"{v:.2f}x" if relative_to else f"{v:,.0f}" for v in y],
            textposition="inside",
            insidetextanchor="end",
            textangle=-90,
        )
    note = ""
    if step_errors:
        errors = ", ".join(f"{t} {100 * e:+.0f}%" for t, e in step_errors.items())
        note = wrapped(f"How far the model can be trusted: its step time vs the measurement here: {errors}")
    below = NAMES_PX + (NOTE_LINE_PX * lines(note) + 10 if note else 0)  # the upright names, then the note
    fig.update_layout(
        barmode="group",
        title=wrapped(title),
        height=330 + below,
        margin=dict(t=90, b=below),
        uniformtext=dict(minsize=10, mode="hide"),  # a label that does not fit its bar is left out
        yaxis_title=f"speed-up over {relative_to}" if relative_to else "samples/s",
        yaxis_type=None if relative_to else "log",
    )
    fig.update_xaxes(tickangle=-90)  # the trainers' names upright: side by side they would overlap
    if note:
        fig.add_annotation(
            text=note,
            xref="paper",
            yref="paper",
            x=0,
            y=0,
            yshift=-NAMES_PX + 10,
            showarrow=False,
            xanchor="left",
            yanchor="top",
            align="left",
            font_size=11,
        )
    return fig
