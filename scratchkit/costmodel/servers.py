"""GPU servers for the cost model, every constant with its source beside it.

    v100-pcie3   NVIDIA V100 PCIe on PCIe 3.0 x16, Xeon Gold 6248 host (Cascade Lake, DDR4-2933)
    a100-pcie4   NVIDIA A100 80GB PCIe on PCIe 4.0 x16, EPYC 7742 host (Rome, DDR4-3200)
    h100-pcie5   NVIDIA H100 80GB PCIe on PCIe 5.0 x16, Xeon Platinum 8480+ host (Sapphire Rapids, DDR5-4800)
    h100-sxm5    NVIDIA H100 80GB SXM5 (HBM3) on PCIe 5.0 x16, a DGX H100's Xeon Platinum 8480C host
    h200         NVIDIA H200 (SXM, HBM3e) on PCIe 5.0 x16 to the host, Xeon Platinum 8480+ host

How the datasheet peaks are derated to what the kit's operations reach:

- device memory, streaming: a published copy microbenchmark where there is one (Jia et al. 2018
  for the V100; this workplace's own reading for the H200), else 85% of the datasheet's peak,
  what BabelStream-style copies reach on HBM GPUs (an assumption, named as such).
- device memory, random rows: a row of 64 B touches two 32 B sectors of a 128 B line and misses
  DRAM's open rows, so random rows beyond the L2 reach half the streaming figure (assumption);
  rows of a table inside the L2 move at half the L2's published bandwidth (assumption, same reason).
- FLOPs: the float32 peak (torch's default float32 matmul uses no TF32 tensor cores) at 80% for
  the MLPs' matmuls (cuBLAS SGEMM reaches 80-90% on large shapes: assumption at the low end); the
  interaction's batched tiny matrices at 10% (assumption: (T+1) x dim matrices of a few KFLOP
  each leave most of the GPU idle).
- kernel launch: the fixed cost of one eager op, 5-8 us (CUDA's launch of ~4 us plus PyTorch's
  dispatch on the server's core: assumption); each kit call costs its kernels
  (hardware.CALL_OPS) times this.
- PCIe: per direction, what pinned `cudaMemcpyAsync` reaches (NVIDIA's bandwidthTest class of
  figure): ~80% of the link's raw rate after encoding and packet headers (assumption), each
  direction at once (PCIe is full duplex).
- what no datasheet says (gpu_figures.py, each figure with its source): rows a kernel reads over
  the link in lookup order (`pcie_row_bw`), a device sort's fixed part and rate, a kernel of the
  .cu files' launch.
- the host: `host_cores` is one GPU's share of its server's cores (the vendor's 8-GPU system
  datasheet: cores / GPUs), or with `HostShare.SOCKET` a whole socket's (the CPU's datasheet: a
  hybrid given a CPU of its own, as a one-GPU server or a paper's testbed gives it); the
  host's memory system likewise, one GPU's share of the DRAM channels or a socket's. Per core, the kit's host operations (one thread each: gathers,
  NumPy calls, the planner) run at the speeds `scratchkit calibrate` measured on an Ice Lake-SP
  Xeon core (host_core.json beside this module, with its provenance; assumption: a server core of these generations runs them alike,
  within the spread a faster clock or a slower memory makes).
- the host's memory system: hybrid's embedding work spreads over `host_cores`, but all of them
  together draw random rows from one GPU's share of the server's DRAM channels
  (`host_memory_line_rate`, designs/host_threads.py): channels per GPU (the CPU's datasheet:
  channels per socket x sockets / GPUs) x a channel's random 64 B line rate, taken as half its
  peak (transfers/s x 8 B / 64 B): a random line opens a DRAM row and turns the bus around, and
  loaded-latency benchmarks of random 64 B reads (Intel MLC's class) reach about half a channel's
  peak (assumption).
"""

from __future__ import annotations

import json
from enum import Enum
from functools import cache
from pathlib import Path

from scratchkit.choices import Registry
from scratchkit.costmodel.gpu_figures import kernel_launch, link_row_bw, sort_curve
from scratchkit.costmodel.hardware import GB, MB, US, Hardware, RateCurve, RowCurve, calls_from_ops, field_from_json

HOST_CORE_FILE = Path(__file__).with_name("host_core.json")


@cache
def host_core() -> tuple[dict, dict[str, str]]:
    """One host core's fields of `Hardware` (host_core.json's `fields`, typed) and each one's
    source: the command, the machine that measured it, the dates, and the assumption."""
    data = json.loads(HOST_CORE_FILE.read_text())
    machines = data["machine"]

    def source(name: str) -> str:
        machine = machines.get(name, machines["default"])
        note = f"; {data['notes'][name]}" if name in data["notes"] else ""
        return (
            f"{data['command']} on {machine}, {data['date']}{note} ({HOST_CORE_FILE.name}); "
            "assumption: a server core of these generations runs it alike"
        )

    return (
        {name: field_from_json(name, value) for name, value in data["fields"].items()},
        {name: source(name) for name in data["fields"]},
    )


# Each server's own figures, with their sources. `link`: the PCIe link's raw rate per direction
# (pinned copies reach 80% of it); `launch`: the eager op's fixed cost on that server's cores.
# A server of your own: `SERVERS.register(name, dict(...))` with the same keys; every command's
# machines, the projection and the benchmarks read this registry.
SERVERS: Registry[dict] = Registry(
    "hardware ",
    {
        "v100-pcie3": dict(
            description="V100 PCIe 32GB on PCIe 3.0 x16; 2x Xeon Gold 6248 (Cascade Lake, 20 cores, DDR4-2933)",
            cores=(10, "assumption: a 4-GPU server with 2x 20-core Xeon Gold 6248 gives each GPU 10 cores"),
            socket=(20, 6, "Xeon Gold 6248 datasheet: 20 cores, 6 channels of DDR4-2933"),
            memory=(3, 2933e6, "Xeon Gold 6248 datasheet: 6 channels of DDR4-2933 per socket; 2 sockets for 4 GPUs"),
            stream=(
                750 * GB,
                "Jia et al. 2018, 'Dissecting the NVIDIA Volta GPU Architecture via "
                "Microbenchmarking': 750 GB/s measured (datasheet: 900 GB/s HBM2)",
            ),
            l2=(6 * MB, 2155 * GB, "V100 datasheet: 6 MB L2; Jia et al. 2018: 2155 GB/s L2 bandwidth"),
            fp32=(14e12, "V100 PCIe datasheet: 14 TFLOP/s float32"),
            link=(15.75 * GB, "PCIe 3.0 x16: 15.75 GB/s per direction"),
            launch=8 * US,
            copy_latency=10 * US,
        ),
        "a100-pcie4": dict(
            description="A100 80GB PCIe on PCIe 4.0 x16; 2x EPYC 7742 (Rome, 64 cores, DDR4-3200)",
            cores=(16, "DGX A100 datasheet: 2x 64-core EPYC 7742 for 8 GPUs, 16 cores per GPU"),
            socket=(64, 8, "EPYC 7742 datasheet: 64 cores, 8 channels of DDR4-3200"),
            memory=(2, 3200e6, "EPYC 7742 datasheet: 8 channels of DDR4-3200 per socket; 2 sockets for 8 GPUs"),
            stream=(0.85 * 1935 * GB, "A100 80GB PCIe datasheet: 1,935 GB/s HBM2e; assumption: 85% reached by copies"),
            l2=(40 * MB, 4000 * GB, "A100 datasheet: 40 MB L2; assumption: ~4 TB/s L2 bandwidth"),
            fp32=(19.5e12, "A100 datasheet: 19.5 TFLOP/s float32 (no TF32: torch's default for float32 matmul)"),
            link=(31.5 * GB, "PCIe 4.0 x16: 31.5 GB/s per direction"),
            launch=6 * US,
            copy_latency=8 * US,
        ),
        "h100-pcie5": dict(
            description="H100 80GB PCIe on PCIe 5.0 x16; 2x Xeon Platinum 8480+ (Sapphire Rapids, 56 cores, DDR5-4800)",
            cores=(14, "DGX H100 datasheet: 2x 56-core Xeon 8480C for 8 GPUs, 14 cores per GPU"),
            socket=(56, 8, "Xeon Platinum 8480+ datasheet: 56 cores, 8 channels of DDR5-4800"),
            memory=(
                2,
                4800e6,
                "Xeon Platinum 8480+ datasheet: 8 channels of DDR5-4800 per socket; 2 sockets for 8 GPUs",
            ),
            stream=(0.85 * 2000 * GB, "H100 PCIe datasheet: 2.0 TB/s HBM2e; assumption: 85% reached by copies"),
            l2=(50 * MB, 5500 * GB, "H100 datasheet: 50 MB L2; assumption: ~5.5 TB/s L2 bandwidth"),
            fp32=(51e12, "H100 PCIe datasheet: 51 TFLOP/s float32"),
            link=(63 * GB, "PCIe 5.0 x16: 63 GB/s per direction"),
            launch=5 * US,
            copy_latency=8 * US,
        ),
        "h200": dict(
            description="H200 141GB (SXM, HBM3e) on PCIe 5.0 x16 to the host; 2x Xeon Platinum 8480+",
            cores=(14, "DGX H200 datasheet: 2x 56-core Xeon 8480C for 8 GPUs, 14 cores per GPU"),
            socket=(56, 8, "Xeon Platinum 8480+ datasheet: 56 cores, 8 channels of DDR5-4800"),
            memory=(
                2,
                4800e6,
                "Xeon Platinum 8480+ datasheet: 8 channels of DDR5-4800 per socket; 2 sockets for 8 GPUs",
            ),
            stream=(
                4300 * GB,
                "read on an H200 of this workplace: a torch device "
                "copy moved 4.3 TB/s read + write (datasheet: 4.8 TB/s HBM3e)",
            ),
            l2=(60 * MB, 7000 * GB, "torch on this workplace's H200 reported 60 MB of L2; assumption: ~7 TB/s"),
            fp32=(67e12, "H200 datasheet: 67 TFLOP/s float32 (the H100 SXM's)"),
            link=(63 * GB, "PCIe 5.0 x16: 63 GB/s per direction"),
            launch=5 * US,
            copy_latency=8 * US,
        ),
    },
)

# The H100 the published measurements ran on (results/published-gpu.json): h100-pcie5's host (a DGX
# H100's, already), link, L2 and launch; its own HBM3 and clocks
SERVERS.register(
    "h100-sxm5",
    SERVERS["h100-pcie5"]
    | dict(
        description="H100 80GB SXM5 (HBM3) on PCIe 5.0 x16 to the host; 2x Xeon Platinum 8480C (Sapphire Rapids, 56 cores, DDR5-4800)",
        stream=(0.85 * 3350 * GB, "H100 SXM5 datasheet: 3.35 TB/s HBM3; assumption: 85% reached by copies"),
        fp32=(67e12, "H100 SXM5 datasheet: 67 TFLOP/s float32"),
    ),
)


class HostShare(Enum):
    """Which share of a GPU server's host prices the host's work (hybrid's embedding stages)."""

    GPU = "gpu"  # one GPU's share of the server's cores and DRAM channels: the GPUs share the host
    SOCKET = "socket"  # a whole socket's cores and channels: a host of its own for one GPU


RANDOM_LINE_SHARE = 0.5  # of a DRAM channel's peak that random 64 B lines reach (module note)
LINE_BYTES = 64


def memory_line_rate(channels: float, transfers_per_s: float) -> float:
    """Random 64 B lines/s of `channels` DDR channels at `transfers_per_s` (8 B a transfer)."""
    return channels * transfers_per_s * 8 * RANDOM_LINE_SHARE / LINE_BYTES


def server(name: str, share: HostShare = HostShare.GPU) -> Hardware:
    """The GPU server `name` (a SERVERS key), derated as the module note says; its host's cores
    and memory channels `share`'s: one GPU's (the default), or a whole socket's (its name then
    says so: `h100-pcie5:socket`)."""
    f = SERVERS[name]
    cores, cores_source = f["cores"]
    channels, transfers, memory_source = f["memory"]
    if share is HostShare.SOCKET:
        if "socket" not in f:
            raise ValueError(f"hardware {name!r} states no socket: give it socket=(cores, DRAM channels, source)")
        cores, channels, socket_source = f["socket"]
        cores_source = memory_source = f"a whole socket: {socket_source}"
        name = f"{name}:{share.value}"
    stream, stream_source = f["stream"]
    l2, l2_bw, l2_source = f["l2"]
    fp32, fp32_source = f["fp32"]
    link, link_source = f["link"]
    device_rows = RowCurve.from_bandwidths(0.5 * l2_bw, 0.5 * stream, l2, line_bytes=32)
    updated = RowCurve.from_bandwidths(0.25 * l2_bw, 0.25 * stream, l2, line_bytes=32)  # read and written
    host, host_sources = host_core()
    sort, sort_source = sort_curve(stream, f["launch"])
    row_bw, row_source = link_row_bw(link)
    kernel, kernel_source = kernel_launch(f["launch"])
    return Hardware(
        name=name,
        description=f["description"] + ("; priced on a whole socket" if share is HostShare.SOCKET else ""),
        host_cores=cores,
        **host,
        host_memory_line_rate=memory_line_rate(channels, transfers),
        pcie_bw=0.8 * link,
        pcie_row_bw=row_bw,
        pcie_latency=f["copy_latency"],
        device_stream_bw=stream,
        device_gather=device_rows,
        device_scatter=device_rows,
        device_lookup=device_rows,
        device_update=updated,
        device_op_latency=f["launch"],
        device_calls=calls_from_ops(f["launch"]) | {"kernel": kernel},
        device_sort=sort,
        device_sort_value_rate=stream / (3 * 4),
        device_flops=RateCurve.constant(0.8 * fp32),
        device_bmm_flops=RateCurve.constant(0.1 * fp32),
        device_activation_rate=RateCurve.constant(stream / 8),
        origin="datasheets and published microbenchmarks (scratchkit/costmodel/servers.py)",
        sources=host_sources
        | {
            "host_cores": cores_source,
            "device_stream_bw": stream_source,
            "host_memory_line_rate": f"{memory_source}: {channels} channels per GPU x {transfers / 1e6:.0f} MT/s "
            f"x 8 B x {RANDOM_LINE_SHARE:g} (assumption: random lines reach half "
            f"a channel's peak) / {LINE_BYTES} B",
            "device_sort": sort_source,
            "pcie_bw": f"{link_source}; assumption: pinned copies reach 80% of it, each direction at once",
            "pcie_row_bw": row_source,
            "pcie_latency": f"assumption: a small cudaMemcpyAsync costs ~{f['copy_latency'] / US:.0f} us end to end",
            "device_op_latency": f"assumption: CUDA's launch (~4 us) + PyTorch's dispatch on the host core: "
            f"{f['launch'] / US:.0f} us",
            "device_gather": "assumption: random rows at half the streaming bandwidth beyond the L2, half "
            f"the L2's inside it (two 32 B sectors of a 128 B line per 64 B row); {l2_source}",
            "device_scatter": "assumption: as the gather",
            "device_lookup": "assumption: as the gather (an embedding bag reads each row once)",
            "device_update": "assumption: as the gather, twice (each row read, then written back)",
            "device_calls": "each kit call's kernels (hardware.CALL_OPS) x the launch cost; a kernel of the "
            f".cu files (`kernel`) {kernel / US:.1f} us: {kernel_source}",
            "device_sort_value_rate": "assumption: the coalesce passes over its values 3 times at the "
            "streaming bandwidth (read, permute, reduce)",
            "device_flops": f"assumption: 80% of the float32 peak (cuBLAS SGEMM on large shapes); {fp32_source}",
            "device_bmm_flops": f"assumption: 10% of the float32 peak for batches of tiny matrices; {fp32_source}",
            "device_activation_rate": "assumption: each activation float read and written once per pass "
            "at the streaming bandwidth (8 bytes a float)",
        },
    )
