"""`scratchkit calibrate`: measure this machine's constants with the kit's own operations.

Each constant of a `Hardware` is measured by running what the trainers run, at the sizes
they run it (torch on one thread, as `TrainConfig.cpu_threads` sets it):

    host_stream_bw          np.copyto of 64 MiB (read + write bytes)
    host_gather/_scatter    torch index_select / index_copy_ of rows of 64, 256, 512 B, and NumPy
                            take / fancy assignment of 8 B ids, from tables of 256 KiB to 256 MiB:
                            in-cache against beyond-cache, interpolated by the table's bytes
    host_calls              the fixed cost of each kit call (a lookup, a backward, an update per
                            optimizer, the dense step's base and per layer, a torch op, a NumPy
                            call, np.unique, a kernel of the .cu files as this CPU runs it) on
                            tiny inputs, where nothing else is left
    host_sort               embedding_backward (the kit's coalescing) at 512-128k lookups of dim
                            16 and 64: the part that grows with the dim is `host_sort_value_rate`,
                            the rest, in n log2 n, the sort rate at each n
    host_numpy_sort         np.unique(return_inverse, return_counts) at 512-128k ids
    host_numpy_select       np.partition (a demand cache's victim choice) at 512-128k keys
    device_flops            torch.mm at the MLPs' shapes; device_bmm_flops: the interaction's bmm
    host_plan_*             ScratchPipe's C++ planner (NativePlans): lookups/s seeing batches,
                            distinct ids/s and misses/s planning, slots/s choosing victims, and
                            its costs per table and batch (plan_timings.py)
    host_tbe_*              the table-batched C++ lookup, backward and SGD (tbe_timings.py), and
                            the fused path's sort and SGD (fused_timings.py)
    device_map_probe_rate   (no GPU) the kernels' hash map probed as scratchpipe-device's Plan
                            does, by the map's slots (plan_timings.py)
    co_run_cores            the cores two busy processes get at once (ScratchPipe's host process
                            and Train on a CPU run): one alone against two at once (co_run.py)

Times on the CPU are the calling thread's CPU time, the median of several runs, each after a
flush and on fresh inputs (kit_timings.py says why).
Where torch has CUDA (or when given a `Device`), the device and the link are measured as well,
with the same torch measurements run on the device (`measure_device`); without one the device
is the CPU itself (`device_is_host`) and nothing crosses a link.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable

import torch

from scratchkit.allocator import keep_step_memory
from scratchkit.embedding.table_batched import native_available
from scratchkit.calibration.co_run import co_run_cores
from scratchkit.costmodel.hardware import MB, Hardware, RowCurve
from scratchkit.calibration.kit_timings import (
    CALL_ROWS,
    FOOTPRINTS,
    ROW_BYTES,
    SORT_SIZES,
    Bench,
    activation_rate,
    call_latencies,
    coalesce_rates,
    link_rates,
    matmul_rates,
    row_curves,
    stream_bandwidth,
)
from scratchkit.calibration.plan_timings import (
    device_plan_table_seconds,
    handoff_call_seconds,
    map_probe_rate,
    plan_call_seconds,
    plan_rates,
    plan_slot_rate,
)
from scratchkit.calibration.fused_timings import fused_curves
from scratchkit.calibration.tbe_timings import BACKWARD_LOOKUPS, TBE_LOOKUPS, tbe_curves
from scratchkit.calibration.numpy_timings import (
    numpy_call_latencies,
    numpy_row_points,
    numpy_select_rate,
    numpy_sort_rate,
    numpy_stream_bandwidth,
)

Progress = Callable[[str], None]


def calibrate(
    quick: bool = False, progress: Progress | None = None, device=None, repeats: int | None = None
) -> Hardware:
    """Measure this machine (tens of seconds; `quick`: fewer sizes and repeats, a few seconds).
    `device`: a `scratchkit.device.Device` to measure as the device (None: CUDA where torch has
    it, else the CPU is the device). `progress(text)` hears each step as it starts. `repeats`:
    timed runs per figure on the host (default 7, quick 3; validation takes several calibrations
    of 3 on either side of a workload's trainers and their median: hardware.median_hardware)."""
    say = progress or (lambda _: None)
    keep_step_memory()  # the allocator the trainers run with (scratchkit/allocator.py)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        host, sources = measure_host(quick, say, repeats)
        if device is None and torch.cuda.is_available():
            from scratchkit.device import Device

            device = Device("cuda")
        if device is None:
            say("the scratchpad's hash map, as scratchpipe-device probes it on this CPU")
            probes, probe_source = map_probe_rate(quick)
            machine = replace(cpu_as_device(host, sources), device_map_probe_rate=probes)
            machine.sources["device_map_probe_rate"] = probe_source
        else:
            machine = measure_device(device, host, sources, quick, say)
        say("scratchpipe-device's Plan per table, beyond what the rest prices")
        table = {"device_plan_table": device_plan_table_seconds(machine)}
        machine = replace(machine, host_calls=machine.host_calls | table, device_calls=machine.device_calls | table)
    finally:
        torch.set_num_threads(threads)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return replace(
        machine,
        origin=f"calibrated {'(quick) ' if quick else ''}{when} on {machine_name()}",
        native_builds=loop_builds(),
    )


def loop_builds() -> dict[str, str]:
    """The builds of the C++ loops whose speed the hardware holds (the table-batched calls and
    ScratchPipe's planner), by library: where one has changed since, `this-cpu` measures afresh."""
    from scratchkit.embedding.table_batched import LOOPS
    from scratchkit.scratchpipe.plan_native import LOOP

    builds = {library.name: library.build_name() for library in (LOOPS, LOOP)}
    return {name: build for name, build in builds.items() if build is not None}


def machine_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            names = [line.split(":", 1)[1].strip() for line in info if line.startswith("model name")]
    except OSError:
        names = []
    return f"{names[0] if names else platform.processor() or 'unknown CPU'}, {os.cpu_count()} cores"


# ------------------------------------------------------------------------------------------ host
def measure_host(quick: bool, say: Progress, repeats: int | None = None) -> tuple[dict, dict[str, str]]:
    """Every host constant: (Hardware fields and the CPU's mm/bmm curves, their sources)."""
    bench = Bench(repeats=repeats or (3 if quick else 7))
    how = f"CPU time, median of {bench.repeats} runs, each after a 4 MiB flush"
    say("host memory: streaming copy of 64 MiB")
    host = {"host_stream_bw": numpy_stream_bandwidth(bench)}
    say("host memory: random rows from tables of 256 KiB to 256 MiB")
    gathers, scatters, lookups, updates = row_curves(bench, quick)
    id_gathers, id_scatters = numpy_row_points(bench, quick)
    host["host_gather"], host["host_scatter"] = (
        RowCurve(tuple(gathers + id_gathers)),
        RowCurve(tuple(scatters + id_scatters)),
    )
    host["host_lookup"], host["host_update"] = RowCurve(tuple(lookups)), RowCurve(tuple(updates))
    say("the fixed cost of each kit call (tiny inputs)")
    calls = call_latencies(bench) | numpy_call_latencies(bench)
    if native_available():
        say("the table-batched C++ calls (lookup, backward, SGD) over 8 tables")
        tbe_calls, host["host_tbe_lookup"], host["host_tbe_backward"], host["host_tbe_update"] = tbe_curves(
            bench, quick
        )
        calls |= tbe_calls
        say("the fused SGD path's calls (sort, then sum and update in one pass) over 8 tables")
        host |= fused_curves(bench, quick)
    say("sorting: embedding_backward and np.unique at 512 to 128k ids")
    host["host_sort"], host["host_sort_value_rate"] = coalesce_rates(bench, quick)
    host["host_numpy_sort"] = numpy_sort_rate(bench, quick, calls["unique"])
    host["host_numpy_select"] = numpy_select_rate(bench, quick)
    say("FLOP rate and the dense step at the MLPs' shapes")
    host["mm"], host["bmm"] = matmul_rates(bench, quick, calls["op"])
    host["activations"] = activation_rate(bench, quick, calls, host["mm"], host["bmm"], host["host_scatter"])
    say("ScratchPipe's planner on a synthetic stream")
    host["host_plan_slot_rate"], slot_source = plan_slot_rate(quick)
    (host["host_plan_lookup_rate"], host["host_plan_id_rate"], host["host_plan_miss_rate"], plan_source) = plan_rates(
        quick, host["host_plan_slot_rate"]
    )
    (
        calls["plan_table"],
        calls["plan_batch"],
        calls["plan_victims"],
        calls["plan_table_few"],
        calls["plan_victims_few"],
    ) = plan_call_seconds(bench, host)
    calls |= handoff_call_seconds(bench, host["host_stream_bw"])
    say("the cores two processes get at once (ScratchPipe's two sides on a CPU run)")
    host["co_run_cores"], co_run_source = co_run_cores(quick)
    host |= {
        "host_calls": calls,
        "host_op_latency": calls["op"],
        "host_numpy_op_latency": calls["numpy"],
        "host_cores": os.cpu_count() or 1,
    }
    rows = (
        f"of {CALL_ROWS[not quick]} random rows a call from tables of {FOOTPRINTS[not quick][0] // 1024} "
        f"KiB to {FOOTPRINTS[not quick][-1] // MB} MiB, less the same call's time on 2 rows"
    )
    sources = {
        "host_stream_bw": f"np.copyto of 64 MiB, read + write bytes, {how}",
        "host_gather": f"torch index_select (rows of {ROW_BYTES[not quick]} B) and np.take (8 B ids) {rows}, {how}",
        "host_scatter": f"torch index_copy_ and NumPy fancy assignment {rows}, {how}",
        "host_lookup": f"the kit's pooled_lookup (embedding_bag, bags of 8) {rows}, {how}",
        "host_update": f"the kit's apply_update (SGD) of distinct rows {rows}, {how}",
        "host_calls": f"each kit call on tiny inputs (scratchkit.embedding.optim, the dense step, NumPy), {how}",
        "host_op_latency": f"a torch index_select of 3 rows (the kit's generic host op), {how}",
        "host_numpy_op_latency": "mean of tiny NumPy calls: take, fancy assignment, flatnonzero, zeros",
        "host_sort": f"embedding_backward at {SORT_SIZES[not quick]} lookups less its time on 2 lookups "
        "and its per-float cost: keys x log2 n per second",
        "host_sort_value_rate": "embedding_backward's extra time at dim 64 over dim 16, per float",
        "host_numpy_sort": "np.unique(return_inverse, return_counts), less its fixed cost",
        "host_numpy_select": f"np.partition of int64 keys at 512-128k keys, less its time on 16, {how}",
        "host_plan_lookup_rate": plan_source,
        "host_plan_id_rate": plan_source,
        "host_plan_miss_rate": plan_source,
        "host_plan_slot_rate": slot_source,
        "host_cores": "os.cpu_count()",
        "co_run_cores": co_run_source,
    }
    if "host_tbe_lookup" in host:
        tbe = f"over 8 tables at {TBE_LOOKUPS[not quick]} lookups a call, less its time on 2 a table, {how}"
        backward = f"over 8 tables at {BACKWARD_LOOKUPS[not quick]} lookups a call, less its time on 2 a table, {how}"
        sources |= {
            "host_tbe_lookup": f"table_batched.pooled_lookup_tables (C++, bags of 8) {tbe}",
            "host_tbe_backward": f"table_batched.embedding_backward_tables (C++, one thread) into a workspace, "
            f"ids drawn from 4x and 1/8 of a table's lookups {backward}",
            "host_tbe_update": f"table_batched.apply_updates (C++ SGD) of distinct rows {tbe}",
            "host_tbe_sort": f"fused_sgd.sort_lookups (C++, one thread), ids as the backward's {backward}",
            "host_tbe_fused": f"fused_sgd.fused_sgd_update (C++ SGD) on those sorted lookups {backward}",
        }
    return host, sources


def cpu_as_device(host: dict, sources: dict[str, str]) -> Hardware:
    """No GPU: the device is the host's CPU, and nothing crosses a link."""
    same = "the CPU is the device (no GPU here)"
    own = {k: v for k, v in host.items() if k not in ("mm", "bmm", "activations")}
    return Hardware(
        name="this-cpu",
        description=f"this machine: {machine_name()}, no GPU (device = CPU)",
        device_activation_rate=host["activations"],
        **own,
        pcie_bw=float("inf"),
        pcie_latency=0.0,
        device_stream_bw=host["host_stream_bw"],
        device_gather=host["host_gather"],
        device_scatter=host["host_scatter"],
        device_lookup=host["host_lookup"],
        device_update=host["host_update"],
        device_op_latency=host["host_op_latency"],
        device_calls=host["host_calls"],
        device_sort=host["host_sort"],
        device_sort_value_rate=host["host_sort_value_rate"],
        device_flops=host["mm"],
        device_bmm_flops=host["bmm"],
        device_is_host=True,
        sources=sources
        | {
            "pcie_bw": "no copy: on a CPU-only machine device memory is host memory",
            "pcie_latency": "no copy",
            "device_flops": "torch.mm at the MLPs' shapes, less the op's fixed cost, CPU time",
            "device_bmm_flops": "torch.bmm of 1024 (T+1) x dim matrices, less the op's fixed cost, CPU time",
            "device_activation_rate": "the kit's dense step at the MLPs' shapes, inside gpu-only's steps: "
            "what its fixed costs and matmuls leave, over the floats its "
            "elementwise ops move, the stage timer reading CPU time",
        }
        | {
            k: same
            for k in (
                "device_stream_bw",
                "device_gather",
                "device_scatter",
                "device_lookup",
                "device_update",
                "device_op_latency",
                "device_calls",
                "device_sort",
                "device_sort_value_rate",
            )
        },
    )


# ------------------------------------------------------------------------------------------ device
def measure_device(dev, host: dict, sources: dict[str, str], quick: bool, say: Progress) -> Hardware:
    """The device and the link of `dev` (a scratchkit.device.Device: a GPU, or a stand-in in the
    tests), with the same torch measurements the CPU had, timed by the wall clock between two
    synchronisations of the device."""
    sync = dev.stage_synchronizer() or (lambda: None)
    bench = Bench(repeats=3 if quick else 7, to_device=dev.to_device, sync=sync, clock=time.perf_counter)
    how = f"wall time between device synchronisations, median of {bench.repeats}"
    say(f"device {dev.torch}: streaming copy")
    stream = stream_bandwidth(bench)
    say(f"device {dev.torch}: random rows")
    gathers, scatters, lookups, updates = row_curves(bench, quick)
    say(f"device {dev.torch}: the fixed cost of each kit call")
    calls = call_latencies(bench, device=dev)
    calls |= {
        k: host["host_calls"][k]
        for k in (
            "numpy",
            "unique",
            "plan_table",
            "plan_table_few",
            "plan_batch",
            "plan_victims",
            "plan_victims_few",
            "send_batch",
            "send_table",
            "receive_batch",
            "receive_table",
        )
    }  # on the host
    calls["kernel"] = calls["op"]  # assumption: a CuPy kernel's launch costs what a torch op's does
    calls["device_plan_table"] = host["host_calls"]["device_plan_table"]  # Python: on the host
    say(f"device {dev.torch}: sorting and FLOPs")
    sort, value_rate = coalesce_rates(bench, quick)
    mm, bmm = matmul_rates(bench, quick, calls["op"])
    activations = activation_rate(bench, quick, calls, mm, bmm, RowCurve(tuple(scatters)), device=dev)
    say(f"host <-> device {dev.torch}: pinned copies")
    up, down, copy_latency = link_rates(bench, dev, quick)
    own = {k: v for k, v in host.items() if k not in ("mm", "bmm", "activations")}
    name = device_name(dev)
    return Hardware(
        name="this-cpu",
        description=f"this machine: {machine_name()} + {name}",
        **own,
        pcie_bw=min(up, down),
        pcie_latency=copy_latency,
        device_stream_bw=stream,
        device_gather=RowCurve(tuple(gathers)),
        device_scatter=RowCurve(tuple(scatters)),
        device_lookup=RowCurve(tuple(lookups)),
        device_update=RowCurve(tuple(updates)),
        device_op_latency=calls["op"],
        device_calls=calls,
        device_sort=sort,
        device_sort_value_rate=value_rate,
        device_flops=mm,
        device_bmm_flops=bmm,
        device_activation_rate=activations,
        device_is_host=False,
        sources=sources
        | {
            "pcie_bw": f"pinned {'16' if quick else '64'} MiB copies: host->device {up / 1e9:.1f} GB/s, "
            f"device->host {down / 1e9:.1f} GB/s (the smaller kept), {how}",
            "pcie_latency": "a non-blocking copy of 8 bytes from pinned memory, per copy",
            "device_stream_bw": f"torch copy_ of 64 MiB on {name}, read + write bytes, {how}",
            "device_gather": f"torch index_select on {name}, same sizes as the host's, {how}",
            "device_scatter": f"torch index_copy_ on {name}, {how}",
            "device_lookup": f"the kit's pooled_lookup (embedding_bag) on {name}, bags of 8, {how}",
            "device_update": f"the kit's apply_update (SGD) on {name}, {how}",
            "device_op_latency": f"a tiny index_select on {name}, launched 200 times, {how}",
            "device_calls": f"each kit call on tiny inputs on {name}, {how}",
            "device_sort": f"embedding_backward on {name} at {SORT_SIZES[not quick]} lookups",
            "device_sort_value_rate": f"embedding_backward on {name}, dim 64 over dim 16",
            "device_flops": f"torch.mm at the MLPs' shapes on {name}",
            "device_bmm_flops": f"torch.bmm of 1024 (T+1) x dim matrices on {name}",
            "device_activation_rate": f"the kit's dense step at the MLPs' shapes inside gpu-only's steps on {name}",
        },
    )


def device_name(dev) -> str:
    """The GPU's name where torch knows it (a stand-in: its torch device)."""
    if dev.torch.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(dev.torch)
    return f"{dev.torch} ({type(dev.runtime).__name__})"
