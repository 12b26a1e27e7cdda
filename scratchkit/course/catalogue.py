"""Lists of what the course and the kit hold, made from where each is defined, so that no list
can fall behind its source: the notebooks folder (each notebook's title cell says what it shows
and what you write in it) and the designs' registry (designs/__init__.py).

    notebooks()                  [Notebook] of notebooks/NN_name.py, in order
    course_table()               notebook 00's table of the course
    course_markdown(record)      the README's course table, with each notebook's time where a run
                                 of benchmarks/bench_notebooks.py recorded one (results/notebooks.json)
    trainer_table()              notebook 05's table: every registered trainer and what it is

A notebook's title cell carries two labelled paragraphs, which the tables quote:

    # # 03 · Looking forward
    # ...
    # **Shows:** reuse between batches, the working set of a look-ahead window, ...
    #
    # **You write:** the working set of a look-ahead window, the minimum scratchpad size
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
TIMES = REPO / "results" / "notebooks.json"
SHOWS, WRITES = "**Shows:**", "**You write:**"


@dataclass(frozen=True)
class Notebook:
    name: str  # NN_name, the file's stem
    title: str  # the title cell's heading, without its number
    shows: str  # the **Shows:** paragraph
    writes: str  # the **You write:** paragraph


def notebooks(folder: Path = NOTEBOOKS) -> list[Notebook]:
    """Every notebook of the course, from its jupytext source (the `.py` of the pair)."""
    return [_read(path) for path in sorted(folder.glob("[0-9][0-9]_*.py"))]


def _read(path: Path) -> Notebook:
    text = _title_cell(path.read_text())
    heading = next((line for line in text if line.startswith("# ")), None)
    shows, writes = _paragraph(text, SHOWS), _paragraph(text, WRITES)
    if heading is None or shows is None or writes is None:
        raise ValueError(
            f"{path}: its first markdown cell needs a '# ' heading, a {SHOWS} paragraph and a "
            f"{WRITES} paragraph (scratchkit/course/catalogue.py)"
        )
    return Notebook(path.stem, re.sub(r"^\d\d · ", "", heading[2:].strip()), shows, writes)


def _title_cell(source: str) -> list[str]:
    """The lines of the first markdown cell of a jupytext percent source, without their '# '."""
    lines, inside = [], False
    for line in source.splitlines():
        if line.startswith("# %%"):
            if inside:
                break
            inside = "[markdown]" in line
            continue
        if inside:
            if not line.startswith("#"):
                break
            lines.append(line[2:] if line.startswith("# ") else line[1:])
    return lines


def _paragraph(lines: list[str], label: str) -> str | None:
    """The paragraph that starts with `label`, joined into one line, the label left out."""
    for i, line in enumerate(lines):
        if line.startswith(label):
            rest = []
            for more in lines[i + 1 :]:
                if not more.strip():
                    break
                rest.append(more.strip())
            return " ".join([line[len(label) :].strip(), *rest]).strip()
    return None


class Markdown:
    """Markdown text a notebook shows as such (`_repr_markdown_`); `str()` gives the text."""

    def __init__(self, text: str):
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    cells = lambda row: "| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"
    return [cells(head), "|" + "---|" * len(head), *(cells(r) for r in rows)]


def course_table(folder: Path = NOTEBOOKS) -> Markdown:
    """Notebook 00's course: a row per notebook of the folder."""
    rows = [[f"`{n.name}`", n.shows, n.writes] for n in notebooks(folder)]
    return Markdown("\n".join(_table(["notebook", "what it shows", "what you write"], rows)))


def recorded_times(path: Path = TIMES) -> dict | None:
    """A run of benchmarks/bench_notebooks.py --record (its record), or None where none is kept."""
    return json.loads(path.read_text()) if path.exists() else None


def course_markdown(record: dict | None, folder: Path = NOTEBOOKS) -> str:
    """The README's course table: a row per notebook, its time where `record` (a run record of
    benchmarks/bench_notebooks.py) has one, and a line saying where the times come from."""
    seconds = (record or {}).get("figures", {}).get("seconds", {})
    head = ["notebook", "what it shows", "what you write"] + (["time"] if seconds else [])
    rows = [
        [f"`{n.name}`", n.shows, n.writes]
        + ([f"{seconds[n.name]['median']:.0f} s" if n.name in seconds else "-"] if seconds else [])
        for n in notebooks(folder)
    ]
    if seconds:
        what = "with the exercises' solutions filled in" if record["figures"].get("solutions") else "as shipped"
        source = (
            f"Times: each notebook top to bottom {what}, the median of {record['figures'].get('rounds', '?')} "
            f"rounds of `benchmarks/bench_notebooks.py` (`results/notebooks.json`; its command, commit, date "
            f"and machine in docs/results.md)."
        )
    else:
        source = (
            "Times: none recorded for these notebooks yet; "
            "`benchmarks/bench_notebooks.py --record results/notebooks.json` records them."
        )
    return "\n".join(_table(head, rows) + ["", source])


def trainer_table() -> Markdown:
    """Every registered trainer and its line of help: notebook 05's opening table."""
    from scratchkit.designs import DESIGNS

    rows = [[f"`{name}`", design.help] for name, design in DESIGNS.items()]
    return Markdown("\n".join(_table(["trainer", "what it is"], rows)))
