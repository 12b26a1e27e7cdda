"""The projected speed-up map: samples/s over hybrid's against locality and table size, one panel
per trainer (scratchkit.course.projections.speedup_grid computes it)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from scratchkit.course.viz.words import lines, wrapped

PANEL_PX = 230  # a trainer's panel: its title and three rows of cells of three lines each
GAP_PX = 70  # between two panels


def speedup_figure(grid, title: str | None = None) -> go.Figure:
    """Heatmaps of `grid.speedup` (log colour scale), each cell labelled with its speed-up and the
    stage that bounds it: where ScratchPipe wins, where a cache suffices, where neither helps."""
    names = list(grid.speedup)
    if not names:
        raise ValueError("the grid has no trainer to draw")
    # a panel a row, no colour bar (each cell says its value): the figure follows the page's width,
    # down to 424 px, where two panels side by side would leave ~60 px a cell, too narrow for
    # "117.7x embedding backward" (a panel's row labels would also stand on the cells to its left)
    cols, rows = 1, len(names)
    title = wrapped(
        title
        or (
            f"Projected speed-up over hybrid on {grid.machine} ({grid.profile}, "
            f"cache and scratchpad {grid.capacity:,} rows per table)"
        )
    )
    height = 60 + 20 * lines(title) + PANEL_PX * rows
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[f"{n} / hybrid" for n in names],
        vertical_spacing=GAP_PX / height,  # a panel's x labels, then the next one's title
    )
    top = max(float(np.max(v)) for v in grid.speedup.values())
    x = [f"Zipf {z:g}" for z in grid.zipfs]
    y = [f"{r:,} rows" for r in grid.table_rows]
    for k, name in enumerate(names):
        values = grid.speedup[name]
        text = [
            [f"{values[i, j]:.1f}x<br>{_stage(grid.bound[name][i][j])}" for j in range(len(x))] for i in range(len(y))
        ]
        over = grid.over_peer.get(name)
        peer = (np.zeros_like(values) if over is None else over).tolist()
        fig.add_trace(
            go.Heatmap(
                z=np.log10(np.maximum(values, 1e-3)),
                x=x,
                y=y,
                text=text,
                customdata=peer,
                texttemplate="%{text}",
                textfont_size=11,
                zmin=0.0,
                zmax=max(np.log10(top), 0.5),
                colorscale="Viridis",
                showscale=False,  # each cell says its value
                hovertemplate=f"{name}: %{{text}} x hybrid, %{{customdata:.2f}}x "
                f"{grid.peer}<extra>%{{y}}, %{{x}}</extra>",
            ),
            row=k // cols + 1,
            col=k % cols + 1,
        )
    fig.update_layout(
        title=title,
        title_font_size=14,
        height=height,
        margin=dict(t=50 + 20 * lines(title), l=10, r=10, b=10),
    )
    return fig


def _stage(name: str) -> str:
    """A stage's name on as many lines as it has words, so that it fits a cell."""
    return name.replace("_", "<br>")
