"""Hardware profiles for the cost model: how fast memory, links and arithmetic are on a machine.

A profile is a handful of numbers, each with its source beside it. Three ship with the kit:

- `this-cpu`: measured here at run time (a large NumPy copy, a gather of embedding rows, a small
  matmul, a tiny op), once per process. The "device" is the CPU itself and "PCIe" is no copy at
  all, exactly as the trainers run on a machine without a GPU.
- `v100-pcie3`: a PCIe-3 server with an NVIDIA V100, the generation of the DLRM/ScratchPipe era.
- `h100-pcie5`: a PCIe-5 server with an NVIDIA H100 (an H200 has more HBM bandwidth; the model's
  verdicts for embedding training depend mostly on PCIe and host memory, which are the same).

Datasheet numbers are peaks; the profiles use *achievable* figures and say how they were derated.
Random gathers of embedding rows (64 B for dim 16) reach only part of the streaming bandwidth, so
each memory has two numbers: streaming and random-row gather. Where a figure is an assumption
rather than a measurement or datasheet value, its note says so: change it and re-run.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch

GB = 1e9
US = 1e-6


@dataclass(frozen=True)
class HardwareProfile:
    """Bandwidths in bytes/s, latencies in seconds, arithmetic in FLOP/s."""

    name: str
    description: str
    host_stream_bw: float      # host DRAM, large sequential copies (read + write bytes)
    host_gather_bw: float      # host DRAM, gathering/scattering random embedding rows (row bytes)
    host_op_latency: float     # fixed cost of one host-side tensor op (framework dispatch, launch)
    host_sort_rate: float      # keys/s sorting (id, value) pairs: coalescing, working sets
    host_cores: int            # host threads that can run pipeline stages at once
    pcie_bw: float             # host <-> device copies, per direction
    pcie_latency: float        # fixed cost of one host <-> device copy
    device_stream_bw: float    # device memory, streaming
    device_gather_bw: float    # device memory, random embedding rows
    device_flops: float        # dense float32 arithmetic (the MLPs)
    device_op_latency: float   # fixed cost of one device kernel (eager launch)
    device_sort_rate: float    # keys/s sorting (id, value) pairs on the device
    device_is_host: bool = False   # True: no GPU, the "device" stages share the host's cores
    sources: dict[str, str] = field(default_factory=dict, compare=False)   # field -> why this number

    def __post_init__(self):
        for name in ("host_stream_bw", "host_gather_bw", "pcie_bw", "device_stream_bw",
                     "device_gather_bw", "device_flops", "host_sort_rate", "device_sort_rate"):
            if not getattr(self, name) > 0:
                raise ValueError(f"profile {self.name!r}: {name} must be > 0, got {getattr(self, name)}")
        for name in ("host_op_latency", "pcie_latency", "device_op_latency"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"profile {self.name!r}: {name} must be >= 0, got {getattr(self, name)}")
        if self.host_cores < 1:
            raise ValueError(f"profile {self.name!r}: host_cores must be >= 1, got {self.host_cores}")


def _best_seconds(run, repeats: int) -> float:
    """The fastest of `repeats` runs: the machine's capability, not its noise."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)


@lru_cache(maxsize=1)
def measure_this_cpu() -> HardwareProfile:
    """Measure this machine (about 0.3 s, once per process): the CPU is host and device at once.

    Torch ops are timed on one thread, as the trainers run them (`TrainConfig.cpu_threads`).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _measure()
    finally:
        torch.set_num_threads(threads)


def _measure() -> HardwareProfile:
    from scratchkit.embedding.optim import coalesce   # the kit's own coalescing: what the trainers sort with

    # streaming: copy 64 MiB (beyond any last-level cache); read + write bytes count
    src = np.ones(8 * 2**20)                                    # 64 MiB of float64
    dst = np.empty_like(src)
    stream = 2 * src.nbytes / _best_seconds(lambda: np.copyto(dst, src), 5)
    # gathers: 16k random rows of dim 16 from a 4 MiB table, the size of `small`'s tables, with the
    # trainers' own op. Tables beyond the last-level cache gather several times slower.
    table = torch.randn(2**16, 16)
    index = torch.randint(0, 2**16, (2**14,))
    out = torch.empty(2**14, 16)
    gather = index.numel() * 64 / _best_seconds(lambda: torch.index_select(table, 0, index, out=out), 7)
    # fixed cost of one op: the kit's own calls on tiny inputs, where nothing but the fixed cost is
    # left, divided by the ops the cost model counts for them: embedding_backward (9), an SGD
    # apply_update (3), and one Linear + ReLU forward and backward with autograd (8)
    op = _tiny_op_seconds()
    # sorting: coalesce 2048 lookups' gradients (one table of `small`'s batch) by id
    ids, grads = torch.randint(0, 2**16, (2048,)), torch.randn(2048, 16)
    sort = 2048 / _best_seconds(lambda: coalesce(ids, grads, 2**16), 7)
    # arithmetic: a 256 x 256 matmul, about the MLPs' scale
    m = torch.randn(256, 256)
    flops = 2 * 256**3 / _best_seconds(lambda: m @ m, 7)
    cores = os.cpu_count() or 1
    measured = "measured at run time (1 torch thread)"
    return HardwareProfile(
        name="this-cpu", description=f"this machine, measured: {cores} cores, no GPU (device = CPU)",
        host_stream_bw=stream, host_gather_bw=gather, host_op_latency=op, host_sort_rate=sort,
        host_cores=cores, pcie_bw=float("inf"), pcie_latency=0.0,
        device_stream_bw=stream, device_gather_bw=gather, device_flops=flops, device_op_latency=op,
        device_sort_rate=sort,
        device_is_host=True,
        sources={"host_stream_bw": "np.copyto of 64 MiB, read+write bytes, best of 5",
                 "host_gather_bw": f"index_select of 16k rows x 64 B from a 4 MiB table, {measured}",
                 "host_op_latency": f"the kit's calls on tiny inputs / the ops counted for them, {measured}",
                 "host_sort_rate": f"the kit's coalesce of 2048 lookups x 16 floats, {measured}",
                 "device_sort_rate": "the CPU is the device",
                 "host_cores": "os.cpu_count()",
                 "pcie_bw": "no copy: on a CPU-only machine device memory is host memory",
                 "pcie_latency": "no copy",
                 "device_stream_bw": "the CPU is the device", "device_gather_bw": "the CPU is the device",
                 "device_flops": f"256x256 float32 matmul, {measured}",
                 "device_op_latency": "the CPU is the device"})


def _tiny_op_seconds() -> float:
    from scratchkit.config import OptimizerConfig
    from scratchkit.embedding.optim import apply_update, embedding_backward

    ids, offsets, grad = torch.tensor([1, 2, 2, 3]), torch.tensor([0, 2]), torch.randn(2, 16)
    rows, index, grad_sum = torch.randn(8, 16), torch.tensor([1, 2, 3]), torch.randn(3, 16)
    layer, x = torch.nn.Linear(4, 4), torch.randn(4, 4)
    sgd = OptimizerConfig()

    def calls():
        embedding_backward(ids, offsets, grad, 8)
        apply_update(rows, None, index, grad_sum, sgd)
        torch.relu(layer(x)).sum().backward()

    return _best_seconds(lambda: [calls() for _ in range(100)], 5) / 100 / (9 + 3 + 8)


def v100_pcie3() -> HardwareProfile:
    return HardwareProfile(
        name="v100-pcie3", description="dual-socket Xeon (Skylake/Cascade Lake, DDR4) + V100 on PCIe 3.0 x16",
        host_stream_bw=100 * GB, host_gather_bw=25 * GB, host_op_latency=8 * US, host_sort_rate=30e6,
        host_cores=16, pcie_bw=12 * GB, pcie_latency=10 * US,
        device_stream_bw=800 * GB, device_gather_bw=400 * GB, device_flops=14e12, device_op_latency=8 * US,
        device_sort_rate=1e9,
        sources={"host_stream_bw": "6 ch DDR4-2666 per socket = 128 GB/s peak; STREAM reaches ~100 GB/s",
                 "host_gather_bw": "assumption: random 64 B rows reach ~25% of STREAM (one cache line "
                                   "each, DRAM page misses)",
                 "host_op_latency": "assumption: eager PyTorch dispatch of a host op on a ~2.5 GHz core",
                 "host_sort_rate": "assumption: one core sorts ~30M (id, value) pairs/s in cache "
                                   "(this-cpu measures ~20M/s on a 2-core VM with the same code)",
                 "device_sort_rate": "assumption: CUB radix sort of 64-bit key/value pairs, ~1G pairs/s on a V100",
                 "host_cores": "assumption: 16 cores free for pipeline threads",
                 "pcie_bw": "PCIe 3.0 x16 = 15.75 GB/s per direction; pinned copies reach ~12 GB/s",
                 "pcie_latency": "a cudaMemcpyAsync round of ~10 us for small copies",
                 "device_stream_bw": "HBM2 900 GB/s peak; BabelStream reaches ~800 GB/s",
                 "device_gather_bw": "assumption: random 64 B rows (two 32 B sectors) reach ~50% of stream",
                 "device_flops": "V100 PCIe: 14 TFLOP/s float32 peak (datasheet)",
                 "device_op_latency": "eager kernel launch from a ~2.5 GHz host: ~8 us per op"})


def h100_pcie5() -> HardwareProfile:
    return HardwareProfile(
        name="h100-pcie5", description="Xeon (Sapphire Rapids, DDR5) + H100 on PCIe 5.0 x16",
        host_stream_bw=220 * GB, host_gather_bw=55 * GB, host_op_latency=5 * US, host_sort_rate=50e6,
        host_cores=32, pcie_bw=50 * GB, pcie_latency=8 * US,
        device_stream_bw=1_700 * GB, device_gather_bw=850 * GB, device_flops=51e12, device_op_latency=5 * US,
        device_sort_rate=3e9,
        sources={"host_stream_bw": "8 ch DDR5-4800 = 307 GB/s peak per socket; STREAM reaches ~220 GB/s",
                 "host_gather_bw": "assumption: random 64 B rows reach ~25% of STREAM",
                 "host_op_latency": "assumption: eager PyTorch dispatch of a host op on a ~3.5 GHz core",
                 "host_sort_rate": "assumption: one faster core sorts ~50M (id, value) pairs/s in cache",
                 "device_sort_rate": "assumption: CUB radix sort of 64-bit key/value pairs, ~3G pairs/s on an H100",
                 "host_cores": "assumption: 32 cores free for pipeline threads",
                 "pcie_bw": "PCIe 5.0 x16 = 63 GB/s per direction; pinned copies reach ~50 GB/s",
                 "pcie_latency": "a cudaMemcpyAsync of a small buffer: ~8 us",
                 "device_stream_bw": "H100 PCIe HBM2e 2.0 TB/s peak; ~85% achievable (an H200's "
                                     "HBM3e has 4.8 TB/s: raise this for one)",
                 "device_gather_bw": "assumption: random 64 B rows reach ~50% of stream",
                 "device_flops": "H100 PCIe: 51 TFLOP/s float32 peak (datasheet)",
                 "device_op_latency": "eager kernel launch from a ~3.5 GHz host: ~5 us per op"})


PROFILE_NAMES = ("this-cpu", "v100-pcie3", "h100-pcie5")


def get_hardware(name: str) -> HardwareProfile:
    """A profile by name (`this-cpu` is measured on first use)."""
    makers = {"this-cpu": measure_this_cpu, "v100-pcie3": v100_pcie3, "h100-pcie5": h100_pcie5}
    if name not in makers:
        raise ValueError(f"unknown hardware profile {name!r}; choose one of {', '.join(PROFILE_NAMES)} or all")
    return makers[name]()


def parse_profiles(text: str) -> list[str]:
    """'all' or a comma-separated list of profile names -> names, each checked."""
    names = list(PROFILE_NAMES) if text.strip() == "all" else [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"give a hardware profile: one of {', '.join(PROFILE_NAMES)} or all")
    for n in names:
        if n not in PROFILE_NAMES:
            raise ValueError(f"unknown hardware profile {n!r}; choose one of {', '.join(PROFILE_NAMES)} or all")
    return names
