"""The projected speed-up map: samples/s over hybrid's against locality and table size, one panel
per trainer (scratchkit.course.projections.speedup_grid computes it)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots


def speedup_figure(grid, title: str | None = None) -> go.Figure:
    """Heatmaps of `grid.speedup` (log colour scale), each cell labelled with its speed-up and the
    stage that bounds it: where ScratchPipe wins, where a cache suffices, where neither helps."""
    names = list(grid.speedup)
    if not names:
        raise ValueError("the grid has no trainer to draw")
    # two panels a row, row labels only left of each row, no colour bar (each cell says its
    # value): four panels side by side would leave ~50 px a cell on a 968 px page, too narrow for
    # "117.7x embedding backward", and a panel's row labels would stand on the cells to their left
    cols = min(2, len(names))
    rows = -(-len(names) // cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[f"{n} / hybrid" for n in names],
        shared_yaxes=True,
        horizontal_spacing=0.03,
        vertical_spacing=0.16 / rows,
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
        title=title
        or (
            f"Projected speed-up over hybrid on {grid.machine}<br>({grid.profile}, "
            f"cache and scratchpad {grid.capacity:,} rows per table)"
        ),
        title_font_size=14,
        height=110 + 300 * rows,
        margin=dict(t=90, l=10, r=10, b=10),
    )
    return fig


def _stage(name: str) -> str:
    """A stage's name on as many lines as it has words, so that it fits a cell."""
    return name.replace("_", "<br>")
