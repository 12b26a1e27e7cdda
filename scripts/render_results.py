"""Render docs/results.md from the run records in results/*.json (scratchkit/measure/record.py).

    .venv/bin/python scripts/render_results.py           # write docs/results.md
    .venv/bin/python scripts/render_results.py --check   # exit 1 if docs/results.md is out of date

Each record becomes a section: the command that made it, the commit, the date, the machine, then
its figures: a table for each group of rows (a dict of dicts), a line for each single figure.
The README and the docs quote these figures and link here.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEADER = ("# Results\n\nRendered from `results/*.json` by `scripts/render_results.py`; do not edit "
          "by hand. Each section is one recorded run: rerun its command to check it.\n")


def cell(value) -> str:
    """A table cell: a projection (a dict with samples/s) as its speed, its speed over the peers
    and what bounds it; anything else as it is."""
    if isinstance(value, dict) and "samples_per_s" in value:
        peers = "".join(f", {value[k]:.2f}x {peer}" for k, peer in (("x_hybrid", "hybrid"),
                                                                    ("x_prefetch_lru", "prefetch-lru"))
                        if k in value)
        return f"{value['samples_per_s']:,.0f}/s{peers}; {value.get('bound_stage', '')}"
    return str(value)


def table(rows: dict) -> list[str]:
    columns = list(dict.fromkeys(k for row in rows.values() for k in row))
    lines = ["| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(cell(row.get(c, "")) for c in columns) + " |"
              for name, row in rows.items()]
    return lines


def section(name: str, record: dict) -> list[str]:
    lines = [f"## {name}", "", f"- command: `{record['command']}`", f"- commit: `{record['commit']}`",
             f"- date: {record['date']}", f"- machine: {record['machine']}", ""]
    for key, value in record["figures"].items():
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            lines += [f"**{key}**", "", *table(value), ""]
        elif isinstance(value, dict):
            lines += [f"**{key}**: " + ", ".join(f"{k} {v}" for k, v in value.items()), ""]
        else:
            lines += [f"**{key}**: {value}", ""]
    return lines


def render(folder: Path = REPO / "results") -> str:
    lines = [HEADER]
    for path in sorted(folder.glob("*.json")):
        lines += section(f"{path.stem} (`results/{path.name}`)", json.loads(path.read_text()))
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that docs/results.md is current")
    args = parser.parse_args(argv)
    target, text = REPO / "docs" / "results.md", render()
    if args.check:
        if not target.exists() or target.read_text() != text:
            print(f"{target} is out of date: run scripts/render_results.py", file=sys.stderr)
            return 1
        return 0
    target.write_text(text)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
