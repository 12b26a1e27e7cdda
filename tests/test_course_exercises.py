"""The course's exercises: every solution passes its check, a wrong answer gets its hint, and every
notebook runs with the solutions filled in, every check passing.

As shipped, the notebooks run in nbval (pytest's run of notebooks/): there the exercise cells must
stop with NotImplementedError and no other cell may fail (conftest.py at the root checks it).
"""

from __future__ import annotations

import ast

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from course_solutions import (
    NOTEBOOKS,
    SOLUTIONS,
    defined_names,
    exercise_cells,
    fill_in,
    load_solutions,
    notebook_with_solutions,
    solution_file,
)
from scratchkit.course.exercises import EXERCISES, check

WITH_EXERCISES = sorted(p for p in NOTEBOOKS.glob("*.ipynb") if solution_file(p).exists())
PYTHON_SOLUTIONS = [
    (path, name)
    for path in sorted(SOLUTIONS.glob("0*.py"))
    if not path.stem.startswith("08")
    for name in defined_names(path)
]


@pytest.mark.parametrize("path,name", PYTHON_SOLUTIONS, ids=lambda v: getattr(v, "stem", v))
def test_each_solution_passes_its_check(path, name):
    result = check(getattr(load_solutions(path), name))
    assert result.passed, result.text()


def test_every_exercise_has_a_solution_and_a_wrong_answer():
    assert {name for _, name in PYTHON_SOLUTIONS} == set(EXERCISES) == set(WRONG)


def _reduceat_bags(table, ids, offsets):  # the classic: reduceat on an empty bag
    return np.add.reduceat(table[ids], offsets)


def _fifo_hits(trace, capacity):  # first in, first out: a hit does not refresh
    cache, hits = [], 0
    for i in trace:
        if i in cache:
            hits += 1
        else:
            cache.append(i)
            if len(cache) > capacity:
                cache.pop(0)
    return hits


def _victims_ignoring_holds(slot_ids, held, next_use, count):
    candidates = [s for s in range(len(slot_ids)) if slot_ids[s] >= 0]
    return sorted(sorted(candidates, key=lambda s: (-next_use.get(int(slot_ids[s]), 1e18), s))[:count])


def _first_ids_share(trace, fraction):  # the smallest ids, not the hottest
    ids, counts = np.unique(trace, return_counts=True)
    return counts[: max(1, int(np.ceil(fraction * ids.size)))].sum() / len(trace)


def _request_bytes_over_lookups(micro_ids, plan, rank, dim):  # every lookup travels, duplicates too
    remote = sum(int((plan.owners(t, ids) != rank).sum()) for t, ids in enumerate(micro_ids))
    return 8 * len(micro_ids) * (plan.world_size - 1) + remote * (8 + 4 * dim)


def _last_use_victims(slot_ids, held, keep, window, count):  # a later use overwrites the first
    last = {int(i): k for k, ids in enumerate(window, start=1) for i in ids}
    candidates = [s for s in range(len(slot_ids)) if slot_ids[s] >= 0 and not held[s] and s not in set(keep)]
    return sorted(sorted(candidates, key=lambda s: (-last.get(int(slot_ids[s]), 1e18), s))[:count])


_CAPSTONE = load_solutions(SOLUTIONS / "09_capstone_planner.py")


# exercise -> (a wrong answer, words its failure must contain)
WRONG = {
    "bag_sums": (_reduceat_bags, ["case 3 of 6 (an empty bag in the middle)", "its pooled row is all zeros"]),
    "embedding_share": (
        lambda s: (s["embedding_forward"] + s["embedding_backward"] + s["update"]) / sum(s.values()),
        ["raised KeyError", "a step need not have every stage"],
    ),
    "criteo_scale_for": (
        lambda gib, dim: next(
            k / 100
            for k in range(1, 10**5)
            if sum(__import__("scratchkit").criteo_like(k / 100).data.table_sizes) * dim * 4 > gib * 1e9
        ),
        ["case 1 of 4", "a GiB is 2**30 bytes, not 1e9"],
    ),
    "lru_hits": (
        _fifo_hits,
        ["case 2 of 6 (a hit refreshes a row)", "returned 1, expected 2", "a hit moves its row to the most recent end"],
    ),
    "smallest_capacity": (
        lambda hits, lookups, target: next((c for c, h in enumerate(hits) if h / lookups >= target), None),
        ["returned 2, expected 3", "capacity c is hits[c - 1]"],
    ),
    "embedding_speedup": (lambda h, s: 1 / (1 - h), ["raised ZeroDivisionError", "hit_speedup times faster"]),
    "window_working_set": (
        lambda sets, b, depth: sum(len(s) for s in sets[b : b + depth + 1]),
        ["(two batches sharing id 3)", "returned 5, expected 4", "count distinct ids"],
    ),
    "min_scratchpad": (
        lambda sets, depth: len(set().union(*map(set, sets[: depth + 1]))),
        ["the largest window is not the first", "keep the largest"],
    ),
    "choose_victims": (_victims_ignoring_holds, ["(the furthest slot is held)", "invariant 4"]),
    "insert_can_start": (
        lambda b, trained, depth: trained >= b - depth,
        ["case 2 of 6", "returned False, expected True", "Train(0) is exactly"],
    ),
    "hybrid_transfer_seconds": (
        lambda config, machine: (
            config.data.batch_size * len(config.data.table_sizes) * config.model.dim * 4 / machine.pcie_bw
            + machine.pcie_latency
        ),
        ["case 1 of 4", "pooled vectors up, their gradients down"],
    ),
    "pipeline_step_seconds": (
        lambda stages, cores: sum(stages.values()),
        ["(the host threads are busiest)", "each run on a thread of their own"],
    ),
    "hottest_share": (
        _first_ids_share,
        [
            "case 2 of 6 (the hottest ids are not the smallest)",
            "returned 0.5, expected 0.833333",
            "by their number of lookups",
        ],
    ),
    "table_rows": (
        lambda values, max_rows: (
            np.searchsorted(np.unique(values), values)
            if max_rows is None or np.unique(values).size < max_rows
            else values % max_rows
        ),
        ["case 3 of 6 (exactly max_rows distinct values)", "max_rows distinct values or fewer"],
    ),
    "row_owner": (
        lambda ids, rows, world_size: np.asarray(ids) // (rows // world_size),
        [
            "case 2 of 5 (10 rows over 4 ranks: blocks of 3)",
            "element [2] is 1, expected 0",
            "block = ceil(rows / world_size)",
        ],
    ),
    "request_bytes": (
        _request_bytes_over_lookups,
        ["case 2 of 5 (an id asked for twice)", "returned 88, expected 64", "id 7, looked up twice"],
    ),
    "working_set": (
        lambda ids, slot_ids: (np.unique(ids), np.full(np.unique(ids).size, -1)),
        ["case 2 of 4 (repeats, every id resident)", "found: element [0] is -1, expected 0"],
    ),
    "misses_and_free": (
        lambda unique, found, slot_ids: (unique[found >= 0], np.flatnonzero(slot_ids < 0)),
        ["case 1 of 3 (two misses, two free slots)", "misses: returned an array of shape"],
    ),
    "unheld_victims": (
        lambda slot_ids, held, keep, count: np.flatnonzero((slot_ids >= 0) & ~held)[:count],
        ["case 3 of 5 (this batch's own hits)", "`keep` are the slots of this batch's hits"],
    ),
    "furthest_victims": (_last_use_victims, ["case 2 of 5 (the first use counts)", "the first batch of the window"]),
    "plan_batch": (
        lambda b, ids, slot_ids, held, window: _CAPSTONE.plan_batch(b, ids, slot_ids, 0 * held, window),
        ["case 3 of 4", "Plan(5), table 0: invariant 4", "is held by batch 4, still in flight"],
    ),
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_answer_gets_the_case_and_its_hint(name):
    wrong, words = WRONG[name]
    result = check(wrong, exercise=name)
    assert not result.passed
    for text in words:
        assert text in result.text(), f"{text!r} not in:\n{result.text()}"


def test_a_stub_stops_the_cell_with_not_implemented():
    def lru_hits(trace, capacity):
        raise NotImplementedError("write lru_hits")

    with pytest.raises(NotImplementedError, match="write lru_hits"):
        check(lru_hits)


def test_a_stub_shows_in_ipython_as_one_line_saying_what_to_write_and_where(capsys):
    """IPython (a notebook's kernel) shows the stub's error as one line, not a traceback through
    the kit; the cell still stops with the NotImplementedError (nbval's run checks it as shipped)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell(
        "from scratchkit.course.exercises import check\n"
        "def lru_hits(trace, capacity):\n    raise NotImplementedError('write lru_hits')\n"
    )
    capsys.readouterr()
    result = shell.run_cell("check(lru_hits)")
    shown = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert isinstance(result.error_in_exec, NotImplementedError)
    assert shown == [
        "\u2718 lru_hits(trace, capacity) is not written yet: write its body in this cell, in place "
        "of its `raise NotImplementedError`, then run the cell again"
    ], shown


def test_an_unknown_exercise_is_named_with_the_known_ones():
    def lru_hit(trace, capacity):
        return 0

    with pytest.raises(ValueError, match="no exercise called 'lru_hit'.*lru_hits"):
        check(lru_hit)


def test_a_function_that_must_refuse_an_input_is_held_to_it():
    def choose_victims(slot_ids, held, next_use, count):  # right, except that it never refuses
        candidates = [s for s in range(len(slot_ids)) if slot_ids[s] >= 0 and not held[s]]
        return sorted(sorted(candidates, key=lambda s: (-next_use.get(int(slot_ids[s]), 1e18), s))[:count])

    result = check(choose_victims)
    assert "case 5 of 6 (not enough candidates): returned [0] instead of refusing the input" in result.text()
    assert "raise ValueError" in result.text()


# ------------------------------------------------------------------------------ the notebooks
def test_the_exercise_cells_are_tagged_and_their_stubs_raise():
    """Each notebook with a solutions file has >= 2 exercise cells; each defines what the solutions
    replace, calls check, and stubs every function with NotImplementedError."""
    for notebook in WITH_EXERCISES:
        nb = nbformat.read(notebook, as_version=4)
        cells = exercise_cells(nb)
        assert len(cells) >= 2, f"{notebook.name}: {len(cells)} exercise cells"
        replaced = []
        for i in cells:
            assert "raises-exception" in nb.cells[i].metadata["tags"], f"{notebook.name} cell {i}: nbval tag"
            assert "check(" in nb.cells[i].source, f"{notebook.name} cell {i} calls no check"
            _, names = fill_in(nb.cells[i].source, solution_file(notebook))
            assert names, f"{notebook.name} cell {i}: nothing in it has a solution"
            replaced += names
            for node in ast.parse(nb.cells[i].source).body:
                if isinstance(node, ast.FunctionDef):
                    assert "NotImplementedError" in ast.unparse(node), f"{node.name} in {notebook.name}"
        assert sorted(replaced) == sorted(defined_names(solution_file(notebook))), notebook.name


def test_jupytext_keeps_the_exercise_tags_in_the_py_source():
    import jupytext

    for notebook in WITH_EXERCISES:
        text = jupytext.read(notebook.with_suffix(".py"))
        nb = nbformat.read(notebook, as_version=4)
        assert exercise_cells(text) == exercise_cells(nb) != []


@pytest.mark.slow
@pytest.mark.parametrize("notebook", WITH_EXERCISES, ids=lambda p: p.stem)
def test_the_notebook_runs_with_the_solutions_and_every_check_passes(notebook):
    nb, filled = notebook_with_solutions(notebook)
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
        store_widget_state=False,
    ).execute()
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", f"cell {i}: {output.get('ename')}: {output.get('evalue')}"
    for i, names in filled.items():
        text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in nb.cells[i].outputs)
        for name in names:
            assert f"\u2714 {name}: all" in text, f"cell {i} ({name}) did not pass:\n{text}"
