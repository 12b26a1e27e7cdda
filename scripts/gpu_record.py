"""Keep a GPU session's run as a record: what `scripts/gpu_check.sh` and the benches printed on the
device, beside what the cost model projects for the same steps, so the README and notebook 05 can
set measured beside projected (results/gpu-h200.json; docs/gpu.md says how a session makes one).

A GPU session runs the check and its benches on the device machine and brings back a folder:

    gpu_check.out          the check's section lines ("[verify] TIMED OUT in 50 s ...")
    gpu-report/bench_embedding.json, wide.json, ...   `scratchkit bench --json` rows
    checks.json            optional: {name: {"status": ..., "seconds": ..., "note": ...}} for the
                           commands run beside the check (a longer verify, a test file alone)

This script runs here, after the session: it reads that folder and prices every bench row again
with the current model at full size (`project_bench`, the row's own counters), so the record holds
both the projection the device saw then and the model's now.

    python scripts/gpu_record.py FOLDER --commit C --date "YYYY-MM-DD HH:MM UTC" \\
        --machine "NVIDIA H200, 16-core Xeon" --command "..." --record results/gpu-h200.json
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from types import SimpleNamespace

from scratchkit.profiles import get_profile
from scratchkit.projection.project import project_bench

MACHINE = "h200"  # the server the measurements are set beside
SECTION = re.compile(r"^\[(\w+)\] (.+?) in (\d+) s")
COUNTERS = ("fetched_rows_per_step", "written_back_rows_per_step", "evicting_tables_per_step", "hit_rate")


def sections(text: str) -> dict[str, dict]:
    """The check's section lines: {name: {"status", "seconds"}}."""
    found = {}
    for line in text.splitlines():
        if m := SECTION.match(line):
            found[m.group(1)] = {"status": m.group(2), "seconds": int(m.group(3))}
    return found


def ms(stages: dict) -> dict[str, float]:
    return {name: round(1000 * s, 3) for name, s in stages.items()}


def trainer_row(row: dict, now) -> dict:
    """One bench row: measured, the projection the device run printed, and the model's now."""
    then = row.get("projected", {}).get(MACHINE, {})
    measured = row["samples_per_s"]
    return {
        "measured_samples_per_s": round(measured),
        "projected_then": round(then.get("samples_per_s", 0.0)),
        "projected_now": round(now.samples_per_s),
        "measured_over_projected_now": round(measured / now.samples_per_s, 3),
        "bound_stage_now": now.bound_stage,
        "measured_ms": ms(row["stage_seconds"]),
        "projected_now_ms": ms(now.stage_seconds),
        "step_ms": round(1000 * row["seconds"] / max(row["steps"], 1), 3),
        "host_syncs_per_step": row.get("host_syncs_per_step"),
        "kernel_launches_per_step": row.get("kernel_launches_per_step"),
        "plan_syncs_per_step": row.get("plan_syncs_per_step"),
        "setup_s": row.get("setup_s"),
    }


def profile_rows(profile: str, rows: list[dict]) -> dict[str, dict]:
    """Every trainer of one bench, priced again at the profile's full size."""
    config = get_profile(profile)
    results = [SimpleNamespace(trainer=r["trainer"], **{k: r.get(k) for k in COUNTERS}) for r in rows]
    now = project_bench(config, results, [MACHINE])
    return {r["trainer"]: trainer_row(r, p[MACHINE]) for r, p in zip(rows, now)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument(
        "--bench",
        action="append",
        default=[],
        metavar="PROFILE=FILE",
        help="a bench's JSON rows in the folder, by profile (e.g. embedding-bound=gpu-report/bench_embedding.json)",
    )
    parser.add_argument("--commit", required=True, help="the commit the device ran")
    parser.add_argument("--date", required=True)
    parser.add_argument("--machine", required=True)
    parser.add_argument("--command", required=True, help="the command the device ran")
    parser.add_argument("--record", required=True, metavar="PATH")
    args = parser.parse_args(argv)
    folder = args.folder
    figures = {"sections": sections((folder / "gpu_check.out").read_text())}
    checks = folder / "checks.json"
    if checks.exists():
        figures["checks"] = json.loads(checks.read_text())
    figures["benches"] = {}
    for item in args.bench:
        profile, _, name = item.partition("=")
        figures["benches"][profile] = profile_rows(profile, json.loads((folder / name).read_text()))
    record = {"command": args.command, "commit": args.commit, "date": args.date, "machine": args.machine}
    Path(args.record).write_text(json.dumps(record | {"figures": figures}, indent=1) + "\n")
    print(f"recorded in {args.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
