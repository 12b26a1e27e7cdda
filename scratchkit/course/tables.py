"""The course's tables, as HTML: a notebook draws them in its own width, columns that line up, with
no text wrapping a row onto two lines. (The command line prints the same data as text:
scratchkit/commands/tables.py.)

    bench_table(results, projections)   one row per trainer: samples/s, ratio, hit rate, ms per stage
    validation_table(validation)        the cost model beside the measurement, per trainer and stage
"""
from __future__ import annotations

import html

STYLE = ("border-collapse:collapse;font-size:12px;max-width:1000px;"
         "font-variant-numeric:tabular-nums")


class Table:
    """Rows of cells shown as an HTML table in a notebook (`_repr_html_`)."""

    def __init__(self, head: list[str], rows: list[list[str]], caption: str = ""):
        self.head, self.rows, self.caption = head, rows, caption

    def _repr_html_(self) -> str:
        cell = 'style="padding:2px 8px;text-align:{};white-space:nowrap"'
        align = lambda i: "left" if i == 0 else "right"
        head = "".join(f"<th {cell.format(align(i))}>{html.escape(h)}</th>" for i, h in enumerate(self.head))
        body = "".join("<tr>" + "".join(f"<td {cell.format(align(i))}>{html.escape(str(c))}</td>"
                                        for i, c in enumerate(row)) + "</tr>" for row in self.rows)
        caption = f"<caption style='text-align:left'>{html.escape(self.caption)}</caption>" if self.caption else ""
        return f'<table style="{STYLE}">{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def bench_table(results, projections: list[dict] | None = None) -> Table:
    """`run_bench`'s results (and `project_bench`'s projections) as one table."""
    stages = list(dict.fromkeys(k for r in results for k in r.stage_seconds))
    profiles = list(projections[0]) if projections else []
    head = (["trainer", "samples/s", "ratio", "hit rate"]
            + [f"{p} {what}" for p in profiles for what in ("samples/s", "ratio", "bound by")]
            + [f"{s} ms" for s in stages])
    rows = [[r.trainer, f"{r.samples_per_s:,.0f}", f"{r.ratio:.2f}",
             "-" if r.hit_rate is None else f"{r.hit_rate:.3f}"]
            + [cell for p in profiles for cell in (f"{projections[i][p].samples_per_s:,.0f}",
                                                   f"{projections[i][p].ratio:.2f}",
                                                   projections[i][p].bound_stage)]
            + [f"{1000 * r.stage_seconds.get(s, 0.0):.2f}" for s in stages] for i, r in enumerate(results)]
    return Table(head, rows)


def validation_table(validation) -> Table:
    """A validation (scratchkit.measure.validate.Validation): per profile, trainer and stage, ms
    per step measured and predicted, the error, the share of the step, and whether the row is
    inside its bound; the caption is the verdict. (A {trainer: [StageError]} report of
    `costmodel.validate` gives the first five columns.)"""
    if isinstance(validation, dict):
        rows = [[trainer, r.stage, f"{1000 * r.measured:.3f}",
                 "not modelled" if r.predicted is None else f"{1000 * r.predicted:.3f}",
                 "-" if r.error is None else f"{100 * r.error:+.0f}%"]
                for trainer, stages in validation.items() for r in stages]
        return Table(["trainer", "stage", "measured ms", "predicted ms", "error"], rows)
    mark = {True: "yes", False: "NO", None: ""}
    rows = [[r.profile, r.trainer, r.stage, f"{1000 * r.measured_s:.3f}",
             "not modelled" if r.predicted_s is None else f"{1000 * r.predicted_s:.3f}",
             "-" if r.error is None else f"{100 * r.error:+.0f}%", f"{100 * r.share:.0f}%", mark[r.within]]
            for r in validation.rows]
    return Table(["profile", "trainer", "stage", "measured ms", "predicted ms", "error", "of step",
                  "within bound"], rows, caption=validation.verdict())
