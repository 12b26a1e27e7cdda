"""Execute the course notebooks and store only the outputs nbval checks.

Cells marked `# NBVAL_CHECK_OUTPUT` keep their (deterministic) outputs, which nbval compares on every
`make test`; every other output and all widget state are dropped, so the saved notebooks stay small
and carry nothing stale. Run after editing a notebook (its .py source or the .ipynb):

    .venv/bin/python scripts/refresh_notebooks.py [notebooks/NN_name.py|.ipynb ...]

Each notebook is a pair (notebooks/jupytext.toml): NN_name.py, the source, and NN_name.ipynb. The
pair is synced before the run, so an edit saved to the .py in an editor is what runs, and after the
.ipynb is written, so the two end with the same cells.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from jupytext.cli import jupytext
from nbclient import NotebookClient

MARK = "# NBVAL_CHECK_OUTPUT"


def strip(nb) -> None:
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if MARK not in cell.source:
            cell.outputs = []
        else:  # keep text only: widget views and figures hold random ids
            cell.outputs = [
                o
                for o in cell.outputs
                if o.get("output_type") == "stream"
                or "text/plain" in o.get("data", {})
                and "application/vnd.jupyter.widget-view+json" not in o.get("data", {})
            ]
            for o in cell.outputs:
                if "data" in o:
                    o["data"] = {"text/plain": o["data"]["text/plain"]}
        # nbval refuses a checked cell with outputs but no execution count
        if MARK not in cell.source:
            cell.execution_count = None
        cell.metadata.pop("execution", None)


def sync(path: Path) -> None:
    """Bring the pair in step: jupytext takes the cells of whichever file was saved last (a new .py
    gets its .ipynb here). A notebook with no pairing raises rather than running half a pair."""
    jupytext(["--sync", "--quiet", str(path)])


def refresh(path: Path) -> float:
    path, source = path.with_suffix(".ipynb"), path.with_suffix(".py")
    sync(source if source.exists() else path)  # a new notebook may have only its .py so far
    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,
    ).execute()
    seconds = time.perf_counter() - started
    strip(nb)
    nbformat.write(nb, path)
    sync(path)  # the .ipynb is now the newer file: the .py is rewritten from it (same cells)
    return seconds


def course() -> list[Path]:
    """Every notebook of the course, by either file of its pair (a .py may not have its .ipynb yet)."""
    stems = {p.with_suffix("") for p in Path("notebooks").glob("[0-9][0-9]_*") if p.suffix in (".py", ".ipynb")}
    return sorted(stem.with_suffix(".ipynb") for stem in stems)


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or course()
    for path in paths:
        print(f"{path}: executed in {refresh(path):.1f} s")
