"""The course's exercise cells and their solutions (solutions/NN_name.py), shared by the tests.

A notebook's exercise cells carry the cell tag `exercise`. "With the solutions filled in" means:
in each exercise cell, every top-level function or assignment whose name the notebook's solutions
file defines is replaced by the solution's source, and the solutions file's imports go first.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
SOLUTIONS = REPO / "solutions"
TAG = "exercise"


def solution_file(notebook: Path) -> Path:
    return SOLUTIONS / f"{notebook.stem}.py"


def load_solutions(path: Path):
    spec = importlib.util.spec_from_file_location(f"solutions_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def defined_names(path: Path) -> list[str]:
    """The functions and names a solutions file defines, in order."""
    tree = ast.parse(path.read_text())
    return [
        n.name if isinstance(n, ast.FunctionDef) else n.targets[0].id
        for n in tree.body
        if isinstance(n, ast.FunctionDef) or isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
    ]


def exercise_cells(nb) -> list[int]:
    return [i for i, cell in enumerate(nb.cells) if TAG in cell.get("metadata", {}).get("tags", [])]


def _segments(path: Path) -> tuple[dict[str, str], list[str]]:
    text = path.read_text()
    tree = ast.parse(text)
    defs, imports = {}, []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(ast.get_source_segment(text, node))
        elif isinstance(node, ast.FunctionDef):
            defs[node.name] = ast.get_source_segment(text, node)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            defs[node.targets[0].id] = ast.get_source_segment(text, node)
    return defs, imports


def fill_in(source: str, solutions: Path) -> tuple[str, list[str]]:
    """An exercise cell's source with its stubs replaced by the solutions; and the names replaced."""
    defs, imports = _segments(solutions)
    lines = source.split("\n")
    replaced = []
    for node in reversed(ast.parse(source).body):  # from the bottom, so line numbers hold
        name = (
            node.name
            if isinstance(node, ast.FunctionDef)
            else node.targets[0].id
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
            else None
        )
        if name in defs:
            lines[node.lineno - 1 : node.end_lineno] = defs[name].split("\n")
            replaced.append(name)
    return "\n".join(imports + lines), replaced[::-1]


def notebook_with_solutions(notebook: Path):
    """The notebook, its exercise cells filled in; and {cell index: names replaced}."""
    nb = nbformat.read(notebook, as_version=4)
    filled = {}
    for i in exercise_cells(nb):
        nb.cells[i].source, filled[i] = fill_in(nb.cells[i].source, solution_file(notebook))
    return nb, filled
