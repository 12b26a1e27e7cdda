"""Each course notebook is a pair: NN_name.py (jupytext's percent format, the source reviewed in diffs)
and NN_name.ipynb (what nbval runs, with the outputs it checks). A pair whose cells differ fails here,
with the command that syncs it; JupyterLab writes both files on save (tests/test_browser.py)."""

import re
import shutil
from itertools import zip_longest
from pathlib import Path

import jupytext
import nbformat
import pytest
from jupytext.config import load_jupytext_config

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PAIRS = sorted(NOTEBOOKS.glob("*.ipynb"))


def sync_command(existing: Path) -> str:
    """The command that brings a pair in step (and writes its missing half), run on a file that exists."""
    return f".venv/bin/jupytext --sync notebooks/{existing.name}"


def cells(nb) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in nb.cells]


def first_difference(notebook: Path) -> str | None:
    """Where the .ipynb's cells and its .py's (as jupytext reads it, with notebooks/jupytext.toml)
    part ways, in words; None when their types and sources agree."""
    source = notebook.with_suffix(".py")
    ipynb = cells(nbformat.read(notebook, as_version=4))
    text = cells(jupytext.read(source, config=load_jupytext_config(str(source))))
    for i, (a, b) in enumerate(zip(ipynb, text)):
        if a[0] != b[0]:
            return f"cell {i}: a {a[0]} cell in the .ipynb, a {b[0]} cell in the .py"
        if a[1] != b[1]:
            return f"cell {i}, {first_different_line(a[1], b[1])}"
    if len(ipynb) != len(text):
        return f"the .ipynb has {len(ipynb)} cells, the .py {len(text)}"
    return None


def first_different_line(ipynb: str, text: str) -> str:
    # split("\n") and zip_longest, so that a difference of a trailing newline or line is found too
    lines = enumerate(zip_longest(ipynb.split("\n"), text.split("\n"), fillvalue="(no line)"), 1)
    n, (a, b) = next((n, pair) for n, pair in lines if pair[0] != pair[1])
    return f"line {n}: {a!r} in the .ipynb, {b!r} in the .py"


def out_of_sync(notebook: Path, difference: str) -> str:
    return (
        f"{notebook.name} and {notebook.with_suffix('.py').name} differ at {difference}.\n"
        f"Sync them: {sync_command(notebook.with_suffix('.py'))}  (jupytext keeps the cells of the file saved last)"
    )


def test_jupytext_pairs_the_course_with_percent_scripts():
    # the CLI finds notebooks/jupytext.toml from a notebook's folder, as JupyterLab's contents manager does
    config = load_jupytext_config(str(PAIRS[0]))
    assert config is not None, "notebooks/jupytext.toml is missing: nothing pairs the notebooks"
    assert "ipynb,py:percent" in config.formats


def test_every_notebook_has_its_source_and_every_source_its_notebook():
    ipynb = {p.stem for p in PAIRS}
    py = {p.stem for p in NOTEBOOKS.glob("*.py")}
    assert ipynb, "no notebooks"
    missing_py = [sync_command(NOTEBOOKS / f"{stem}.ipynb") for stem in sorted(ipynb - py)]
    missing_ipynb = [sync_command(NOTEBOOKS / f"{stem}.py") for stem in sorted(py - ipynb)]
    assert not missing_py, f"notebooks without their .py source; write it: {'; '.join(missing_py)}"
    assert not missing_ipynb, f".py sources without their notebook; write it: {'; '.join(missing_ipynb)}"


@pytest.mark.parametrize("notebook", PAIRS, ids=lambda p: p.name)
def test_pair_has_the_same_cells(notebook):
    if not notebook.with_suffix(".py").exists():
        pytest.fail(f"{notebook.name} has no .py source; write it: {sync_command(notebook)}")
    difference = first_difference(notebook)
    assert difference is None, out_of_sync(notebook, difference)


def test_the_first_different_line_is_named():
    assert first_different_line("a\nb", "a\nc") == "line 2: 'b' in the .ipynb, 'c' in the .py"
    assert first_different_line("a", "a\n") == "line 2: '(no line)' in the .ipynb, '' in the .py"


@pytest.mark.parametrize("edit", ["change a line", "add a cell"])
def test_a_pair_edited_on_one_side_is_caught(tmp_path, edit):
    """The check above can fail: a copy of a pair agrees, then its .py is edited and it is reported."""
    shutil.copy(NOTEBOOKS / "jupytext.toml", tmp_path)
    notebook = tmp_path / PAIRS[0].name
    shutil.copy(PAIRS[0], notebook)
    source = Path(shutil.copy(PAIRS[0].with_suffix(".py"), tmp_path))
    assert first_difference(notebook) is None
    text = source.read_text()
    if edit == "change a line":
        first_code = text.index("\n# %%\n") + len("\n# %%\n")
        text = text[:first_code] + "import os\n" + text[first_code:]
    else:
        text += "\n# %%\nprint('one more cell')\n"
    source.write_text(text)
    difference = first_difference(notebook)
    assert difference is not None
    assert ("import os" if edit == "change a line" else "cells, the .py") in difference
    assert "jupytext --sync notebooks/" in out_of_sync(notebook, difference)


ABSOLUTE_PATH = re.compile(r"(?<![\w./])/(?:work|tmp|home|root|Users)/")


@pytest.mark.parametrize("notebook", PAIRS, ids=lambda p: p.name)
def test_checked_outputs_name_no_machine_path(notebook):
    """nbval compares the outputs of cells marked NBVAL_CHECK_OUTPUT as text: one that printed where
    the repository was when it was recorded (/work/..., /home/...) fails on every other clone."""
    nb = nbformat.read(notebook, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "NBVAL_CHECK_OUTPUT" not in cell.source:
            continue
        for output in cell.get("outputs", []):
            text = output.get("text", "") + "".join(output.get("data", {}).get("text/plain", ""))
            found = ABSOLUTE_PATH.search(text)
            assert found is None, f"{notebook.name} cell {i} prints a machine's path: ...{text[found.start() :][:60]}"
