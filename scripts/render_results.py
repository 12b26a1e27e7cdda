"""Render docs/results.md from the run records in results/*.json (scratchkit/measure/record.py).

    .venv/bin/python scripts/render_results.py           # write docs/results.md
    .venv/bin/python scripts/render_results.py --check   # exit 1 if docs/results.md is out of date

Each record becomes a section: the command that made it, the commit, the date, the machine, then
its figures, whatever shape a benchmark gives them: a table for each group of rows (a dict or a
list of dicts), a line for a single figure or a dict of them, a group of these for anything
deeper. So a benchmark's record renders without a line here for it (the fault campaign's, the
trainers', and the peers', validation's and projections' records where they are present). A
record that names a `page` is rendered there by its own script, with what it derives from it
(results/published-gpu.json: scripts/check_published.py); its section here links to it.
The README and the docs quote these figures and link here; the README's headline table (between
its `<!-- headline -->` markers) is rendered here too, from results/projections.json
(scratchkit/course/headline.py, which notebook 05 shows), its measured-beside-projected table
(between its `<!-- measured -->` markers) from results/gpu-h200.json (scratchkit/course/measured.py),
and its course table (between its
`<!-- course -->` markers) from the notebooks' title cells and the times in results/notebooks.json
(scratchkit/course/catalogue.py, whose table notebook 00 shows).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEADER = (
    "# Results\n\nRendered from `results/*.json` by `scripts/render_results.py`; do not edit "
    "by hand. Each section is one recorded run: rerun its command to check it.\n"
)


LONGEST_LIST = 12  # a list longer than this is left in the record: the page says how long it is


def cell(value) -> str:
    """One figure as text: floats to 3 significant digits (whole numbers from 100 up), thousands
    separated from 10,000 up, lists short; a projection (a dict with samples/s) as its speed, its
    speed over each peer (its `x_<peer>` figures) and what bounds it."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    if isinstance(value, list):
        if len(value) > LONGEST_LIST or any(isinstance(v, (dict, list)) for v in value):
            return f"({len(value)} values: see the record)"
        return ", ".join(cell(v) for v in value)
    if isinstance(value, dict) and "samples_per_s" in value:
        peers = "".join(
            f", {v:.2f}x {k[2:].replace('_', '-')}" for k, v in value.items() if k.startswith("x_")
        )  # x_hybrid: over hybrid's (bench_projections)
        return f"{value['samples_per_s']:,.0f}/s{peers}; {value.get('bound_stage', '')}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {cell(v)}" for k, v in value.items())
    return str(value)


def depth(value) -> int:
    """How deep dicts nest in `value`: 0 for a figure or a list, 1 for a dict of figures, ..."""
    return 1 + max(map(depth, value.values()), default=0) if isinstance(value, dict) else 0


def flat(row: dict) -> dict:
    """A row with its dicts one level down spread into columns `key.sub`."""
    out = {}
    for key, value in row.items():
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def table(rows: dict) -> list[str]:
    rows = {name: flat(row) for name, row in rows.items()}
    columns = list(dict.fromkeys(k for row in rows.values() for k in row))
    lines = ["| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for name, row in rows.items()]
    return lines


def figure(key: str, value) -> list[str]:
    """One of a record's figures: a table for rows (a dict or list of dicts, at most two deep),
    a line for a figure or a dict of figures, and for anything deeper a line of its figures, then
    each of its dicts in turn."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        value = named_rows(value)
    if (
        isinstance(value, dict)
        and value
        and all(isinstance(v, dict) for v in value.values())
        and all(depth(v) <= 2 for v in value.values())
    ):
        return [f"**{key}**", "", *table(value), ""]
    if isinstance(value, dict) and depth(value) > 1:
        plain = {k: v for k, v in value.items() if not isinstance(v, dict)}
        lines = [f"**{key}**: {cell(plain)}", ""] if plain else []
        return lines + [line for k, v in value.items() if isinstance(v, dict) for line in figure(f"{key}: {k}", v)]
    return [f"**{key}**: {cell(value)}", ""]


def named_rows(rows: list[dict]) -> dict:
    """A list of rows as a dict: named by their first field where it names each once, else numbered."""
    first = [next(iter(row.values()), None) for row in rows]
    if all(isinstance(f, str) for f in first) and len(set(first)) == len(first):
        return {f: dict(list(row.items())[1:]) for f, row in zip(first, rows)}
    return {str(i): row for i, row in enumerate(rows)}


def section(name: str, record: dict) -> list[str]:
    lines = [
        f"## {name}",
        "",
        f"- command: `{record['command']}`",
        f"- commit: `{record['commit']}`",
        f"- date: {record['date']}",
        f"- machine: {record['machine']}",
        "",
    ]
    if "page" in record:  # a record its own script renders (with what it derives from it)
        page = Path(record["page"]).name
        return lines + [f"Its figures are rendered in [{page}]({page}).", ""]
    for key, value in record["figures"].items():
        lines += figure(key, value)
    return lines


def render(folder: Path = REPO / "results") -> str:
    lines = [HEADER]
    for path in sorted(folder.glob("*.json")):
        lines += section(f"{path.stem} (`results/{path.name}`)", json.loads(path.read_text()))
    return "\n".join(lines).rstrip() + "\n"


HEADLINE = (
    "<!-- headline: rendered from results/projections.json by scripts/render_results.py -->",
    "<!-- end of headline -->",
)
MEASURED = (
    "<!-- measured: rendered from results/gpu-h200.json by scripts/render_results.py -->",
    "<!-- end of measured -->",
)
COURSE = (
    "<!-- course: rendered from notebooks/*.py and results/notebooks.json by scripts/render_results.py -->",
    "<!-- end of course -->",
)


def between(readme: str, markers: tuple[str, str], text: str) -> str:
    """The README with `text` between its two `markers` (each kept)."""
    start, end = markers
    if start not in readme or end not in readme:
        raise ValueError(f"README.md lacks the markers {start} ... {end}")
    before, rest = readme.split(start, 1)
    after = rest.split(end, 1)[1]
    return f"{before}{start}\n{text}\n{end}{after}"


def with_headline(readme: str, folder: Path = REPO / "results") -> str:
    """The README with the table between its headline markers rendered from the projection record."""
    sys.path.insert(0, str(REPO))
    from scratchkit.course.headline import headline_markdown, recorded

    return between(readme, HEADLINE, headline_markdown(recorded(folder / "projections.json")))


def with_measured(readme: str, folder: Path = REPO / "results") -> str:
    """The README with the GPU record's measured-beside-projected table between its markers."""
    sys.path.insert(0, str(REPO))
    from scratchkit.course.measured import measured_markdown, recorded

    record = recorded(folder / "gpu-h200.json")
    text = measured_markdown(record) if record else "No GPU run is recorded yet (docs/gpu.md)."
    return between(readme, MEASURED, text)


def with_course(readme: str, folder: Path = REPO / "results") -> str:
    """The README with its course table rendered from the notebooks and their recorded times."""
    sys.path.insert(0, str(REPO))
    from scratchkit.course.catalogue import course_markdown, recorded_times

    return between(readme, COURSE, course_markdown(recorded_times(folder / "notebooks.json")))


def keep_current(targets: dict[Path, str], check: bool, script: str) -> int:
    """Write each target whose text differs from what is rendered for it; `check`: write nothing,
    name each stale one and return 1 if there is any (the test that keeps the pages current)."""
    stale = [path for path, text in targets.items() if not path.exists() or path.read_text() != text]
    if check:
        for path in stale:
            print(f"{path} is out of date: run {script}", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(targets[path])
        print(f"wrote {path}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check that docs/results.md and the README's headline, measured and course tables are current",
    )
    args = parser.parse_args(argv)
    readme = REPO / "README.md"
    targets = {
        REPO / "docs" / "results.md": render(),
        readme: with_course(with_measured(with_headline(readme.read_text()))),
    }
    return keep_current(targets, args.check, "scripts/render_results.py")


if __name__ == "__main__":
    sys.exit(main())
