"""Figures about caching: how skewed the ids are, and what a cache of a given size can catch."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go

from scratchkit.course.viz.words import wrapped
from scratchkit.course.analysis import access_cdf, amdahl_speedup
from scratchkit.course.viz.palette import BATCH_COLOURS, INSERTED, VICTIM


def skew_cdf(traces: Mapping[str, np.ndarray], points: int = 200) -> go.Figure:
    """Share of lookups served by the hottest x% of ids, one curve per trace (uniform = diagonal)."""
    if not traces:
        raise ValueError("give at least one trace to plot")
    fig = go.Figure()
    for i, (name, trace) in enumerate(traces.items()):
        x, y = access_cdf(trace, points)
        fig.add_scatter(x=100 * x, y=100 * y, name=name, mode="lines", line_color=BATCH_COLOURS[i % len(BATCH_COLOURS)])
    fig.add_scatter(x=[0, 100], y=[0, 100], name="no skew", mode="lines", line=dict(dash="dot", color="grey"))
    fig.update_layout(
        title=wrapped("Skew: the hottest ids serve most lookups"),
        height=420,
        xaxis_title="hottest ids (% of the distinct ids)",
        yaxis_title="lookups served (%)",
    )
    return fig


def hit_rate_curves(
    capacities,
    curves: Mapping[str, np.ndarray],
    marker: float | None = None,
    needed: float | None = None,
    x_title: str = "cache capacity (rows)",
    title: str = "Hit rate vs cache size",
) -> go.Figure:
    """One line per policy: hit rate at each capacity (NaN: cannot run there, left out). `marker`: a
    vertical line at the chosen size; `needed`: a dashed line where a look-ahead window's working
    set fits (100% hits from there)."""
    x = np.asarray(capacities, dtype=np.float64)
    if not curves:
        raise ValueError("give at least one policy's hit rates")
    fig = go.Figure()
    drawn = []
    for i, (policy, rates) in enumerate(curves.items()):
        rates = np.asarray(rates, dtype=np.float64)
        if rates.shape != x.shape:
            raise ValueError(f"policy {policy!r}: {rates.size} hit rates for {x.size} capacities")
        runs = ~np.isnan(rates)  # NaN: the policy cannot run at that size; leave the point out
        drawn.append(rates[runs])
        fig.add_scatter(
            x=x[runs], y=rates[runs], name=policy, mode="lines", line_color=BATCH_COLOURS[i % len(BATCH_COLOURS)]
        )
    low, high = _rate_range(np.concatenate(drawn))
    fig.add_scatter(
        x=[marker] * 2 if marker is not None else [],
        y=[low, high] if marker is not None else [],
        name="chosen size",
        mode="lines",
        line=dict(color=VICTIM, width=2),
    )
    fig.add_scatter(
        x=[needed] * 2 if needed is not None else [],
        y=[low, high] if needed is not None else [],
        name="look-ahead window fits",
        mode="lines",
        line=dict(color=INSERTED, dash="dash"),
    )
    fig.update_layout(
        title=wrapped(title), height=420, xaxis_title=x_title, yaxis_title="hit rate", yaxis_range=[low, high]
    )
    return fig


def _rate_range(rates: np.ndarray) -> tuple[float, float]:
    """The hit-rate axis: the rates drawn, a little padded, within [0, 1.02] (all of it before
    any rate is known, as a widget starts): a curve that moves between 40% and 70% fills it."""
    if rates.size == 0:
        return 0.0, 1.02
    pad = max(0.02, 0.05 * float(rates.max() - rates.min()))
    return max(0.0, float(rates.min()) - pad), min(1.02, float(rates.max()) + pad)


def reuse_figure(reuse: np.ndarray, start: int = 1) -> go.Figure:
    """Bars: for batch b, the share of its working set that batch b-1 also touched."""
    reuse = np.asarray(reuse, dtype=np.float64)
    fig = go.Figure(
        go.Bar(x=np.arange(start, start + reuse.size), y=100 * reuse, marker_color=BATCH_COLOURS[0], name="reuse")
    )
    fig.add_hline(
        y=100 * float(reuse.mean()) if reuse.size else 0,
        line_dash="dot",
        annotation_text=f"mean {100 * reuse.mean():.0f}%" if reuse.size else "",
    )
    fig.update_layout(
        title=wrapped("How much of each batch the previous batch already touched"),
        height=360,
        xaxis_title="batch b",
        yaxis_title="% of U_b also in U_b-1",
        yaxis_range=[0, min(100.0, 125 * float(reuse.max()))] if reuse.size and reuse.max() > 0 else [0, 100],
    )
    return fig


def window_figure(sizes, capacity: int | None = None) -> go.Figure:
    """Working set of a look-ahead window (mean, max) vs depth D, beside the no-reuse bound (D+1)BL."""
    fig = go.Figure()
    fig.add_scatter(
        x=sizes.depths, y=sizes.max, name="largest window", mode="lines+markers", line_color=BATCH_COLOURS[0]
    )
    fig.add_scatter(
        x=sizes.depths,
        y=sizes.mean,
        name="mean window",
        mode="lines+markers",
        line=dict(color=BATCH_COLOURS[3], dash="dot"),
    )
    fig.add_scatter(
        x=sizes.depths, y=sizes.no_reuse, name="no reuse: (D+1)·B·L", mode="lines", line=dict(color="grey", dash="dash")
    )
    if capacity is not None:
        fig.add_hline(y=capacity, line_color=VICTIM, annotation_text=f"capacity {capacity}")
    fig.update_layout(
        title=wrapped("Rows a look-ahead window needs at once"),
        height=380,
        xaxis_title="look-ahead depth D (batches planned ahead of Train)",
        yaxis_title="unique ids in batches b .. b+D",
    )
    return fig


def amdahl_figure(hit_speedups=(2, 10, 100), marker: float | None = None) -> go.Figure:
    """Speed-up of the embedding work vs hit rate, one curve per hit speed-up s, and the 1/(1-h) cap."""
    h = np.linspace(0, 0.99, 199)
    fig = go.Figure()
    for i, s in enumerate(hit_speedups):
        fig.add_scatter(
            x=h,
            y=amdahl_speedup(h, s),
            name=f"hits {s}x faster",
            mode="lines",
            line_color=BATCH_COLOURS[i % len(BATCH_COLOURS)],
        )
    fig.add_scatter(
        x=h, y=1 / (1 - h), name="cap: 1 / (1 - hit rate)", mode="lines", line=dict(color="grey", dash="dash")
    )
    if marker is not None:
        fig.add_vline(x=marker, line_color=VICTIM, annotation_text=f"hit rate {marker:.2f}")
    fig.update_layout(
        title=wrapped("Misses cap the speed-up (Amdahl's law)"),
        height=400,
        yaxis_type="log",
        xaxis_title="hit rate",
        yaxis_title="speed-up of the embedding work",
    )
    return fig


def sampled_curves(samples, num_rows: int, up_to: float = 0.5) -> go.Figure:
    """LRU hit rate vs load factor, exact beside SHARDS estimates (`analysis.sampled_lru`); each
    sampled curve is drawn from the capacity it can be trusted at, as the step function it is."""
    fig = go.Figure()
    for i, s in enumerate(samples):
        keep = (s.curve.capacities >= s.trusted_from) & (s.curve.capacities <= up_to * num_rows)
        name = "exact (every id)" if s.rate == 1.0 else f"sampled at rate {s.rate:g}"
        fig.add_scatter(
            x=100 * s.curve.capacities[keep] / num_rows,
            y=s.curve.hit_rate[keep],
            name=name,
            mode="lines",
            line=dict(color=BATCH_COLOURS[i % len(BATCH_COLOURS)], shape="hv", dash=None if s.rate == 1.0 else "dash"),
        )
    fig.update_layout(
        title=wrapped("LRU hit rate: exact vs sampled (SHARDS)"),
        height=400,
        xaxis_title="load factor (% of the table's rows)",
        yaxis_title="hit rate",
        yaxis_range=[0, 1.02],
    )
    return fig
