"""The pipeline, drawn: a Gantt chart of stage events and the scratchpad's slot map at a moment.

Both take what `scratchkit.course.pipeline_replay.replay` returns. A batch has the same colour in both:
in the timeline its bars, on the map the slots it holds.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scratchkit.course.viz.words import wrapped
from scratchkit.scratchpipe.events import EventLog
from scratchkit.course.pipeline_replay import STAGE_ORDER, Moment, SlotState
from scratchkit.course.viz.palette import (
    BATCH_COLOURS,
    CONFLICT,
    FREE,
    INSERTED,
    LOSS_GAP,
    RESIDENT,
    VICTIM,
    batch_colour,
)

# map codes: the five states that are not "held", then one code per batch colour
_STATE_CODES = {
    SlotState.FREE: 0,
    SlotState.RESIDENT: 1,
    SlotState.VICTIM: 2,
    SlotState.INSERTED: 3,
    SlotState.CONFLICT: 4,
}
_CODE_COLOURS = (FREE, RESIDENT, VICTIM, INSERTED, CONFLICT) + BATCH_COLOURS
_LEGEND = (
    ("free", FREE),
    ("resident, not held", RESIDENT),
    ("victim", VICTIM),
    ("just inserted", INSERTED),
    ("hazard: held victim", CONFLICT),
)
STAGE_LABELS = [s.value.replace("_", "-") for s in STAGE_ORDER]


def _discrete_colourscale(colours) -> list:
    n, scale = len(colours), []
    for i, c in enumerate(colours):
        scale += [[i / n, c], [(i + 1) / n, c]]
    return scale


def map_grid(moment: Moment, columns: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """The slot map as a [rows, columns] grid of colour codes (NaN past the last slot) and hover text."""
    if columns < 1:
        raise ValueError(f"columns must be >= 1, got {columns}")
    capacity = moment.states.size
    rows = math.ceil(capacity / columns)
    codes = np.full(rows * columns, np.nan)
    text = np.full(rows * columns, "", dtype=object)
    for s in range(capacity):
        state = SlotState(int(moment.states[s]))
        holder = int(moment.holders[s])
        codes[s] = len(_STATE_CODES) + holder % len(BATCH_COLOURS) if state is SlotState.HELD else _STATE_CODES[state]
        rid = int(moment.slot_ids[s])
        what = "free" if rid < 0 else f"id {rid}"
        who = f", held by batch {holder}" if holder >= 0 else ""
        text[s] = f"slot {s}: {what}{who} ({state.name.lower()})"
    return codes.reshape(rows, columns), text.reshape(rows, columns)


def _map_traces(moment: Moment, columns: int) -> list:
    codes, text = map_grid(moment, columns)
    heat = go.Heatmap(
        z=codes,
        customdata=text,
        hovertemplate="%{customdata}<extra></extra>",
        colorscale=_discrete_colourscale(_CODE_COLOURS),
        zmin=-0.5,
        zmax=len(_CODE_COLOURS) - 0.5,
        showscale=False,
        xgap=1,
        ygap=1,
        name="slots",
    )
    legend = [
        go.Scatter(x=[None], y=[None], mode="markers", name=name, marker=dict(symbol="square", size=12, color=colour))
        for name, colour in _LEGEND
    ]
    legend.append(
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            name="held: its batch's colour",
            marker=dict(symbol="square", size=12, color=BATCH_COLOURS[0]),
        )
    )
    return [heat, *legend]


def _timeline_traces(log: EventLog, moment: Moment | None) -> list:
    events = sorted(log.stages, key=lambda e: e.start)
    origin = min((e.start for e in events), default=0.0)
    ms = lambda t: 1000.0 * (t - origin)
    bars = go.Bar(
        orientation="h",
        y=[e.stage.value.replace("_", "-") for e in events],
        base=[ms(e.start) for e in events],
        x=[ms(e.end) - ms(e.start) for e in events],
        marker_color=[batch_colour(e.batch) for e in events],
        text=[str(e.batch) for e in events],
        textposition="inside",
        insidetextanchor="middle",
        textangle=0,
        name="stage events",
        showlegend=False,
        customdata=[[e.batch, ms(e.start), ms(e.end)] for e in events],
        hovertemplate="%{y}(%{customdata[0]}): %{customdata[1]:.2f} - %{customdata[2]:.2f} ms<extra></extra>",
    )
    current = [moment.event] if moment is not None else []
    now = go.Scatter(
        x=[(ms(e.start) + ms(e.end)) / 2 for e in current],
        y=[e.stage.value.replace("_", "-") for e in current],
        mode="markers",
        marker=dict(symbol="diamond", size=15, color=CONFLICT, line=dict(color="white", width=2)),
        name="this moment",
        showlegend=False,
        hoverinfo="skip",
    )
    t = [ms(moment.time)] * 2 if moment is not None else []
    line = go.Scatter(
        x=t,
        y=[STAGE_LABELS[0], STAGE_LABELS[-1]] if t else [],
        mode="lines",
        line=dict(color=CONFLICT, dash="dot"),
        name="now",
        showlegend=False,
        hoverinfo="skip",
    )
    return [bars, now, line]


def timeline(log: EventLog, moment: Moment | None = None) -> go.Figure:
    """Gantt chart: one row per stage, one bar per (batch, stage), coloured and labelled by batch."""
    if not log.stages:
        raise ValueError("the event log has no stage events: was the run recorded (EventLog(enabled=True))?")
    fig = go.Figure(_timeline_traces(log, moment))
    _style_timeline(fig, row=None)
    fig.update_layout(title=wrapped("The pipeline: which batch each stage works on, over time"), height=360)
    return fig


def _style_timeline(fig: go.Figure, row: int | None) -> None:
    where = {} if row is None else dict(row=row, col=1)
    fig.update_yaxes(categoryorder="array", categoryarray=STAGE_LABELS, autorange="reversed", **where)
    fig.update_xaxes(title_text="time (ms)", **where)
    # a bar's batch number in a size that can be read, or not at all (a short bar would shrink it
    # to a speck)
    fig.update_layout(barmode="overlay", uniformtext=dict(minsize=9, mode="hide"))


def scratchpad_map(moment: Moment, columns: int = 32, title: str | None = None) -> go.Figure:
    """A grid of the scratchpad's slots at a moment: free, resident, held by batch b, victim, inserted."""
    fig = go.Figure(_map_traces(moment, columns))
    _style_map(fig, row=None)
    fig.update_layout(
        title=title or f"Scratchpad slots at {moment.event.stage.value}({moment.event.batch})",
        height=max(340, 140 + 28 * math.ceil(moment.states.size / columns)),
    )
    return fig


def _style_map(fig: go.Figure, row: int | None) -> None:
    where = {} if row is None else dict(row=row, col=1)
    fig.update_yaxes(autorange="reversed", showticklabels=False, showgrid=False, zeroline=False, **where)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False, **where)
    fig.update_layout(plot_bgcolor="white")


def _divergence_traces(divergence, batch: int) -> list:
    steps, hit_rate, loss_gap = (np.asarray(a) for a in divergence)
    return [
        go.Scatter(x=steps, y=hit_rate, name="Train hit rate", mode="lines+markers", line_color=BATCH_COLOURS[0]),
        # a filled line, not bars: a second bar trace (without text) would keep plotly from
        # hiding the timeline's unreadable bar texts (uniformtext)
        go.Scatter(
            x=steps,
            y=loss_gap,
            name="|loss - baseline loss|",
            mode="lines+markers",
            fill="tozeroy",
            line=dict(color=LOSS_GAP, shape="hvh"),
            marker_size=5,
        ),
        go.Scatter(
            x=[batch, batch],
            y=[0, 1],
            name="batch now",
            mode="lines",
            showlegend=False,
            line=dict(color=CONFLICT, dash="dot"),
            hoverinfo="skip",
        ),
    ]


def gap_axis(loss_gap) -> dict:
    """The |loss gap| axis's range and ticks: for a run with no gap at all, 0 alone (plotly would
    tick bars of height 0 from 0.19 to 0.95); else plotly's own, from 0."""
    if len(loss_gap) == 0 or float(np.max(loss_gap)) == 0.0:
        return dict(range=[0, 1], tickvals=[0], autorange=False)
    return dict(range=None, tickvals=None, autorange=True)


def pipeline_view(log: EventLog, moment: Moment, columns: int = 32, divergence=None) -> go.Figure:
    """Timeline above, slot map below (and, given `divergence`, the run against the baseline beside
    the map, so the whole fits one screen with the controls around it: 580 px tall, and no legend:
    the pipeline visualizer, which draws it, says the slots' colours above it).

    `divergence`: (steps, Train hit rate per step, |loss - baseline loss| per step), as the hazard
    lab measures them. Traces are named, so a widget can find and update them: 'stage events',
    'this moment', 'now', 'slots', and with divergence 'Train hit rate', '|loss - baseline loss|',
    'batch now'.
    """
    rows = math.ceil(moment.states.size / columns)
    # short enough for half of a 424 px figure each: the map's and the baseline's stand side by side
    timeline_title, map_title = "pipeline timeline (bars labelled by batch)", "slots, one table"
    if divergence is None:
        fig = make_subplots(
            rows=2, cols=1, row_heights=[0.42, 0.58], vertical_spacing=0.11, subplot_titles=[timeline_title, map_title]
        )
    else:
        fig = make_subplots(
            rows=2,
            cols=2,
            row_heights=[0.44, 0.56],
            vertical_spacing=0.2,
            horizontal_spacing=0.16,  # room for the right panel's axis at 424 px
            specs=[[{"colspan": 2}, None], [{}, {"secondary_y": True}]],
            subplot_titles=[timeline_title, map_title, "vs the exact run, by step"],
        )
        fig.update_annotations(font_size=13)  # the panels' titles: two side by side in 424 px
    for trace in _timeline_traces(log, moment):
        fig.add_trace(trace, row=1, col=1)
    for trace in _map_traces(moment, columns):
        fig.add_trace(trace, row=2, col=1)
    _style_timeline(fig, row=1)
    _style_map(fig, row=2)
    if divergence is None:
        fig.update_layout(
            height=560 + 14 * rows, margin=dict(t=60, b=30), title=f"{moment.event.stage.value}({moment.event.batch})"
        )
        return fig
    hit, gap, now = _divergence_traces(divergence, moment.event.batch)
    fig.add_trace(hit, row=2, col=2)
    fig.add_trace(gap, row=2, col=2, secondary_y=True)
    fig.add_trace(now, row=2, col=2)
    fig.update_yaxes(title_text="Train hit rate", range=[0, 1.05], row=2, col=2, secondary_y=False)
    fig.update_yaxes(
        title_text="|loss gap|", rangemode="tozero", row=2, col=2, secondary_y=True, **gap_axis(divergence[2])
    )
    fig.update_layout(
        height=580,
        margin=dict(t=60, b=40, r=20),
        # no legend: the visualizer says the slots' colours above the figure ("slots now"), the
        # axes' titles name the two lines; a legend under the panels stood on their step ticks
        showlegend=False,
        title=f"{moment.event.stage.value}({moment.event.batch})",
    )
    return fig
