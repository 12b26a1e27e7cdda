"""The command line's text tables: one row per trainer, machine, workload or stage, columns lined up.

Formatting lives here, with the commands that print it; the measurements (scratchkit/measure)
return data. The notebooks show the same data as HTML (scratchkit/course).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scratchkit.projection.hardware import GB, US, Hardware
from scratchkit.measure.round_checks import RoundCheck
from scratchkit.measure.validate import Validation
from scratchkit.trainers.registry import PEERS

if TYPE_CHECKING:
    from scratchkit.measure.bench import BenchResult


# Stages in the order a batch meets them, whatever trainers ran: a row per stage, so the table's
# width follows the trainers (a column each), not the stages, and rows never change order.
STAGE_ORDER = (
    "data",
    "plan",
    "collect",
    "fetch",
    "write_back",
    "transfer",
    "insert",
    "embedding_forward",
    "mlp",
    "embedding_backward",
    "update",
    "train",
)


def _lay_out(head: list[str], rows: list[list[str]]) -> list[str]:
    """Columns lined up: the first left-aligned, the others right-aligned."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(
        str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
    )
    return [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]


def format_table(results: list[BenchResult], projections: list[dict] | None = None) -> str:
    """Two plain-text tables: one row per trainer (samples/s, ratio, hit rate, ms per step, the
    seconds it took to make and to warm up, apart from its timed steps, and any projections),
    then ms per step in each stage, one row per stage and a column per trainer ("-": the trainer
    has no such stage). `hit rate` is "-" for a trainer with no device cache.

    `projections` (from `scratchkit.projection.costmodel.project_bench`), one {machine: Projection} per
    result, add a column per machine, projected samples/s (ratio), and a line per machine
    naming the stage that bounds each trainer. Where a peer ran (hybrid, prefetch-lru-device:
    trainers/registry.py PEERS), a line (measured, and per machine) gives every other trainer's
    speed over its (`versus_peers`).
    """
    machines = list(projections[0]) if projections else []
    head = ["trainer", "samples/s", "ratio", "hit rate", "ms/step", "setup s", "warm-up s"]
    head += [f"{p} (ratio)" for p in machines]
    rows = [
        [
            r.trainer,
            f"{r.samples_per_s:,.0f}",
            f"{r.ratio:.2f}",
            "-" if r.hit_rate is None else f"{r.hit_rate:.3f}",
            f"{1000 * r.seconds / max(r.steps, 1):.2f}",
            f"{r.setup_s:.2f}",
            f"{r.warmup_s:.2f}",
        ]
        + [f"{projections[i][p].samples_per_s:,.0f} ({projections[i][p].ratio:.2f})" for p in machines]
        for i, r in enumerate(results)
    ]
    bounds = [
        f"{p} bound by: " + ", ".join(f"{r.trainer} {projections[i][p].bound_stage}" for i, r in enumerate(results))
        for p in machines
    ]
    bounds += [
        line
        for p in machines
        for line in versus_peers(
            p, [r.trainer for r in results], [projections[i][p].samples_per_s for i in range(len(results))]
        )
    ]
    seen = {k for r in results for k, v in r.stage_seconds.items() if v > 0}
    stages = [s for s in STAGE_ORDER if s in seen] + sorted(seen - set(STAGE_ORDER))
    stage_rows = [
        [s] + [f"{1000 * r.stage_seconds[s]:.2f}" if r.stage_seconds.get(s, 0) > 0 else "-" for r in results]
        for s in stages
    ]
    stage_table = _lay_out(["stage ms/step"] + [r.trainer for r in results], stage_rows)
    measured = versus_peers("measured", [r.trainer for r in results], [r.samples_per_s for r in results])
    return "\n".join(_lay_out(head, rows) + measured + bounds + device_work_line(results) + [""] + stage_table)


def device_work_line(results: list[BenchResult]) -> list[str]:
    """A line: each trainer's host waits / kernel launches a step on Train's path (a counted step),
    and, where stages run ahead of Train, theirs ("ahead"). Nothing without a counted step."""
    counted = [r for r in results if r.host_syncs_per_step is not None]
    if not counted:
        return []
    ahead = lambda r: (
        f" (ahead {r.plan_syncs_per_step:.1f} / {r.plan_launches_per_step:.0f})" if r.plan_launches_per_step else ""
    )
    parts = [f"{r.trainer} {r.host_syncs_per_step:.0f} / {r.kernel_launches_per_step:.0f}{ahead(r)}" for r in counted]
    return ["host waits / launches a step (docs/cli.md): " + ", ".join(parts)]


def versus_peers(label: str, trainers: list[str], samples_per_s: list[float]) -> list[str]:
    """A line per peer in the run ("x hybrid", "x prefetch-lru-device"): every other trainer's
    samples/s over that peer's. Hybrid is at its best: its host work on every core it is given."""
    lines = []
    for peer in PEERS:
        if peer in trainers:
            base = samples_per_s[trainers.index(peer)]
            others = [f"{t} {s / base:.2f}" for t, s in zip(trainers, samples_per_s) if t != peer]
            if others and base > 0:
                lines.append(f"{label} x {peer}: " + ", ".join(others))
    return lines


def format_validation(validation: Validation) -> str:
    """A plain-text table: per profile, trainer and stage, ms per step measured and predicted, the
    error and the share of the step; `!` marks a row outside its bound. Then the verdict."""
    head = ["profile", "trainer", "stage", "measured ms", "predicted ms", "error", "of step", ""]
    rows = [
        [
            r.profile,
            r.trainer,
            r.stage,
            f"{1000 * r.measured_s:.3f}",
            "not modelled" if r.predicted_s is None else f"{1000 * r.predicted_s:.3f}",
            "-" if r.error is None else f"{100 * r.error:+.0f}%",
            f"{100 * r.share:.0f}%",
            "!" if r.within is False else "",
        ]
        for r in validation.rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(
        str(c).rjust(w) if 3 <= i <= 6 else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
    ).rstrip()
    noise = validation.noise() + validation.repeatability_lines()
    beyond = (
        [
            f"{len(validation.beyond_the_machine())} of the {len(validation.failures())} rows outside "
            "are outside by more than the same trainer run twice differed on that stage"
        ]
        if validation.again and validation.failures()
        else []
    )
    return "\n".join(
        [line(head), line(["-" * w for w in widths])]
        + [line(r) for r in rows]
        + [f"this-cpu: {validation.hardware}"]
        + (["the machine's spread:"] + [f"  {n}" for n in noise] if noise else [])
        + beyond
        + [validation.verdict()]
    )


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
        + _lay_out(head, rows)
        + ["the stage that bounds each step:"]
        + bounds
        + (["stages outside their bound:"] + outside if outside else [])
        + [check.verdict()]
    )


def describe_hardware(hw: Hardware) -> str:
    """Several lines: every constant of a machine (curves at a few sizes) and its source."""
    src = lambda name: hw.sources.get(name, "")
    bw = lambda value: "no copy" if value == float("inf") else f"{value / GB:,.1f} GB/s"
    lines = [f"{hw.name}: {hw.description}", f"  origin: {hw.origin}" if hw.origin else ""]
    for name in ("host_stream_bw", "pcie_bw", "device_stream_bw"):
        lines.append(f"  {name:22s} {bw(getattr(hw, name)):>14s}  {src(name)}")
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
    ):
        curve = getattr(hw, name)
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
        curve = getattr(hw, name)
        at = ", ".join(f"{n}: {curve.at(n) / 1e6:,.0f}" for n in (2048, 82000))
        lines.append(f"  {name:22s} M key*log2(n)/s at n {at}  {src(name)}")
    select = hw.host_numpy_select
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
        lines.append(f"  {name:22s} {getattr(hw, name) / 1e6:>10,.1f} M floats/s  {src(name)}")
    curve = hw.device_activation_rate
    lines.append(
        f"  {'device_activation_rate':22s} M floats/s at 64k floats a step: {curve.at(2**16) / 1e6:,.0f}, "
        f"at 4M: {curve.at(2**22) / 1e6:,.0f}  {src('device_activation_rate')}"
    )
    for name in ("host_plan_lookup_rate", "host_plan_id_rate", "host_plan_miss_rate"):
        curve = getattr(hw, name)
        lines.append(
            f"  {name:22s} M/s per core, tables of 64k rows: {curve.at(2**16) / 1e6:,.1f}, "
            f"of 1M: {curve.at(2**20) / 1e6:,.1f}  {src(name)}"
        )
    slots = hw.host_plan_slot_rate
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
    probes = hw.device_map_probe_rate
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
        curve = getattr(hw, name)
        lines.append(
            f"  {name:22s} {curve.at(1e6) / 1e9:,.1f} GFLOP/s at 1 MFLOP a call, "
            f"{curve.at(1e8) / 1e9:,.1f} at 100  {src(name)}"
        )
    for name in ("host_op_latency", "host_numpy_op_latency", "pcie_latency", "device_op_latency"):
        lines.append(f"  {name:22s} {getattr(hw, name) / US:>11.1f} us  {src(name)}")
    for name in ("host_calls", "device_calls"):
        calls = ", ".join(f"{k} {v / US:.1f}" for k, v in getattr(hw, name).items())
        lines.append(f"  {name:22s} us: {calls}  {src(name)}")
    lines.append(f"  {'host_cores':22s} {hw.host_cores:>14d}  {src('host_cores')}")
    lines_per_s = hw.host_memory_line_rate
    at = "not stated: priced on cores" if lines_per_s is None else f"M lines/s: {lines_per_s / 1e6:,.0f}"
    lines.append(f"  {'host_memory_line_rate':22s} {at}  {src('host_memory_line_rate')}")
    cores = hw.co_run_cores
    at = "not measured: each side priced alone" if cores is None else f"{cores:.2f} cores at once"
    lines.append(f"  {'co_run_cores':22s} {at:>14s}  {src('co_run_cores')}")
    builds = ", ".join(hw.native_builds.values()) or "none recorded (a GPU server, or no compiler)"
    lines.append(f"  {'native_builds':22s} {builds}  (the C++ loops the curves were measured with)")
    return "\n".join(line for line in lines if line)
