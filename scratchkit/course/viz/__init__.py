"""Plotly figure builders for the course. Each returns a `plotly.graph_objects.Figure` (never shows
it): display it in a notebook, or wrap it in a `FigureWidget` to update it live (the course's widgets:
cache_explorer.py, pipeline_visualizer.py, dashboard.py), finding each trace by its name (`trace_named`).

    timing     stage-time breakdown, training curves (samples/s, loss, hit rate), trainer comparison
    caches     access-skew CDFs, hit rate vs capacity, reuse between batches, look-ahead working
               sets, Amdahl's cap on the speed-up
    pipeline   the pipeline timeline (Gantt) and the scratchpad's slot map, from an EventLog
    projections  the projected speed-up over hybrid against locality and table size
"""

import plotly.graph_objects as go

from scratchkit.course.viz.caches import (
    amdahl_figure,
    hit_rate_curves,
    reuse_figure,
    sampled_curves,
    skew_cdf,
    window_figure,
)
from scratchkit.course.viz.pipeline import pipeline_view, scratchpad_map, timeline
from scratchkit.course.viz.projections import speedup_figure
from scratchkit.course.viz.timing import stage_breakdown, trainer_comparison, training_curves

__all__ = [
    "amdahl_figure",
    "hit_rate_curves",
    "reuse_figure",
    "sampled_curves",
    "skew_cdf",
    "window_figure",
    "pipeline_view",
    "scratchpad_map",
    "timeline",
    "speedup_figure",
    "stage_breakdown",
    "trainer_comparison",
    "training_curves",
    "trace_named",
]


def trace_named(fig: go.Figure, name: str):
    """The figure's one trace called `name` (a widget updates that trace in place)."""
    found = [t for t in fig.data if t.name == name]
    if len(found) != 1:
        raise KeyError(f"the figure has {len(found)} traces named {name!r}")
    return found[0]
