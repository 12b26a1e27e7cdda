"""Notebook 07's figures and tables: who owns which rows, what crosses the network, the projection.

ownership_figure(plan)          every table's rows as a bar, one colour per owning rank
shard_table(source, plan, b)    per rank: the distinct ids of global batch b each shard owns
                                (what its planner plans), and the ids its micro-batch sends
traffic_table(config, gpus)     bytes one rank sends per step, per exchange: the kit's and TorchRec's
verify_table(rows)              `scratchkit verify --world-size N --json`'s rows
projection_figure(rows)         the sharded cost model's samples/s against GPUs
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from scratchkit.course.viz.words import wrapped
from scratchkit.measure.report import Table
from scratchkit.course.viz.palette import BATCH_COLOURS
from scratchkit.data.batch import micro_batch
from scratchkit.distributed.routing import Route, RoutedSource
from scratchkit.distributed.sharded_cost import Links, measure_work, torchrec_traffic


def ownership_figure(plan, title: str = "") -> go.Figure:
    """One horizontal bar per table, its rows split into the shards, coloured by rank."""
    fig = go.Figure()
    shown = set()
    for shard in plan.shards:
        colour = BATCH_COLOURS[shard.rank % len(BATCH_COLOURS)]
        fig.add_bar(
            y=[f"table {shard.table}"],
            x=[shard.rows],
            base=[shard.start],
            orientation="h",
            marker_color=colour,
            name=f"rank {shard.rank}",
            legendgroup=str(shard.rank),
            showlegend=shard.rank not in shown,
            hovertemplate=f"rank {shard.rank}: rows {shard.start}..{shard.stop - 1}<extra></extra>",
        )
        shown.add(shard.rank)
    fig.update_layout(
        barmode="overlay",
        height=120 + 28 * len(plan.table_sizes),
        xaxis_title="row",
        title=title or f"{plan.kind.value}-wise over {plan.world_size} ranks",
        yaxis_autorange="reversed",
        margin=dict(l=70, r=20, t=40, b=40),
    )
    return fig


def shard_table(source, plan, batch: int) -> Table:
    """Per rank: the distinct ids of global batch `batch` its shards own (its planner's working
    set: the rows that must be in its scratchpad before Train), its micro-batch's distinct ids,
    and how many of those go to each rank."""
    whole = source.batch(batch)
    head = ["rank", "rows owned", "owned ids in batch", "its samples' distinct ids"] + [
        f"to rank {r}" for r in range(plan.world_size)
    ]
    rows = []
    for rank in range(plan.world_size):
        routed = RoutedSource(source, plan, rank).batch(batch)
        route = Route.of(micro_batch(whole, rank, plan.world_size), plan)
        rows.append(
            [rank, f"{plan.rows_of(rank):,}", sum(len(i) for i in routed.ids), sum(route.sizes)]
            + [int(n) for n in route.split_sizes()]
        )
    return Table(head, rows, caption=f"global batch {batch}, {plan.kind.value}-wise over {plan.world_size} ranks")


def traffic_table(config, gpus: int) -> Table:
    """Bytes one rank sends per step, per exchange: the kit's (rows of distinct ids, dense
    all-gather) and TorchRec's (every lookup's id, pooled vectors, dense all-reduce)."""
    head = ["sharding", "scheme", "ids", "rows / pooled", "gradients", "dense", "total"]
    rows = []
    for sharding in ("table", "row"):
        try:
            work = measure_work(config, sharding, gpus)
        except ValueError:  # table-wise with more ranks than tables
            continue
        for scheme, sent in (
            ("kit: rows, exact", work.traffic),
            ("TorchRec: pooled", torchrec_traffic(config, sharding, gpus, work.lookups)),
        ):
            kib = [v / 1024 for v in sent.values()]
            rows.append([sharding, scheme, *(f"{k:,.1f} KiB" for k in kib), f"{sum(kib):,.1f} KiB"])
    return Table(head, rows, caption=f"per rank and step, {gpus} GPUs, batch {config.data.batch_size} per GPU")


def verify_table(results: list[dict]) -> Table:
    head = ["trainer", "ranks", "sharding", "max |diff|", "dense", "embeddings", "optimizer state", "passed"]
    rows = [
        [
            r["trainer"],
            r["world_size"],
            r["sharding"],
            f"{r['max_abs_diff']:.1e}",
            f"{r['dense_max_abs_diff']:.1e}",
            f"{r['embedding_max_abs_diff']:.1e}",
            f"{r['state_max_abs_diff']:.1e}",
            r["passed"],
        ]
        for r in results
    ]
    return Table(head, rows, caption=results[0]["reference"] if results else "")


def projection_figure(rows, torchrec_rows=(), title: str = "") -> go.Figure:
    """Samples/s against GPUs (log-log), a line per sharding; TorchRec's traffic dashed; a line
    where a job outgrows one server."""
    fig, server = go.Figure(), Links().gpus_per_server
    for dash, group, scheme in (("solid", rows, "kit"), ("dash", torchrec_rows, "TorchRec traffic")):
        for i, sharding in enumerate(("table", "row")):
            mine = [r for r in group if r.sharding == sharding]
            if mine:
                fig.add_scatter(
                    x=[r.gpus for r in mine],
                    y=[r.samples_per_s for r in mine],
                    mode="lines+markers",
                    line=dict(dash=dash, color=BATCH_COLOURS[i]),
                    name=f"{sharding}-wise, {scheme}",
                    customdata=np.array([[1e3 * r.step_seconds, r.bound] for r in mine], dtype=object),
                    hovertemplate="%{x} GPUs: %{y:,.0f} samples/s, %{customdata[0]:.2f} ms a "
                    "step, bound by %{customdata[1]}<extra></extra>",
                )
    fig.add_vline(x=server, line_dash="dot", line_color="grey")
    # a shape on a log axis takes its x as data, an annotation as log10 of it: the label is placed
    # at log10(8) (at 8 itself it would stand at 10**8 and stretch the axis out to there)
    fig.add_annotation(
        x=np.log10(server),
        y=1,
        yref="paper",
        text="one server",
        showarrow=False,
        xanchor="left",
        yanchor="top",
        xshift=4,
    )
    fig.update_layout(
        title=wrapped(title or "Projected samples/s (weak scaling: a batch per GPU)"),
        xaxis=dict(type="log", title="GPUs", dtick=np.log10(2)),
        yaxis=dict(type="log", title="samples/s", dtick="D2"),
        height=420,
        margin=dict(l=60, r=20, t=70, b=50),
    )
    return fig
