"""`scratchkit info`: versions, devices, and whether CuPy kernels can run."""

from __future__ import annotations

import json


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("info", help="versions, devices, whether CuPy kernels can run")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a line")
    p.set_defaults(run=run)


def run(args) -> int:
    from dataclasses import asdict

    from scratchkit.backend import detect

    import platform

    from scratchkit.backend import kit_version

    backend = detect()
    versions = {"scratchkit_version": kit_version(), "python_version": platform.python_version()}
    print(json.dumps(versions | asdict(backend) | {"device": backend.device}) if args.json else backend.describe())
    return 0
