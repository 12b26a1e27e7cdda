"""A benchmark's run kept as data: what ran, on which commit, when, on what machine, and its figures.

Every figure the README or the docs quote comes from such a record in `results/`, so a reader can
see where it came from and run it again. Every benchmark takes `--record PATH` the same way:

    add_record_option(parser, "faults")          # --record PATH, e.g. results/faults.json
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)    # as it starts: the command, commit, date, machine
    ...
    record.keep(args.record, {"steps": {...}})   # as it ends: written if --record asked for it

scripts/render_results.py renders every record in results/ into docs/results.md.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path


def commit() -> str:
    """The checkout's commit (with "+changes" if the work tree differs from it), or "unknown"."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


class RunRecord:
    """Made as a run starts (the commit and the date are the start's: a long run outlives a
    checkout's HEAD); `write` adds the figures when it ends."""

    def __init__(self, command: str):
        # here, not at the top: a benchmark's forked children that measure their own memory
        # import this module for its option, and the calibration brings torch
        from scratchkit.calibration.calibrate import machine_name

        self.head = {
            "command": command,
            "commit": commit(),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine_name(),
        }

    @classmethod
    def of_run(cls, script: str, argv: list[str] | None = None) -> "RunRecord":
        """The record of this run of `script` (a benchmark's `__file__`) with `argv` (None: the
        command line's): its command reads `benchmarks/bench_x.py ARGS`, runnable from the root."""
        script = Path(script)
        args = sys.argv[1:] if argv is None else argv
        return cls(" ".join([f"{script.parent.name}/{script.name}", *map(shlex.quote, args)]))

    def keep(self, path: str | Path | None, figures: dict) -> Path | None:
        """Write the record with `figures` to `path` and say where; nothing if `path` is None
        (no `--record`). -> the path written, or None."""
        if path is None:
            return None
        written = self.write(path, figures)
        print(f"recorded in {written}")
        return written

    def write(self, path: str | Path, figures: dict) -> Path:
        """Write the record with `figures` to `path` (JSON). -> the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.head | {"figures": figures}, indent=2) + "\n")
        return path


def add_record_option(parser, name: str) -> None:
    """`--record PATH` on a benchmark's argparse parser (`name`: its record's usual name in results/)."""
    parser.add_argument(
        "--record",
        metavar="PATH",
        default=None,
        help=f"write the run's figures, command, commit, date and machine to PATH (JSON), e.g. results/{name}.json",
    )
