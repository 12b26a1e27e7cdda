"""Execute the course notebooks and store only the outputs nbval checks.

Cells marked `# NBVAL_CHECK_OUTPUT` keep their (deterministic) outputs, which nbval compares on every
`make test`; every other output and all widget state are dropped, so the saved notebooks stay small
and carry nothing stale. Run after editing a notebook:

    .venv/bin/python scripts/refresh_notebooks.py [notebooks/NN_name.ipynb ...]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

MARK = "# NBVAL_CHECK_OUTPUT"


def strip(nb) -> None:
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if MARK not in cell.source:
            cell.outputs = []
        else:   # keep text only: widget views and figures hold random ids
            cell.outputs = [o for o in cell.outputs if o.get("output_type") == "stream"
                            or "text/plain" in o.get("data", {}) and "application/vnd.jupyter.widget-view+json" not in o.get("data", {})]
            for o in cell.outputs:
                if "data" in o:
                    o["data"] = {"text/plain": o["data"]["text/plain"]}
        # nbval refuses a checked cell with outputs but no execution count
        if MARK not in cell.source:
            cell.execution_count = None
        cell.metadata.pop("execution", None)


def refresh(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                   store_widget_state=False).execute()
    seconds = time.perf_counter() - started
    strip(nb)
    nbformat.write(nb, path)
    return seconds


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or sorted(Path("notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        print(f"{path}: executed in {refresh(path):.1f} s")
