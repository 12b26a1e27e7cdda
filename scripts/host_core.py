"""Fold fields of a `scratchkit calibrate` run into scratchkit/costmodel/host_core.json, the one host
core every GPU server's host side is priced with (costmodel/servers.py), each with its provenance.

    .venv/bin/scratchkit calibrate --out /tmp/hardware.json        # on a quiet machine
    .venv/bin/python scripts/host_core.py /tmp/hardware.json       # its table-batched calls
    .venv/bin/python scripts/host_core.py /tmp/hardware.json host_sort --dry-run

By default it takes the table-batched C++ calls (`host_tbe_lookup`, `host_tbe_backward`,
`host_tbe_update` and their fixed costs, host_calls' `tbe_*`): with them a GPU server's hybrid is
priced on the batched path its host runs (`Hardware.batched_host`), not as per-table torch ops.
The calibration must be of the loops as they are now (its `native_builds`), and the file records
for each field folded the machine, the date and the commit it came from.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from scratchkit.calibration.calibrate import loop_builds  # noqa: E402
from scratchkit.costmodel.hardware import TBE_CALLS, Hardware, load_hardware  # noqa: E402
from scratchkit.costmodel.servers import HOST_CORE_FILE  # noqa: E402

TBE_FIELDS = ("host_tbe_lookup", "host_tbe_backward", "host_tbe_update")
TBE_CALL_NAMES = tuple(f"tbe_{k}{part}" for k in TBE_CALLS for part in ("", "_table"))


def figures(value):
    """A measured value as the file keeps it: whole numbers (sizes on a curve's axes) whole, the
    rest to 3 significant figures."""
    if isinstance(value, (list, tuple)):
        return [figures(v) for v in value]
    if isinstance(value, dict):
        return {k: figures(v) for k, v in value.items()}
    if isinstance(value, float):
        return int(value) if value.is_integer() else float(f"{value:.3g}")
    return value


def dump(core: dict) -> str:
    """host_core.json's text: its header a line a key, then a line a field."""
    head = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in core.items() if k != "fields"]
    body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in core["fields"].items())
    return "\n".join(["{", *head, ' "fields": {', body, " }", "}"]) + "\n"


def fold(core: dict, hw: Hardware, names: list[str], commit: str) -> dict:
    """`core` (host_core.json's content) with `hw`'s fields `names` in it, each one's machine,
    date and commit noted; "host_calls" folds only the table-batched calls' fixed costs."""
    out = json.loads(json.dumps(core))
    data = hw.to_json()
    origin = hw.origin.removeprefix("calibrated ")  # "[(quick) ]YYYY-MM-DD HH:MM UTC on MACHINE"
    when, _, machine = origin.removeprefix("(quick) ").partition(" on ")
    when = f"{machine or 'an unnamed machine'} ({when}{', quick' if origin.startswith('(quick)') else ''})"
    for name in names:
        if name not in data or not name.startswith("host_"):
            raise ValueError(f"{name!r} is not a host field of the calibration")
        if name == "host_calls":
            out["fields"]["host_calls"] |= {k: figures(data["host_calls"][k]) for k in TBE_CALL_NAMES}
            what = f"{', '.join(TBE_CALL_NAMES)}: {when} at {commit}"
            out["notes"]["host_calls"] = "; ".join(filter(None, [out["notes"].get("host_calls"), what]))
            continue
        if data[name] is None:
            raise ValueError(f"the calibration did not measure {name} (no C++ compiler there?)")
        out["fields"][name] = figures(data[name])
        out["machine"][name] = when
        out["notes"][name] = f"{hw.sources.get(name, '')}; at {commit}".lstrip("; ")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hardware", type=Path, help="a calibration saved by `scratchkit calibrate --out`")
    parser.add_argument("fields", nargs="*", help="host fields to fold (default: the table-batched calls)")
    parser.add_argument("--dry-run", action="store_true", help="print the result, write nothing")
    args = parser.parse_args()
    hw = load_hardware(args.hardware)
    stale = [lib for lib, build in loop_builds().items() if hw.native_builds.get(lib) != build]
    if stale:
        raise SystemExit(f"{args.hardware}: measured with other builds of {', '.join(stale)}: calibrate again")
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    names = args.fields or [*TBE_FIELDS, "host_calls"]
    core = fold(json.loads(HOST_CORE_FILE.read_text()), hw, names, commit or "an unknown commit")
    text = dump(core)
    if args.dry_run:
        print(text)
    else:
        HOST_CORE_FILE.write_text(text)
        print(f"wrote {', '.join(names)} into {HOST_CORE_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
