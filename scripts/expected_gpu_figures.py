"""Write docs/gpu-expected.md and docs/gpu-expected.json: the cost model's figures for a GPU, before it runs.

    .venv/bin/python scripts/expected_gpu_figures.py [--steps 50] [--hardware h100-pcie5]

The first run of scripts/gpu_check.sh on a GPU is then a test of the cost model, not a discovery:
its report puts each measured figure beside the projection written here.

How: for each training profile (small, criteo-like, and the embedding-bound profile where this
version has it) the trainers gpu-only, hybrid, lru, prefetch-lru and scratchpipe-device (where they exist) and scratchpipe
train on this machine (`scratchkit.measure.bench.run_bench`), which measures the work per step that does
not depend on the hardware (working sets, hit rates, rows fetched and written back); the cost
model (`scratchkit.projection.project.project_bench`) prices that work on every hardware. This
machine's speed does not enter the GPU projections. The kernel figures expected are the hardware
server's own numbers (device_stream_bw, device_gather at 64 B rows of a 1 GiB table), which
bench_kernels.py measures.
Regenerate whenever the cost model, the profiles or the trainers change.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scratchkit.costmodel.hardware import GB  # noqa: E402
from scratchkit.costmodel.servers import SERVERS  # noqa: E402
from scratchkit.designs import DESIGNS, Compared  # noqa: E402
from scratchkit.measure.bench import run_bench  # noqa: E402
from scratchkit.profiles import PROFILES, get_profile  # noqa: E402
from scratchkit.projection.machines import get_machine  # noqa: E402
from scratchkit.projection.project import project_bench  # noqa: E402

EMBEDDING_BOUND = "embedding-bound"  # the workload whose step the tables bound
GPU_SERVERS = list(SERVERS)


def trainers() -> list[str]:
    """Every design projected at full size (not static and lfu: priced as lru is, but for the fetch)."""
    return [name for name, d in DESIGNS.items() if d.compared is not Compared.MEASURED]


def machine() -> str:
    """The CPU this ran on (its speed does not enter the GPU projections, only the work counts)."""
    cpuinfo = Path("/proc/cpuinfo")
    names = (
        [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        if cpuinfo.exists()
        else []
    )
    cpu = names[0] if names else (platform.processor() or "unknown CPU")
    return f"{cpu}, {os.cpu_count()} cores, no GPU ({platform.system()} {platform.machine()})"


def project_profile(name: str, steps: int) -> dict:
    """One training profile: the work measured here, and its projection on every GPU server."""
    config = get_profile(name)
    results = run_bench(config, trainers(), steps, warmup=5)
    projections = project_bench(config, results, GPU_SERVERS)
    rows = []
    for result, projected in zip(results, projections):
        rows.append(
            {
                "trainer": result.trainer,
                "work_per_step": {
                    "lookups": result.lookups_per_step,
                    "hit_rate": result.hit_rate,
                    "fetched_rows": result.fetched_rows_per_step,
                    "written_back_rows": result.written_back_rows_per_step,
                },
                "projected": {
                    hw: {
                        "samples_per_s": p.samples_per_s,
                        "ratio": p.ratio,
                        "step_ms": 1000 * p.step_seconds,
                        "bound_stage": p.bound_stage,
                        "stage_ms": {s: 1000 * v for s, v in p.stage_seconds.items()},
                    }
                    for hw, p in projected.items()
                },
            }
        )
    data = config.data
    return {
        "profile": name,
        "tables": len(data.table_sizes),
        "batch_size": data.batch_size,
        "pooling": data.pooling,
        "dim": config.model.dim,
        "steps": steps,
        "trainers": rows,
    }


def kernel_expectations() -> dict:
    return {
        hw: {
            "device_stream_gb_per_s": get_machine(hw).device_stream_bw / GB,
            "device_gather_gb_per_s": get_machine(hw).device_gather.bandwidth(64, 2**30) / GB,
            "pcie_gb_per_s": get_machine(hw).pcie_bw / GB,
        }
        for hw in GPU_SERVERS
    }


def markdown(figures: dict, hardware: str) -> str:
    lines = [
        "# Expected figures on the first GPU",
        "",
        f"Written by `{figures['command']}`, which also writes `docs/gpu-expected.json` (with the",
        "commit, date and machine that wrote both). Regenerate them with the same command when the",
        "cost model changes.",
        "",
        "These are the cost model's projections (`scratchkit/projection/project.py`, machines in",
        "`scratchkit/projection/machines.py`), made *before* any run on a GPU. `scripts/gpu_check.sh` prints",
        "its measurements beside them (`docs/gpu-expected.json`), so the first GPU run tests the",
        f"model. The GPU check targets an H100/H200-class machine: the `{hardware}` server.",
        "An H200 has the H100's architecture (sm_90) and PCIe 5 host link, with faster HBM (4.8",
        "against 2.0 TB/s), which the model's embedding verdicts barely depend on: they are set",
        "by host memory, PCIe and per-op latency. Expect the device-bound figures (gpu-only's",
        "`mlp`, kernels' GB/s) to come out faster on an H200 than projected here.",
        "",
        "The work per step (hit rates, rows fetched and written back) was measured here by training",
        "the same batches; it does not depend on the hardware. The data stage is not modelled.",
        "",
    ]
    for prof in figures["profiles"]:
        lines += [
            f"## {prof['profile']}: {prof['tables']} tables, batch {prof['batch_size']}, "
            f"pooling {prof['pooling']}, dim {prof['dim']}",
            "",
            "| trainer | hit rate | rows fetched/step | "
            + " | ".join(f"{hw} samples/s (ratio, bound by)" for hw in GPU_SERVERS)
            + " |",
            "|---|---|---|" + "---|" * len(GPU_SERVERS),
        ]
        for row in prof["trainers"]:
            work = row["work_per_step"]
            hit = "-" if work["hit_rate"] is None else f"{work['hit_rate']:.3f}"
            cells = [
                f"{p['samples_per_s']:,.0f} ({p['ratio']:.2f}, {p['bound_stage']})"
                for p in (row["projected"][hw] for hw in GPU_SERVERS)
            ]
            lines.append(f"| {row['trainer']} | {hit} | {work['fetched_rows']:,.0f} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "## Kernels (benchmarks/bench_kernels.py)",
        "",
        "The profiles' device memory figures, which the gather benchmark's GB/s and the copy",
        "bandwidth measured in the same run should approach (gather GB/s / copy GB/s about "
        "the server's gather/stream ratio):",
        "",
        "| hardware | device copy GB/s | random-row gather GB/s | PCIe GB/s |",
        "|---|---|---|---|",
    ]
    for hw, k in figures["kernels"].items():
        lines.append(
            f"| {hw} | {k['device_stream_gb_per_s']:,.0f} | {k['device_gather_gb_per_s']:,.0f} | "
            f"{k['pcie_gb_per_s']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50, help="timed steps per trainer (default 50)")
    parser.add_argument("--hardware", default="h100-pcie5", help="the GPU server the check targets")
    parser.add_argument("--out", default=str(REPO / "docs"), help="folder for gpu-expected.{md,json}")
    args = parser.parse_args(argv)
    profiles = ["small", "criteo-like"] + ([EMBEDDING_BOUND] if EMBEDDING_BOUND in PROFILES else [])
    git = (
        subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        or "?"
    )
    figures = {
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git": git,
        "command": f"python scripts/expected_gpu_figures.py --steps {args.steps}",
        "machine": machine(),
        "hardware": args.hardware,
        "trainers": trainers(),
        "profiles": [project_profile(p, args.steps) for p in profiles],
        "kernels": kernel_expectations(),
    }
    out = Path(args.out)
    (out / "gpu-expected.json").write_text(json.dumps(figures, indent=2) + "\n")
    (out / "gpu-expected.md").write_text(markdown(figures, args.hardware))
    print(f"wrote {out / 'gpu-expected.md'} and {out / 'gpu-expected.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
