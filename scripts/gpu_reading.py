"""Read the device side of a GPU server that no datasheet states, with the kit's own kinds of call
(on a CUDA GPU; nothing to do elsewhere):

    python3 scripts/gpu_reading.py            # prints the figures of scratchkit/costmodel/gpu_reading.json

- rows of 512 B over the link, row by row (zero-copy: a kernel reads a pinned host table where
  it lies, as scratchpipe-device's Collect does, or writes into it, as its Write-back does), in
  lookup order and in id order, alone and read and written in one kernel;
- pinned copies each way, alone and both at once;
- torch.sort(stable=True) of int64 keys, as `DeviceTBE.sort` sorts a batch's lookups;
- the cost of launching a torch op and a CuPy RawKernel from Python, back to back.

Each GPU time is CUDA events around the call, the median of 5 after a warm-up. The figures go into
gpu_reading.json by hand with the command, date and machine; costmodel/gpu_figures.py reads them.
"""

from __future__ import annotations

import json
import time

import cupy
import torch

DIM = 128  # floats a row: 512 B
TABLE_ROWS = 24 << 20  # a 12 GiB host table, several times what a GPU's translation caches cover
SOURCE = r"""
extern "C" __global__ void rows(const float* src, float* dst, const long long* ids, long long n, int mode) {
    // mode 0: dst[r] = src[ids[r]] (read rows); 1: dst[ids[r]] = src[r] (write rows);
    // 2: both in one kernel, row ids[r] read and row ids[n - 1 - r] written
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= n * 128) return;
    const long long r = t / 128, c = t % 128;
    if (mode == 1) dst[ids[r] * 128 + c] = src[r * 128 + c];
    else dst[r * 128 + c] = src[ids[r] * 128 + c];
    if (mode == 2) ((float*)src)[ids[n - 1 - r] * 128 + c] = (float)c;
}
"""
KERNEL = cupy.RawKernel(SOURCE, "rows")


def timed(call, repeats: int = 5) -> float:
    """Milliseconds of `call` on the current stream: the median of `repeats` after a warm-up."""
    call()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[repeats // 2]


def launch(src: torch.Tensor, dst: torch.Tensor, ids: torch.Tensor, mode: int, stream=None) -> None:
    """The rows kernel on `stream` (torch's current one by default), over raw addresses: a pinned
    host tensor's address is its device address under unified addressing."""
    stream = stream or torch.cuda.current_stream()
    n = ids.numel()
    args = (cupy.uint64(src.data_ptr()), cupy.uint64(dst.data_ptr()), cupy.uint64(ids.data_ptr()))
    with cupy.cuda.ExternalStream(stream.cuda_stream):  # as run (CuPy 14 warns: deprecated)
        KERNEL(((n * DIM + 255) // 256,), (256,), (*args, cupy.int64(n), cupy.int32(mode)))


def link_rows(host: torch.Tensor, device: torch.Tensor, rows: int) -> dict:
    """GB/s of `rows` distinct random rows read and written over the link, in each order."""
    ids = torch.randint(0, TABLE_ROWS, (rows,), device="cuda").unique()  # sorted: id order
    shuffled = ids[torch.randperm(ids.numel(), device="cuda")]  # as lookups meet them
    gb = ids.numel() * DIM * 4 / 1e6  # MB: GB/s from milliseconds
    out = {}
    for order, at in (("lookup order", shuffled), ("id order", ids)):
        read, written = timed(lambda: launch(host, device, at, 0)), timed(lambda: launch(device, host, at, 1))
        both = timed(lambda: launch(host, device, at, 2))
        out[f"{ids.numel()} rows in {order}"] = {
            "read GB/s": round(gb / read, 1),
            "written GB/s": round(gb / written, 1),
            "ms read, written, both in one kernel": [round(read, 3), round(written, 3), round(both, 3)],
        }
    return out


def copies(host: torch.Tensor, device: torch.Tensor, other: torch.Tensor) -> dict:
    """Pinned copies of 256 MiB each way, alone and both at once (two streams)."""
    size = device.numel() * 4
    up = timed(lambda: device.copy_(host[: device.numel()], non_blocking=True))
    down = timed(lambda: host[: device.numel()].copy_(other, non_blocking=True))
    side = torch.cuda.Stream()

    def both():
        side.wait_stream(torch.cuda.current_stream())
        device.copy_(host[: device.numel()], non_blocking=True)
        with torch.cuda.stream(side):
            host[device.numel() : 2 * device.numel()].copy_(other, non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)

    return {
        "pinned_copy_GBps": {
            "host to device": round(size / up / 1e6, 1),
            "device to host": round(size / down / 1e6, 1),
        },
        "pinned_copies_ms": {"host to device": up, "device to host": down, "both at once": timed(both)},
        "device_copy_GBps": round(2 * size / timed(lambda: device.copy_(other)) / 1e6),
    }


def launches(count: int = 3000) -> dict:
    """Microseconds a launch, back to back from Python: a torch op, a CuPy RawKernel."""
    small, one = torch.zeros(8, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda")
    out = {}
    for name, call in (
        ("torch_op_us", lambda: small.add_(1)),
        ("cupy_kernel_launch_us", lambda: launch(small, small, one, 0)),
    ):
        call()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(count):
            call()
        torch.cuda.synchronize()
        out[name] = round((time.perf_counter() - start) / count * 1e6, 1)
    return out


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA GPU here: nothing to read")
        return 0
    host = torch.empty(TABLE_ROWS * DIM, pin_memory=True)
    device, other = torch.empty(1 << 26, device="cuda"), torch.empty(1 << 26, device="cuda")
    figures = {"link_rows": {}}
    for rows in (32768, 400000):
        figures["link_rows"] |= link_rows(host, device, rows)
    figures |= copies(host, device, other)
    keys = {n: torch.randint(0, 1 << 25, (n,), device="cuda") for n in (65536, 1 << 20, 1 << 22)}
    figures["sort_stable_int64_us"] = {
        str(n): round(timed(lambda: torch.sort(k, stable=True)) * 1e3) for n, k in keys.items()
    }
    figures |= launches()
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "figures": figures}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
