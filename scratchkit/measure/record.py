"""A benchmark's run kept as data: what ran, on which commit, when, on what machine, and its figures.

Every figure the README or the docs quote comes from such a record in `results/`, so a reader can
see where it came from and run it again:

    record = RunRecord("benchmarks/bench_faults.py --record results/faults.json")   # as it starts
    ...
    record.write("results/faults.json", {"steps": {...}})                           # as it ends
"""
from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from scratchkit.calibration.calibrate import machine_name


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


class RunRecord:
    """Made as a run starts (the commit and the date are the start's: a long run outlives a
    checkout's HEAD); `write` adds the figures when it ends."""

    def __init__(self, command: str):
        self.head = {"command": command, "commit": commit(),
                     "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                     "machine": machine_name()}

    def write(self, path: str | Path, figures: dict) -> Path:
        """Write the record with `figures` to `path` (JSON). -> the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.head | {"figures": figures}, indent=2) + "\n")
        return path
