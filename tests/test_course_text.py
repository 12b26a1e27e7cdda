"""The course's text where it can drift from what it describes: the lists of notebooks and trainers
are made from their sources, the invariants are cited by name, the Try cells run, and notebook
09 says whose planner ran. (Before: 00's course table listed 7 of the 10 notebooks, 05's table 4
groups for 9 trainers, the notebooks cited "invariant 5" that only docs/design.md named, the Try
cells of 07 and 09 used names they never imported, and 09 called the stand-in "your planner".)"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

from course_solutions import NOTEBOOKS, solution_file
from scratchkit.course.catalogue import course_markdown, course_table, notebooks, trainer_table
from scratchkit.scratchpipe.invariants import DOCS, Invariant
from dataclasses import replace

from scratchkit.designs import DESIGNS

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def test_the_course_table_has_a_row_per_notebook_of_the_folder(tmp_path):
    assert [n.name for n in notebooks()] == [p.stem for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]
    table = str(course_table())
    assert all(f"| `{p.stem}` |" in table for p in SOURCES)
    # a notebook added to the folder is in the table without a word changed elsewhere
    (tmp_path / "10_new.py").write_text(
        "# %% [markdown]\n# # 10 · New\n#\n# **Shows:** something new\n#\n# **You write:** a new thing\n\n# %%\n1\n"
    )
    assert "| `10_new` | something new | a new thing |" in str(course_table(tmp_path))
    (tmp_path / "11_bare.py").write_text("# %% [markdown]\n# # 11 · Bare\n")
    with pytest.raises(ValueError, match=r"11_bare.py: its first markdown cell needs .* \*\*Shows:\*\*"):
        course_table(tmp_path)


def test_notebook_00_shows_the_generated_table_not_a_written_one():
    text = (NOTEBOOKS / "00_welcome.py").read_text()
    assert "course_table()" in text and "| `01_hybrid_baseline` |" not in text


def test_the_readme_course_table_gives_times_only_from_a_record():
    record = {"figures": {"rounds": 3, "solutions": False, "seconds": {"00_welcome": {"median": 11.6, "max": 13}}}}
    timed = course_markdown(record)
    assert "| what you write | time |" in timed and "| 12 s |" in timed and "| - |" in timed
    assert "the median of 3 rounds" in timed and "as shipped" in timed
    untimed = course_markdown(None)
    assert "| time |" not in untimed and "none recorded" in untimed


def test_the_trainer_table_follows_the_registry():
    table = str(trainer_table())
    assert all(f"| `{name}` | {design.help} |" in table for name, design in DESIGNS.items())
    mine = replace(DESIGNS["hybrid"], name="mine", help="a trainer of my own")
    with DESIGNS.registered("mine", mine):
        assert "| `mine` | a trainer of my own |" in str(trainer_table())
    assert "trainer_table()" in (NOTEBOOKS / "05_scratchpipe_training.py").read_text()


def test_the_readme_lists_every_registered_trainer():
    readme = (REPO / "README.md").read_text()
    section = readme.split("## The trainers")[1].split("\n## ")[0]
    listed = re.findall(r"^\| `([\w-]+)`(?:, `([\w-]+)`)? \|", section, flags=re.M)
    assert {n for pair in listed for n in pair if n} == set(DESIGNS)


# --- invariants by name -----------------------------------------------------------------------------
def test_the_invariants_are_named_as_in_docs_design():
    table = (REPO / "docs" / "design.md").read_text().split("## The invariants, and the test that holds each")[1]
    rows = re.findall(r"^\| (\d)\. ([^|:]+?)(?::[^|]*)? \|", table, flags=re.M)
    assert [(int(n), words) for n, words in rows] == [(i.value, i.words) for i in Invariant]
    assert DOCS.split("#")[1] == "the-invariants-and-the-test-that-holds-each"


def markdown_cells(path: Path) -> list[str]:
    return [c.source for c in jupytext.read(path).cells if c.cell_type == "markdown"]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_a_notebook_cites_an_invariant_by_name_with_a_link(path):
    link = rf"\]\(\.\./{re.escape(DOCS)}\)"
    for text in markdown_cells(path):
        text = " ".join(text.split())
        for match in re.finditer(r"\b[Ii]nvariants? (\d)", text):
            invariant = Invariant(int(match.group(1)))
            cited = re.escape(f"[invariant {invariant.value}: {invariant.words}") + link
            assert re.search(cited, text), f"{path.name}: {text[max(0, match.start() - 40) : match.end() + 60]!r}"


def test_a_refused_plan_names_the_invariant():
    from scratchkit.scratchpipe.own_planner import HOLDS

    assert HOLDS.startswith("invariant 4 (no eviction of a held slot)")  # the hazard lab's: test_hazard_lab.py


# --- Try cells ---------------------------------------------------------------------------------------
def try_cells(path: Path) -> list:
    return [c for c in jupytext.read(path).cells if "try" in c.metadata.get("tags", [])]


EDITS_ONLY = {"08_kernel_puzzles"}  # its tries edit the puzzles' kernels: nothing to run beside them


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_a_try_section_ends_in_cells_that_run(path):
    """Each try cell runs in a test: nbval's, as shipped, or (tagged nbval-skip, where it needs the
    exercises written) test_course_exercises' run with the solutions filled in."""
    has_try = any(re.search(r"^## Try this|\*\*Try:\*\*", text, flags=re.M) for text in markdown_cells(path))
    cells = try_cells(path)
    assert bool(cells) == (has_try and path.stem not in EDITS_ONLY), path.name
    for cell in cells:
        if "nbval-skip" in cell.metadata["tags"]:
            assert solution_file(path).exists(), f"{path.name}: a try cell no test runs"


def test_notebook_09_says_whose_planner_ran():
    from scratchkit.course.capstone import planner_name
    from scratchkit.course.exercises.capstone import stand_in_plan_batch

    assert planner_name(stand_in_plan_batch) == "the stand-in planner"
    assert planner_name(lambda *args: None) == "your planner"
    text = (NOTEBOOKS / "09_capstone_planner.py").read_text()
    assert "planner_name(planner)" in text and "Least recently used" not in text
