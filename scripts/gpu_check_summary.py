"""The end of scripts/gpu_check.sh: one JSON of the whole run, and its key figures as text.

    python scripts/gpu_check_summary.py OUT MODE

Reads what the sections left in OUT (sections.tsv, env.json, warmup.json, kernel_bench.json,
verify.json, distributed.json, bench_small.json, bench_embedding.json, calibrate.json,
validate.json; any may be missing when its section did not run), writes OUT/gpu_check.json, and
prints a text summary for report.md in which each measured trainer and kernel figure stands beside
the projection docs/gpu-expected.json made before the run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXPECTED = REPO / "docs" / "gpu-expected.json"


def load(path: Path):
    """A JSON file's content, or None when the section that writes it did not (or failed)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def sections(out: Path) -> list[dict]:
    rows = []
    if (out / "sections.tsv").exists():
        for line in (out / "sections.tsv").read_text().splitlines():
            name, status, seconds, budget = line.split("\t")
            rows.append({"section": name, "status": status, "seconds": int(seconds), "budget": int(budget)})
    return rows


def expected_for(expected: dict | None, profile: str) -> dict:
    """{trainer: its projection on the expected hardware} for one training profile, or {}."""
    if not expected:
        return {}
    hardware = expected["hardware"]
    for prof in expected["profiles"]:
        if prof["profile"] == profile:
            return {row["trainer"]: row["projected"][hardware] for row in prof["trainers"]}
    return {}


def bench_lines(name: str, rows: list | None, expected: dict, status: str) -> list[str]:
    if not rows:
        return [f"{name}: no figures ({status})"]
    lines = [f"{name}: measured samples/s (ratio)  | expected before the run (ratio, bound by)"]
    for r in rows:
        e = expected.get(r["trainer"])
        exp = f"{e['samples_per_s']:>10,.0f} ({e['ratio']:.2f}, {e['bound_stage']})" if e else "-"
        lines.append(f"  {r['trainer']:19s} {r['samples_per_s']:>10,.0f} ({r['ratio']:.2f})  | {exp}")
    lines.append(
        "  set-up s (warm-up s): "
        + ", ".join(f"{r['trainer']} {r.get('setup_s', 0):.1f} ({r.get('warmup_s', 0):.1f})" for r in rows)
    )
    return lines


def warmup_lines(parts: list | None) -> list[str]:
    """What the cold start cost, part by part (the warmup section)."""
    if not parts:
        return ["warm-up: no figures (section did not run or failed early)"]
    lines = [f"warm-up: {sum(p['seconds'] for p in parts):.1f} s"]
    lines += [f"  {p['part']:40s} {p['seconds']:7.2f} s{'' if p['ok'] else '  FAILED'}" for p in parts]
    return lines


def kernel_lines(bench: dict | None, expected: dict | None) -> list[str]:
    if not bench:
        return ["kernels: no figures (section did not run or failed)"]
    lines = ["kernels: Mlookups/s, gather GB/s, copy GB/s (gather/copy)"]
    for r in bench["results"]:
        lines.append(
            f"  {r['engine']:8s} {r['query_lookups_per_s'] / 1e6:10.1f} {r['gather_gb_per_s']:10.1f} "
            f"{r['copy_gb_per_s']:10.1f} ({r['gather_gb_per_s'] / r['copy_gb_per_s']:.2f})"
        )
    if expected:
        k = expected["kernels"][expected["hardware"]]
        lines.append(
            f"  expected ({expected['hardware']}): copy {k['device_stream_gb_per_s']:,.0f} GB/s, "
            f"gather {k['device_gather_gb_per_s']:,.0f} GB/s"
        )
    return lines


def main(argv: list[str]) -> int:
    out, mode = Path(argv[0]), argv[1] if len(argv) > 1 else "check"
    expected = load(EXPECTED)
    run = {
        "mode": mode,
        "sections": sections(out),
        "env": load(out / "env.json"),
        "warmup": load(out / "warmup.json"),
        "kernel_bench": load(out / "kernel_bench.json"),
        "verify": load(out / "verify.json"),
        "distributed": load(out / "distributed.json"),
        "bench_small": load(out / "bench_small.json"),
        "bench_embedding": load(out / "bench_embedding.json"),
        "calibrate": load(out / "calibrate.json"),
        "validate": load(out / "validate.json"),
        "expected": {
            "file": str(EXPECTED.relative_to(REPO)),
            "generated": (expected or {}).get("generated"),
            "hardware": (expected or {}).get("hardware"),
        },
    }
    (out / "gpu_check.json").write_text(json.dumps(run, indent=2) + "\n")
    lines = ["", "## summary", "", "```"]
    lines += [f"{s['section']:16s} {s['status']:30s} {s['seconds']:4d} s / {s['budget']} s" for s in run["sections"]]
    lines.append(f"total {sum(s['seconds'] for s in run['sections'])} s")
    env = run["env"] or {}
    if env.get("nvrtc_targets") is not None:
        skipped = "".join(f"; skipped {t}: {why}" for t, why in env.get("nvrtc_skipped", {}).items())
        lines.append(f"NVRTC {env['nvrtc']} builds {', '.join(env['nvrtc_targets'])}{skipped}")
    lines += warmup_lines(run["warmup"])
    for v in run["verify"] or []:
        lines.append(
            f"verify {v['trainer']:13s} max |diff| {v['max_abs_diff']:.2e} (tolerance "
            f"{v['tolerance']:g}): {'OK' if v['passed'] else 'FAIL'}"
        )
    for v in run["distributed"] or []:
        lines.append(
            f"sharded {v['trainer']:12s} {v['world_size']} rank(s), {v['backend']}: max |diff| "
            f"{v['max_abs_diff']:.2e} (tolerance {v['tolerance']:g}): {'OK' if v['passed'] else 'FAIL'}"
        )
    lines += kernel_lines(run["kernel_bench"], expected)
    status = {s["section"]: s["status"] for s in run["sections"]}
    lines += bench_lines(
        "bench small", run["bench_small"], expected_for(expected, "small"), status.get("bench_small", "did not run")
    )
    lines += bench_lines(
        "bench embedding-bound",
        run["bench_embedding"],
        expected_for(expected, "embedding-bound"),
        status.get("bench_embedding", "did not run"),
    )
    if run["validate"]:
        lines.append(f"cost model on this machine: {run['validate']['verdict']}")
    lines += ["```", f"JSON: {out / 'gpu_check.json'}"]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
