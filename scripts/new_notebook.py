"""Write a notebook from a list of (kind, source) cells: used once per notebook, then edit in Lab.

    python scripts/new_notebook.py   (imports nothing from the kit; needs nbformat)
"""
from __future__ import annotations

import nbformat


def write_notebook(path: str, cells: list[tuple[str, str]]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, source in cells:
        source = source.strip("\n")
        nb.cells.append(nbformat.v4.new_markdown_cell(source) if kind == "md"
                        else nbformat.v4.new_code_cell(source))
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    nbformat.validate(nb)
    nbformat.write(nb, path)
