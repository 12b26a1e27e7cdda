"""Constants the kit took from a measurement, read from `measured.json` beside this module, each
with where it came from: what it is, the command that measured it, the commit, the date and the
machine, and the figures it was chosen from. `scripts/measure_constants.py` measures them again
and rewrites the file, so no measured number sits in the code without its provenance.

    from scratchkit.measured import measured
    MISS_SHARE = measured("miss_share")
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

DATA = Path(__file__).with_name("measured.json")
PROVENANCE = ("what", "command", "commit", "date", "machine")  # every entry says these


@cache
def entries() -> dict[str, dict]:
    """Every measured constant's entry: {name: {"value": ..., "what": ..., "command": ..., ...}}."""
    return json.loads(DATA.read_text())


def measured(name: str):
    """The value of the measured constant `name`; a KeyError names the file and what it holds."""
    try:
        return entries()[name]["value"]
    except KeyError:
        raise KeyError(
            f"{DATA} has no measured constant {name!r} (it has {', '.join(entries())}): "
            "scripts/measure_constants.py writes them"
        ) from None


def provenance(name: str) -> dict:
    """Where `name`'s value came from: its entry without the value."""
    return {k: v for k, v in entries()[name].items() if k != "value"}
