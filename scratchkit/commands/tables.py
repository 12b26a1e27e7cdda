"""The command line's text tables: one row per trainer, profile or stage, columns lined up.

Formatting lives here, with the commands that print it; the measurements (scratchkit/measure)
return data. The notebooks show the same data as HTML (scratchkit/course).
"""
from __future__ import annotations

from scratchkit.measure.costmodel import StageError
from scratchkit.measure.hardware import GB, US, HardwareProfile


# Stages in the order a batch meets them, whatever trainers ran: a row per stage, so the table's
# width follows the trainers (a column each), not the stages, and rows never change order.
STAGE_ORDER = ("data", "plan", "collect", "fetch", "write_back", "transfer", "insert",
               "embedding_forward", "mlp", "embedding_backward", "update", "train")


def _lay_out(head: list[str], rows: list[list[str]]) -> list[str]:
    """Columns lined up: the first left-aligned, the others right-aligned."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]


def format_table(results: list[BenchResult], projections: list[dict] | None = None) -> str:
    """Two plain-text tables: one row per trainer (samples/s, ratio, hit rate, ms per step and
    any projections), then ms per step in each stage, one row per stage and a column per trainer
    ("-": the trainer has no such stage). `hit rate` is "-" for a trainer with no device cache.

    `projections` (from `scratchkit.measure.costmodel.project_bench`), one {profile: Projection} per
    result, add a column per profile, projected samples/s (ratio), and a line per profile
    naming the stage that bounds each trainer.
    """
    profiles = list(projections[0]) if projections else []
    head = ["trainer", "samples/s", "ratio", "hit rate", "ms/step"] + [f"{p} (ratio)" for p in profiles]
    rows = [[r.trainer, f"{r.samples_per_s:,.0f}", f"{r.ratio:.2f}",
             "-" if r.hit_rate is None else f"{r.hit_rate:.3f}",
             f"{1000 * r.seconds / max(r.steps, 1):.2f}"]
            + [f"{projections[i][p].samples_per_s:,.0f} ({projections[i][p].ratio:.2f})"
               for p in profiles] for i, r in enumerate(results)]
    bounds = [f"{p} bound by: " + ", ".join(f"{r.trainer} {projections[i][p].bound_stage}"
                                            for i, r in enumerate(results)) for p in profiles]
    seen = {k for r in results for k, v in r.stage_seconds.items() if v > 0}
    stages = [s for s in STAGE_ORDER if s in seen] + sorted(seen - set(STAGE_ORDER))
    stage_rows = [[s] + [f"{1000 * r.stage_seconds[s]:.2f}" if r.stage_seconds.get(s, 0) > 0
                                 else "-" for r in results] for s in stages]
    stage_table = _lay_out(["stage ms/step"] + [r.trainer for r in results], stage_rows)
    return "\n".join(_lay_out(head, rows) + bounds + [""] + stage_table)


def format_validation(report: dict[str, list[StageError]]) -> str:
    """A plain-text table: ms per step measured and predicted, and the relative error."""
    lines = [f"{'trainer':12s} {'stage':20s} {'measured ms':>12s} {'predicted ms':>13s} {'error':>8s}"]
    for trainer, rows in report.items():
        for r in rows:
            pred = "not modelled" if r.predicted is None else f"{1000 * r.predicted:.3f}"
            err = "-" if r.error is None else f"{100 * r.error:+.0f}%"
            lines.append(f"{trainer:12s} {r.stage:20s} {1000 * r.measured:12.3f} {pred:>13s} {err:>8s}")
    return "\n".join(lines)


def describe_hardware(hw: HardwareProfile) -> str:
    """Several lines: every number of a hardware profile and where it comes from."""
    lines = [f"{hw.name}: {hw.description}"]
    for name in ("host_stream_bw", "host_gather_bw", "pcie_bw", "device_stream_bw", "device_gather_bw"):
        value = getattr(hw, name)
        shown = "no copy" if value == float("inf") else f"{value / GB:,.1f} GB/s"
        lines.append(f"  {name:18s} {shown:>14s}  {hw.sources.get(name, '')}")
    for name in ("host_sort_rate", "device_sort_rate"):
        lines.append(f"  {name:18s} {getattr(hw, name) / 1e6:>8,.0f} Mkey/s  {hw.sources.get(name, '')}")
    lines.append(f"  {'device_flops':18s} {hw.device_flops / 1e12:>9.2f} TFLOP/s  {hw.sources.get('device_flops', '')}")
    for name in ("host_op_latency", "pcie_latency", "device_op_latency"):
        lines.append(f"  {name:18s} {getattr(hw, name) / US:>11.1f} us  {hw.sources.get(name, '')}")
    lines.append(f"  {'host_cores':18s} {hw.host_cores:>14d}  {hw.sources.get('host_cores', '')}")
    return "\n".join(lines)
