"""The kit's results as tables: one model (`Table`: a head, rows of cells, a caption and notes), built
once here from what a run returns, and shown two ways: as text on the command line
(commands/tables.py `lay_out`), as HTML in a notebook (`Table._repr_html_`).

    bench_tables(results, projections)   (figures, stages): a column per trainer, a row per figure
                                         (measured, and each machine's projection), then ms per stage
    bench_table(results, projections)    both as one notebook view, split so each fits a page
    bound_table(projections)             which stage bounds each trainer on each machine
    validation_table(validation)         the cost model beside the measurement, per trainer and stage
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from scratchkit.designs import PEERS

STYLE = "border-collapse:collapse;font-size:12px;max-width:1000px;font-variant-numeric:tabular-nums"
# Stages in the order a batch meets them, whatever trainers ran: a row per stage, so a table's width
# follows the trainers (a column each), not the stages, and rows never change order.
STAGE_ORDER = (
    "data",
    "plan",
    "collect",
    "fetch",
    "prefetch",
    "write_back",
    "prefetch_write_back",
    "transfer",
    "insert",
    "embedding_forward",
    "mlp",
    "embedding_backward",
    "update",
    "train",
)


@dataclass
class Table:
    """Rows of cells under a head; the first `labels` columns name a row (left-aligned), the
    others hold its figures. `notes`: lines said under it (a verdict, where a machine came from)."""

    head: list[str]
    rows: list[list[str]]
    caption: str = ""
    notes: list[str] = field(default_factory=list)
    labels: int = 1

    def _repr_html_(self) -> str:
        cell = 'style="padding:2px 8px;text-align:{};white-space:nowrap"'
        align = lambda i: "left" if i < self.labels else "right"
        head = "".join(f"<th {cell.format(align(i))}>{html.escape(h)}</th>" for i, h in enumerate(self.head))
        body = "".join(
            "<tr>"
            + "".join(f"<td {cell.format(align(i))}>{html.escape(str(c))}</td>" for i, c in enumerate(row))
            + "</tr>"
            for row in self.rows
        )
        caption = f"<caption style='text-align:left'>{html.escape(self.caption)}</caption>" if self.caption else ""
        notes = "".join(f"<div style='font-size:12px'>{html.escape(n)}</div>" for n in self.notes)
        return f'<table style="{STYLE}">{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}'


@dataclass
class Tables:
    """Tables shown one after another (a notebook cell's one output)."""

    tables: list[Table]

    def _repr_html_(self) -> str:
        return "".join(t._repr_html_() for t in self.tables)


def over_peers(label: str, trainers: list[str], samples_per_s: list[float]) -> list[list[str]]:
    """A row per peer that ran ("x hybrid", "x lru-device", "x prefetch-lru-device"): every trainer's samples/s
    over that peer's. Hybrid is at its best: its host work on every core it is given."""
    rows = []
    for peer in PEERS:
        base = samples_per_s[trainers.index(peer)] if peer in trainers else 0.0
        if base > 0:
            rows.append([f"{label}x {peer}"] + [f"{s / base:.2f}" for s in samples_per_s])
    return rows


def bench_tables(results, projections: list[dict] | None = None) -> tuple[Table, Table]:
    """`run_bench`'s results (and `project_bench`'s projections, one {machine: Projection} per
    result) as (figures, stages), a column per trainer each: samples/s, the ratio to the first
    trainer, the hit rate ("-": no device cache), ms per step, the seconds it took to make and to
    warm up (apart from its timed steps), each machine's projected samples/s
    (ratio), the stage that bounds it and its speed over each peer that ran, then the measured
    speed over each peer; and ms per step in each stage ("-": the trainer has no such stage)."""
    names = [r.trainer for r in results]
    machines = list(projections[0]) if projections else []
    rows = [
        ["samples/s"] + [f"{r.samples_per_s:,.0f}" for r in results],
        ["ratio"] + [f"{r.ratio:.2f}" for r in results],
        ["hit rate"] + ["-" if r.hit_rate is None else f"{r.hit_rate:.3f}" for r in results],
        ["ms/step"] + [f"{1000 * r.seconds / max(r.steps, 1):.2f}" for r in results],
        ["setup s"] + [f"{r.setup_s:.2f}" for r in results],  # making it: apart from its timed steps
        ["warm-up s"] + [f"{r.warmup_s:.2f}" for r in results],
    ]
    rows += device_work_rows(results)
    for m in machines:
        projected = [row[m] for row in projections]
        rows += [
            [f"{m} (ratio)"] + [f"{p.samples_per_s:,.0f} ({p.ratio:.2f})" for p in projected],
            [f"{m} bound by"] + [p.bound_stage for p in projected],
        ]
        rows += over_peers(f"{m} ", names, [p.samples_per_s for p in projected])
    rows += over_peers("", names, [r.samples_per_s for r in results])
    seen = {k for r in results for k, v in r.stage_seconds.items() if v > 0}
    stages = [s for s in STAGE_ORDER if s in seen] + sorted(seen - set(STAGE_ORDER))
    stage_rows = [
        [s] + [f"{1000 * r.stage_seconds[s]:.2f}" if r.stage_seconds.get(s, 0) > 0 else "-" for r in results]
        for s in stages
    ]
    return Table(["trainer"] + names, rows), Table(["stage ms/step"] + names, stage_rows)


def device_work_rows(results) -> list[list[str]]:
    """What each trainer's counted step asked of the device (docs/cli.md): the host's waits and
    the kernels it queued on Train's path, and, where a trainer plans ahead, the same for Plan.
    None where no step was counted (`--warmup 0`)."""
    if all(r.host_syncs_per_step is None for r in results):
        return []
    cell = lambda v, f: "-" if v is None else f.format(v)
    rows = [
        ["waits/step"] + [cell(r.host_syncs_per_step, "{:.1f}") for r in results],
        ["launches/step"] + [cell(r.kernel_launches_per_step, "{:.0f}") for r in results],
    ]
    if any(r.plan_launches_per_step for r in results):
        ahead = lambda r, v, f: f.format(v) if r.plan_launches_per_step else "-"
        rows += [
            ["plan waits"] + [ahead(r, r.plan_syncs_per_step, "{:.1f}") for r in results],
            ["plan launches"] + [ahead(r, r.plan_launches_per_step, "{:.0f}") for r in results],
        ]
    return rows


def bench_table(results, projections: list[dict] | None = None, most: int = 6) -> Tables:
    """`bench_tables` as a notebook shows them, at most `most` trainers a table (six trainers fit
    1,000 px): ten trainers are two tables of five for the figures, two for the stages."""
    return Tables([part for table in bench_tables(results, projections) for part in split_columns(table, most)])


def split_columns(table: Table, most: int) -> list[Table]:
    """`table` as tables of at most `most` figure columns each, as even as they split, each with
    the columns that name its rows; the caption and notes go with the last."""
    figures = len(table.head) - table.labels
    parts = max(1, -(-figures // most))
    size = -(-figures // parts)
    label = lambda row: row[: table.labels]
    out = []
    for start in range(table.labels, len(table.head), max(size, 1)):
        cut = slice(start, start + size)
        out.append(
            Table(label(table.head) + table.head[cut], [label(r) + r[cut] for r in table.rows], labels=table.labels)
        )
    out = out or [Table(table.head, table.rows, labels=table.labels)]
    out[-1].caption, out[-1].notes = table.caption, table.notes
    return out


def bound_table(projections: list[dict]) -> Table:
    """Which stage bounds each trainer's step on each machine (`project_bench`)."""
    machines = list(projections[0]) if projections else []
    return Table(
        ["trainer"] + machines,
        [[next(iter(row.values())).trainer] + [row[m].bound_stage for m in machines] for row in projections],
        caption="bound by: the stage that sets the step time",
    )


def validation_table(validation, trainers=None) -> Table:
    """A validation (scratchkit.measure.validate.Validation; `trainers`: only theirs): per profile,
    trainer and stage, ms per step measured and predicted, the error, the share of the step and
    whether the row is inside its bound; the caption is the verdict, the notes where this-cpu came
    from and the machine's own spread."""
    shown = [r for r in validation.rows if trainers is None or r.trainer in trainers]
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
        for r in shown
    ]
    spread = validation.noise() + validation.repeatability_lines()
    beyond = (
        [
            f"{len(validation.beyond_the_machine())} of the {len(validation.failures())} rows outside "
            "are outside by more than the same trainer run twice differed on that stage"
        ]
        if validation.again and validation.failures()
        else []
    )
    notes = (
        [f"this-cpu: {validation.hardware}"]
        + (["the machine's spread:"] + [f"  {n}" for n in spread] if spread else [])
        + beyond
        + [validation.verdict()]
    )
    head = ["profile", "trainer", "stage", "measured ms", "predicted ms", "error", "of step", "within bound"]
    return Table(head, rows, caption=validation.verdict(), notes=notes, labels=3)
