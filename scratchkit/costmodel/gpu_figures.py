"""The device side of a GPU server beyond its datasheet: how fast rows cross the link row by row,
what a sort and a kernel launch cost. Each figure is a published measurement (quoted) or this
workplace's own reading of a GPU (gpu_reading.json beside this module, with its provenance),
carried to every server by a stated rule; servers.py builds each server's `Hardware` with them.

    link_row_bw    rows a kernel reads from host memory over the link in lookup order: a share of
                   the link's raw rate, from a published bare-metal measurement (LINK_ROW_SOURCE);
                   in id order they cross at the copies' rate (work.py)
    sort_curve     torch.sort(stable=True) of n int64 keys: a fixed part (launches, priced at the
                   server's launch cost) and a per-key part at the server's streaming bandwidth,
                   both from the reading's H200
    kernel_launch  a CuPy RawKernel launched from Python: the reading's cost of one over a torch op's
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np

from scratchkit.costmodel.curves import RateCurve

GPU_READING_FILE = Path(__file__).with_name("gpu_reading.json")

# NVIDIA recsys-examples' dynamicemb benchmark, corelib/dynamicemb/benchmark/benchmark_results.json
# at commit 342da56279851c5bd0f556b1830a0b6c3a98ba3c, entry T1_totalB1048576_D128_sgd_no_hbm_pool=
# none_cap=256M ("gpu_name": "NVIDIA H100 80GB HBM3"): TorchRec's table of 268,435,456 rows of 128
# floats in CUDA managed memory on the host, 1,048,576 power-law lookups of 366,979 distinct rows,
# "trc_eval_ms": 8.031639022827148: the forward alone reads each distinct row over PCIe 5.0 x16 in
# lookup order, 366,979 x 512 B in 8.03 ms, 23.4 GB/s, 0.37 of the link's 63 GB/s. The same entry's
# "trc_backward_ms": 4.817259545326233 reads those rows and writes them back, sorted, 188 MB each
# way in 4.8 ms (78 GB/s both ways together): the link's two directions at once, each near the
# copies' rate, which is how work.py prices rows in id order and a stage's two directions.
LINK_ROW_SHARE = 23.39 / 63.0
LINK_ROW_SOURCE = (
    "NVIDIA/recsys-examples benchmark_results.json at 342da562, TorchRec's managed-memory table on an "
    'H100 (T1_totalB1048576_D128_sgd_no_hbm): "trc_eval_ms": 8.03 for 366,979 distinct 512 B rows '
    "read in lookup order, 23.4 GB/s, 0.37 of PCIe 5.0 x16's 63 GB/s; assumption: that share on every "
    "link. This workplace's H200 (a microVM; gpu_reading.json) read zero-copy rows at 16.0 GB/s in "
    "lookup order and 48.8 in id order"
)
REFERENCE_STREAM = 4300e9  # the H200 server's streaming bandwidth (servers.py), the reading's GPU


@cache
def gpu_reading() -> tuple[dict, str]:
    """gpu_reading.json's figures and the provenance a source names: the command, machine, date."""
    data = json.loads(GPU_READING_FILE.read_text())
    return data["figures"], f"{data['command']} on {data['machine']}, {data['date']} ({GPU_READING_FILE.name})"


def fit_sort() -> tuple[float, float]:
    """(fixed seconds, keys/s) of the reading's sorts: the line t = fixed + n / rate whose worst
    relative error over them is least (fixed in whole microseconds, the rate in steps of 0.1G)."""
    times = {int(n): us * 1e-6 for n, us in gpu_reading()[0]["sort_stable_int64_us"].items()}
    n, t = np.array(list(times), dtype=float), np.array(list(times.values()))
    fixed, rate = np.meshgrid(np.arange(1, 200) * 1e-6, np.arange(10, 400) * 1e8, indexing="ij")
    worst = np.max(np.abs((fixed[..., None] + n / rate[..., None]) / t - 1), axis=-1)
    i = np.unravel_index(np.argmin(worst), worst.shape)
    return float(fixed[i]), float(rate[i])


@cache
def sort_constants() -> tuple[float, float, str]:
    """(the sort's fixed part in launches, keys/s at REFERENCE_STREAM, the source)."""
    figures, provenance = gpu_reading()
    fixed, rate = fit_sort()
    launches = fixed / (figures["torch_op_us"] * 1e-6)
    times = ", ".join(f"{us} us at {int(n):,} keys" for n, us in figures["sort_stable_int64_us"].items())
    source = (
        f"torch.sort(stable=True) of int64 keys: {times} ({provenance}); fitted as {fixed * 1e6:.0f} us "
        f"fixed (= {launches:.1f} launches of the {figures['torch_op_us']} us a torch op took there) + "
        f"{rate / 1e9:.1f}G keys/s; assumption: the fixed part is launches at this server's launch cost, "
        f"the per-key part scales with its streaming bandwidth"
    )
    return launches, rate, source


def sort_curve(stream_bw: float, launch: float) -> tuple[RateCurve, str]:
    """A device sort on a server of `stream_bw` and `launch` (the model's units: keys x log2 n per
    second at n keys), and its source."""
    launches, rate, source = sort_constants()
    fixed, keys_per_s = launches * launch, rate * stream_bw / REFERENCE_STREAM
    points = tuple((2.0**p, 2.0**p * p / (fixed + 2.0**p / keys_per_s)) for p in (10, 12, 14, 16, 18, 20, 22, 24))
    return RateCurve(points), source


def kernel_launch(launch: float) -> tuple[float, str]:
    """A CuPy RawKernel's launch from Python on a server whose torch op costs `launch`, and its source."""
    figures, provenance = gpu_reading()
    ratio = figures["cupy_kernel_launch_us"] / figures["torch_op_us"]
    return ratio * launch, (
        f"a CuPy RawKernel launch took {figures['cupy_kernel_launch_us']} us where a torch op took "
        f"{figures['torch_op_us']} ({provenance}): {ratio:.2f} launches"
    )


def link_row_bw(link: float) -> tuple[float, str]:
    """Bytes/s of rows read over a link of raw rate `link` in lookup order, and its source."""
    return LINK_ROW_SHARE * link, LINK_ROW_SOURCE
