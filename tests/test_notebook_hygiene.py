"""Saved notebooks: no widget state (a plotly FigureWidget stores ~5 MB), no stale outputs, no errors."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
MARK = "# NBVAL_CHECK_OUTPUT"


def test_there_is_a_course():
    assert any(p.name.startswith("00_welcome") for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_clean(path):
    nb = json.loads(path.read_text())
    assert "widgets" not in nb.get("metadata", {}), "widget state saved: strip it"
    assert path.stat().st_size < 200_000, "too big: outputs or widget state saved"
    assert nb["metadata"].get("kernelspec", {}).get("name") == "python3", (
        "no python3 kernelspec: save it from JupyterLab, or give its .py the header of another notebook's"
    )
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        outputs = cell.get("outputs", [])
        assert all(o["output_type"] != "error" for o in outputs), f"cell {i} stores an error"
        if MARK not in source:
            # only the checked cells keep outputs: anything else would go stale unnoticed
            assert outputs == [], f"cell {i} keeps outputs nbval does not check: run scripts/refresh_notebooks.py"
        for o in outputs:
            assert "application/vnd.jupyter.widget-view+json" not in o.get("data", {})
