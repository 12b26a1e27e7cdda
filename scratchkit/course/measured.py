"""Measured beside projected: what the trainers did on a real GPU, set beside what the cost model
projects for the very same steps (results/gpu-h200.json, written by scripts/gpu_record.py from a
GPU session's `scripts/gpu_check.sh` and benches; docs/gpu.md).

The headline (headline.py) is the model's; this is the check on it a GPU gives. Each row is one
trainer on one workload: its measured samples/s, the model's projection for the same server from
the run's own counters (`projected_now`: the current model, so the two move together as the model
is fixed), and measured over projected. Far below 1 means the kit's code on that GPU is far from
what the model says the design can do there: docs/gpu.md says where the time went.

    measured_rows(record)       (head, rows): a row per trainer, a column pair per workload
    measured_markdown(record)   the table and its caption in Markdown (the README, by scripts/render_results.py)
    measured_table(record)      the same as an HTML table (notebook 05)
    recorded()                  the record itself, or None where no GPU run is recorded
"""

from __future__ import annotations

import json
from pathlib import Path

from scratchkit.course.headline import markdown
from scratchkit.designs import DESIGNS
from scratchkit.measure.report import Table

RECORD = Path(__file__).resolve().parents[2] / "results" / "gpu-h200.json"


def recorded(path: Path = RECORD) -> dict | None:
    """The GPU record (scripts/gpu_record.py), or None where none is kept."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else None


def measured_rows(record: dict) -> tuple[list[str], list[list[str]]]:
    """A row per trainer any workload measured (in the designs' order), and per workload its
    measured and projected thousands of samples/s and their ratio ("-": not run there)."""
    benches = record["figures"]["benches"]
    ran = {t for rows in benches.values() for t in rows}
    head = ["trainer"] + [f"{w}: measured / projected" for w in benches]

    def cell(row: dict | None) -> str:
        if row is None:
            return "-"
        measured, projected = row["measured_samples_per_s"], row["projected_now"]
        return f"{measured / 1000:,.0f}k / {projected / 1000:,.0f}k = {measured / projected:.2f}"

    rows = [[t] + [cell(rows.get(t)) for rows in benches.values()] for t in DESIGNS if t in ran]
    return head, rows


def caption(record: dict) -> str:
    return (
        f"measured on {record['machine'].split(' (')[0]} at commit {record['commit']} "
        "(results/gpu-h200.json: the commands, the check's sections and every stage), beside the "
        "cost model's projection for the same server from the run's own counters"
    )


def measured_markdown(record: dict) -> str:
    return "\n".join(markdown(*measured_rows(record)) + ["", caption(record) + "."])


def measured_table(record: dict) -> Table:
    head, rows = measured_rows(record)
    return Table(head, rows, caption=caption(record))
