"""The course's tables, as HTML: a notebook draws them in its own width, columns that line up, with
no text wrapping a row onto two lines. (The command line prints the same data as text:
scratchkit/commands/tables.py.)

    bench_table(results, projections)   a column per trainer: samples/s, ratio, hit rate, ms per stage
    bound_table(projections)            which stage bounds each trainer on each hardware
    validation_table(validation)        the cost model beside the measurement, per trainer and stage
    sampling_table(samples)             exact vs SHARDS-sampled LRU curves: error and time
"""

from __future__ import annotations

import html

from scratchkit.trainers.registry import PEERS

STYLE = "border-collapse:collapse;font-size:12px;max-width:1000px;font-variant-numeric:tabular-nums"


class Table:
    """Rows of cells shown as an HTML table in a notebook (`_repr_html_`)."""

    def __init__(self, head: list[str], rows: list[list[str]], caption: str = ""):
        self.head, self.rows, self.caption = head, rows, caption

    def _repr_html_(self) -> str:
        cell = 'style="padding:2px 8px;text-align:{};white-space:nowrap"'
        align = lambda i: "left" if i == 0 else "right"
        head = "".join(f"<th {cell.format(align(i))}>{html.escape(h)}</th>" for i, h in enumerate(self.head))
        body = "".join(
            "<tr>"
            + "".join(f"<td {cell.format(align(i))}>{html.escape(str(c))}</td>" for i, c in enumerate(row))
            + "</tr>"
            for row in self.rows
        )
        caption = f"<caption style='text-align:left'>{html.escape(self.caption)}</caption>" if self.caption else ""
        return f'<table style="{STYLE}">{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def bench_table(results, projections: list[dict] | None = None) -> Table:
    """`run_bench`'s results (and `project_bench`'s projections) as one table: a column per trainer,
    a row per figure and per stage (ms per step), so six trainers and a dozen stages fit 1,000 px.
    Each machine's projections also give every trainer's speed over each peer's (hybrid's and
    prefetch-lru-device's: trainers/registry.py PEERS), where those ran."""
    stages = list(dict.fromkeys(k for r in results for k in r.stage_seconds))
    machines = list(projections[0]) if projections else []
    rows = [
        ["samples/s"] + [f"{r.samples_per_s:,.0f}" for r in results],
        ["ratio"] + [f"{r.ratio:.2f}" for r in results],
        ["hit rate"] + ["-" if r.hit_rate is None else f"{r.hit_rate:.3f}" for r in results],
    ]
    names = [r.trainer for r in results]
    for p in machines:
        rows += [
            [f"{p} samples/s"] + [f"{row[p].samples_per_s:,.0f}" for row in projections],
            [f"{p} ratio"] + [f"{row[p].ratio:.2f}" for row in projections],
            [f"{p} bound by"] + [row[p].bound_stage for row in projections],
        ]
        for peer in PEERS:  # the baseline on every core, the production cache
            if peer in names:
                base = projections[names.index(peer)][p].samples_per_s
                rows.append([f"{p} x {peer}"] + [f"{row[p].samples_per_s / base:.2f}" for row in projections])
    rows += [
        [f"{s} ms"] + ([f"{1000 * r.stage_seconds[s]:.2f}" if s in r.stage_seconds else "-" for r in results])
        for s in stages
    ]
    return Table([""] + [r.trainer for r in results], rows)


def bound_table(projections: list[dict]) -> Table:
    """Which stage bounds each trainer's step on each hardware (`project_bench`)."""
    machines = list(projections[0]) if projections else []
    return Table(
        ["trainer"] + machines,
        [[next(iter(row.values())).trainer] + [row[p].bound_stage for p in machines] for row in projections],
        caption="bound by: the stage that sets the step time",
    )


def validation_table(validation) -> Table:
    """A validation (scratchkit.measure.validate.Validation): per profile, trainer and stage, ms
    per step measured and predicted, the error, the share of the step, and whether the row is
    inside its bound; the caption is the verdict. (A {trainer: [StageError]} report of
    `costmodel.validate` gives the first five columns.)"""
    if isinstance(validation, dict):
        rows = [
            [
                trainer,
                r.stage,
                f"{1000 * r.measured:.3f}",
                "not modelled" if r.predicted is None else f"{1000 * r.predicted:.3f}",
                "-" if r.error is None else f"{100 * r.error:+.0f}%",
            ]
            for trainer, stages in validation.items()
            for r in stages
        ]
        return Table(["trainer", "stage", "measured ms", "predicted ms", "error"], rows)
    mark = {True: "yes", False: "NO", None: ""}
    rows = [
        [
            r.profile,
            r.trainer,
            r.stage,
            f"{1000 * r.measured_s:.3f}",
            "not modelled" if r.predicted_s is None else f"{1000 * r.predicted_s:.3f}",
            "-" if r.error is None else f"{100 * r.error:+.0f}%",
            f"{100 * r.share:.0f}%",
            mark[r.within],
        ]
        for r in validation.rows
    ]
    return Table(
        ["profile", "trainer", "stage", "measured ms", "predicted ms", "error", "of step", "within bound"],
        rows,
        caption=validation.verdict(),
    )


def sampling_table(samples) -> Table:
    """`analysis.sampled_lru`'s curves: what each rate lists, its error from 1/rate rows up, its time."""
    rows = [
        [
            "exact" if s.rate == 1.0 else f"{s.rate:g}",
            f"{s.curve.capacities.size:,}",
            f"{s.trusted_from:,}",
            f"{100 * s.mae:.2f}",
            f"{100 * s.max_error:.1f}",
            f"{1000 * s.seconds:.2f}",
        ]
        for s in samples
    ]
    return Table(
        [
            "sample rate",
            "capacities listed",
            "trusted from (rows)",
            "mean error (points)",
            "largest error (points)",
            "ms",
        ],
        rows,
        caption="Errors are hit-rate percentage points against the exact curve, at every capacity "
        "from the trusted one to the distinct ids.",
    )
