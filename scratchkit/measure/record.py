"""A benchmark's run kept as data: what ran, on which commit, when, on what machine, and its figures.

Every figure the README or the docs quote comes from such a record in `results/`, so a reader can
see where it came from and run it again:

    write_record("results/faults.json", "benchmarks/bench_faults.py --record results/faults.json",
                 {"kinds": {...}})
"""
from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from scratchkit.measure.calibrate import machine_name


def commit() -> str:
    """The checkout's commit (with "+changes" if the work tree differs from it), or "unknown"."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def make_record(command: str, figures: dict) -> dict:
    return {"command": command, "commit": commit(),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine_name(), "figures": figures}


def write_record(path: str | Path, command: str, figures: dict) -> Path:
    """Write the record of a run to `path` (JSON). -> the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(make_record(command, figures), indent=2) + "\n")
    return path
