"""`scratchkit calibrate`: measure this machine's constants and save them as its hardware.

The `this-cpu` projections (`bench --project this-cpu`, `bench --validate`) then use the saved
hardware; without one they measure a quick one at each run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate", help="measure this machine's constants for the cost model and save them (the this-cpu hardware)"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="PATH",
        help="where to save the hardware (default: hardware.json in the kit's cache "
        "folder, where this-cpu looks; $SCRATCHKIT_HARDWARE overrides it)",
    )
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats: a few seconds, rougher")
    p.add_argument(
        "--device",
        default=None,
        help="torch device to measure as the GPU (default: cuda if torch has it, else none: the CPU is the device)",
    )
    p.add_argument("--json", action="store_true", help="print the hardware as JSON instead of a summary")
    p.set_defaults(run=run)


def run(args) -> int:
    from scratchkit.commands.tables import describe_hardware
    from scratchkit.calibration.calibrate import calibrate
    from scratchkit.projection.machines import save_calibration, saved_hardware_path

    out = args.out if args.out is not None else saved_hardware_path()
    if out.exists() and out.is_dir():
        raise ValueError(f"--out {out} is a folder; give the path of a .json file")
    device = None
    if args.device is not None:
        from scratchkit.device import Device

        device = Device(args.device)
    started = time.perf_counter()

    def say(step: str) -> None:  # progress on stderr, so --json's stdout stays one document
        print(f"calibrate [{time.perf_counter() - started:5.1f} s] {step}", file=sys.stderr, flush=True)

    machine = calibrate(quick=args.quick, progress=say, device=device)
    path = save_calibration(machine, out)
    say(f"saved {path}")
    if args.json:
        print(json.dumps(machine.to_json(), indent=2))
    else:
        print(describe_hardware(machine))
        print(
            f"saved to {path}; this-cpu projections use it from now on "
            f"({'the default place' if path == saved_hardware_path() else 'set SCRATCHKIT_HARDWARE to use it'})"
        )
    return 0
