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
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=[f"{n} / hybrid" for n in names],
                        horizontal_spacing=0.06)
    top = max(float(np.max(v)) for v in grid.speedup.values())
    x = [f"Zipf {z:g}" for z in grid.zipfs]
    y = [f"{r:,} rows" for r in grid.table_rows]
    for k, name in enumerate(names):
        values = grid.speedup[name]
        text = [[f"{values[i, j]:.1f}x<br>{grid.bound[name][i][j]}" for j in range(len(x))] for i in range(len(y))]
        fig.add_trace(go.Heatmap(z=np.log10(np.maximum(values, 1e-3)), x=x, y=y, text=text,
                                 texttemplate="%{text}", zmin=0.0, zmax=max(np.log10(top), 0.5),
                                 colorscale="Viridis", showscale=k == len(names) - 1,
                                 colorbar=dict(title="x hybrid", tickvals=[0, 1, 2, 3],
                                               ticktext=["1", "10", "100", "1000"]),
                                 hovertemplate=f"{name}: %{{text}}<extra>%{{y}}, %{{x}}</extra>"),
                      row=1, col=k + 1)
    fig.update_layout(title=title or (f"Projected speed-up over hybrid on {grid.hardware} ({grid.profile}, "
                                      f"cache and scratchpad {grid.capacity:,} rows per table)"),
                      height=380, margin=dict(t=70, l=10, r=10, b=10))
    return fig
