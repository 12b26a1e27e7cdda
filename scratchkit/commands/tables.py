"""The command line's text: the results model (scratchkit/measure/report.py) laid out in lined-up
columns, a notebook's HTML of the very same tables; and what only the command line prints (the
round checks, a machine's constants).
"""

from __future__ import annotations

from scratchkit.costmodel.hardware import GB, US, Hardware
from scratchkit.measure.report import Table, bench_tables, validation_table
from scratchkit.measure.round_checks import RoundCheck
from scratchkit.measure.validate import Validation


def lay_out(table: Table, transposed: bool = False) -> str:
    """`table` as text, columns lined up: its label columns left-aligned, the others right-aligned,
    then its notes. `transposed`: a row per column of the table (a trainer a row)."""
    head, rows, labels = table.head, table.rows, table.labels
    if transposed:
        columns = list(zip(head, *rows))
        head, rows, labels = list(columns[0]), [list(c) for c in columns[1:]], 1
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(
        str(c).ljust(w) if i < labels else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
    ).rstrip()
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows] + table.notes)


def format_table(results, projections: list[dict] | None = None) -> str:
    """`bench`'s two tables (measure/report.py `bench_tables`): a row per trainer, its figures (the
    seconds it took to make and to warm up apart from its timed steps among them) and each
    machine's projection (samples/s (ratio), the stage that bounds it, its speed over each
    peer that ran); then ms per step in each stage, a row per stage and a column per trainer."""
    figures, stages = bench_tables(results, projections)
    return lay_out(figures, transposed=True) + "\n\n" + lay_out(stages)


def format_validation(validation: Validation) -> str:
    """Per profile, trainer and stage, ms per step measured and predicted, the error and the share
    of the step, and whether the row is inside its bound ("NO": outside); then the notes and the
    verdict (measure/report.py `validation_table`)."""
    return lay_out(validation_table(validation))


def format_round_check(check: RoundCheck) -> str:
    """The checks against the run's own spread between rounds: a row per ratio (measured, predicted,
    error, spread, the bound and where it came from), a line per trainer naming the bound stage the
    model and the run say, every bounded stage outside, then the verdict."""
    pct = lambda x: f"{100 * x:+.0f}%"
    head = ["profile", "trainer / reference", "measured", "predicted", "error", "spread", "bound", ""]
    rows = [
        [
            r.profile,
            f"{r.trainer} / {r.reference}",
            f"{r.measured_ratio:.3f}",
            f"{r.predicted_ratio:.3f}",
            pct(r.error),
            f"{100 * r.spread:.0f}%",
            f"{100 * r.bound:.0f}% ({r.bound_from.value})",
            "" if r.within else "!",
        ]
        for r in check.ratio_rows
    ]
    bounds = [
        f"  {b.profile} {b.trainer}: model {b.predicted_stage}"
        + (f" ({b.predicted_resource})" if b.predicted_resource else "")
        + f", run {b.measured_stage}"
        + (f" ({b.measured_resource})" if b.measured_resource else "")
        + ("" if b.agree else "  !")
        for b in check.bound_rows
    ]
    outside = [
        f"  {r.profile} {r.trainer} {r.stage}: {pct(r.error)} ({100 * r.share:.0f}% of the step), spread "
        f"{100 * r.spread:.0f}%, bound {100 * r.bound:.0f}% ({r.bound_from.value})"
        for r in check.stage_rows
        if r.within is False
    ]
    return "\n".join(
        ["samples/s ratios, medians of the rounds:"]
        + [lay_out(Table(head, rows, labels=2))]
        + ["the stage that bounds each step:"]
        + bounds
        + (["stages outside their bound:"] + outside if outside else [])
        + [check.verdict()]
    )


def describe_hardware(machine: Hardware) -> str:
    """Several lines: every constant of a machine (curves at a few sizes) and its source."""
    src = lambda name: machine.sources.get(name, "")
    bw = lambda value: "no copy" if value == float("inf") else f"{value / GB:,.1f} GB/s"
    lines = [f"{machine.name}: {machine.description}", f"  origin: {machine.origin}" if machine.origin else ""]
    for name in ("host_stream_bw", "pcie_bw", "device_stream_bw"):
        lines.append(f"  {name:22s} {bw(getattr(machine, name)):>14s}  {src(name)}")
    rows = "not stated: as the copies" if machine.pcie_row_bw is None else bw(machine.pcie_row_bw)
    lines.append(f"  {'pcie_row_bw':22s} {rows:>14s}  {src('pcie_row_bw')}")
    for name in (
        "host_gather",
        "host_scatter",
        "host_lookup",
        "host_update",
        "device_gather",
        "device_scatter",
        "device_lookup",
        "device_update",
        "host_tbe_lookup",
        "host_tbe_backward",
        "host_tbe_update",
        "host_tbe_sort",
        "host_tbe_fused",
    ):
        curve = getattr(machine, name)
        at = (
            "not measured"
            if curve is None
            else "64 B rows, GB/s: "
            + ", ".join(
                f"{table} {curve.bandwidth(64, size) / GB:.1f}"
                for table, size in (("1 MiB", 2**20), ("64 MiB", 2**26), ("256 MiB", 2**28))
            )
        )
        lines.append(f"  {name:22s} {at}  {src(name)}")
    for name in ("host_sort", "host_numpy_sort", "device_sort"):
        curve = getattr(machine, name)
        at = ", ".join(f"{n}: {curve.at(n) / 1e6:,.0f}" for n in (2048, 82000))
        lines.append(f"  {name:22s} M key*log2(n)/s at n {at}  {src(name)}")
    select = machine.host_numpy_select
    lines.append(
        f"  {'host_numpy_select':22s} "
        + (
            "not measured: priced as a sort"
            if select is None
            else ", ".join(f"M keys/s at n {n}: {select.at(n) / 1e6:,.0f}" for n in (2048, 82000))
        )
        + f"  {src('host_numpy_select')}"
    )
    for name in ("host_sort_value_rate", "device_sort_value_rate"):
        lines.append(f"  {name:22s} {getattr(machine, name) / 1e6:>10,.1f} M floats/s  {src(name)}")
    curve = machine.device_activation_rate
    lines.append(
        f"  {'device_activation_rate':22s} M floats/s at 64k floats a step: {curve.at(2**16) / 1e6:,.0f}, "
        f"at 4M: {curve.at(2**22) / 1e6:,.0f}  {src('device_activation_rate')}"
    )
    for name in ("host_plan_lookup_rate", "host_plan_id_rate", "host_plan_miss_rate"):
        curve = getattr(machine, name)
        lines.append(
            f"  {name:22s} M/s per core, tables of 64k rows: {curve.at(2**16) / 1e6:,.1f}, "
            f"of 1M: {curve.at(2**20) / 1e6:,.1f}  {src(name)}"
        )
    slots = machine.host_plan_slot_rate
    lines.append(
        f"  {'host_plan_slot_rate':22s} "
        + (
            "not measured"
            if slots is None
            else f"M slots/s per core, scratchpads of 64k slots: {slots.at(2**16) / 1e6:,.1f}, "
            f"of 256k: {slots.at(2**18) / 1e6:,.1f}"
        )
        + f"  {src('host_plan_slot_rate')}"
    )
    probes = machine.device_map_probe_rate
    lines.append(
        f"  {'device_map_probe_rate':22s} "
        + (
            "not measured: priced as bucket reads"
            if probes is None
            else f"M probes/s, maps of 64k slots: {probes.at(2**16) / 1e6:,.1f}, of 1M: {probes.at(2**20) / 1e6:,.1f}"
        )
        + f"  {src('device_map_probe_rate')}"
    )
    for name in ("device_flops", "device_bmm_flops"):
        curve = getattr(machine, name)
        lines.append(
            f"  {name:22s} {curve.at(1e6) / 1e9:,.1f} GFLOP/s at 1 MFLOP a call, "
            f"{curve.at(1e8) / 1e9:,.1f} at 100  {src(name)}"
        )
    for name in ("host_op_latency", "host_numpy_op_latency", "pcie_latency", "device_op_latency"):
        lines.append(f"  {name:22s} {getattr(machine, name) / US:>11.1f} us  {src(name)}")
    for name in ("host_calls", "device_calls"):
        calls = ", ".join(f"{k} {v / US:.1f}" for k, v in getattr(machine, name).items())
        lines.append(f"  {name:22s} us: {calls}  {src(name)}")
    lines.append(f"  {'host_cores':22s} {machine.host_cores:>14d}  {src('host_cores')}")
    lines_per_s = machine.host_memory_line_rate
    at = "not stated: priced on cores" if lines_per_s is None else f"M lines/s: {lines_per_s / 1e6:,.0f}"
    lines.append(f"  {'host_memory_line_rate':22s} {at}  {src('host_memory_line_rate')}")
    cores = machine.co_run_cores
    at = "not measured: each side priced alone" if cores is None else f"{cores:.2f} cores at once"
    lines.append(f"  {'co_run_cores':22s} {at:>14s}  {src('co_run_cores')}")
    builds = ", ".join(machine.native_builds.values()) or "none recorded (a GPU server, or no compiler)"
    lines.append(f"  {'native_builds':22s} {builds}  (the C++ loops the curves were measured with)")
    return "\n".join(line for line in lines if line)
