"""docs/design.md's walk of a projection is the code's: trace a `project()` call and compare.

The walk ("One projection's way") lists the scratchkit files that
`project("scratchpipe-device", work, get_machine("h100-pcie5"))` enters, in the order each is first
entered, each item led by the functions it enters (the format of tests/test_design_walk.py's walk).
The test records, under `sys.setprofile`, every scratchkit function the call enters.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

import scratchkit
from scratchkit.designs import StepWork
from scratchkit.profiles import get_profile
from scratchkit.projection.machines import get_machine
from scratchkit.projection.project import project
from test_design_walk import first_entries, parse_item

REPO = Path(__file__).resolve().parents[1]
PACKAGE = str(Path(scratchkit.__file__).parent) + os.sep
SECTION = "## One projection's way"
DESIGN, MACHINE = "scratchpipe-device", "h100-pcie5"


def trace_projection() -> list[tuple[str, str]]:
    """(file under scratchkit/, qualified name) of every scratchkit function the call enters."""
    work = StepWork.from_config(get_profile("tiny"), batches=2).with_counters(40, 20)
    machine = get_machine(MACHINE)
    seen, entered = set(), []

    def note(frame, event, _arg):
        code = frame.f_code
        key = (code.co_filename[len(PACKAGE) :], code.co_qualname)
        if event == "call" and code.co_filename.startswith(PACKAGE) and key not in seen:
            seen.add(key)
            entered.append(key)

    sys.setprofile(note)
    try:
        project(DESIGN, work, machine)
    finally:
        sys.setprofile(None)
    return entered


def doc_walk(text: str) -> list[tuple[str, list[str]]]:
    """The walk's items: (file under scratchkit/, the qualified names it leads with)."""
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    items = [re.match(r"\d+\. ((?:`[^`]+`(?:, )?)+)", line) for line in section.splitlines()]
    return [parse_item(item.group(1)) for item in items if item]


@pytest.fixture(scope="module")
def traced():
    return trace_projection()


@pytest.fixture(scope="module")
def walk():
    return doc_walk((REPO / "docs" / "design.md").read_text())


def test_the_walk_names_the_call_it_walks():
    text = (REPO / "docs" / "design.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    assert f'project("{DESIGN}", work, get_machine("{MACHINE}"))' in text


def test_the_walk_lists_the_files_a_projection_enters_in_order(traced, walk):
    documented = [path for path, _ in walk]
    assert documented == first_entries(traced), (
        f"docs/design.md's projection walk lists\n  {documented}\nbut the call enters\n  {first_entries(traced)}"
    )


def test_every_function_the_walk_names_is_entered(traced, walk):
    entered = set(traced)
    for path, names in walk:
        for name in names:
            assert (path, name) in entered, f"docs/design.md's projection walk names {path}:{name}, never entered"


def test_the_walk_counts_once_each_stage_of_the_design():
    """Each stage's work is counted once a projection (the walk's first step), not again to price
    or combine it: the design's count is called once."""
    from scratchkit.designs import DESIGNS

    calls = []
    design = DESIGNS[DESIGN]
    counted = lambda work, place: calls.append(place) or design.count(work, place)
    from dataclasses import replace

    work = StepWork.from_config(get_profile("tiny"), batches=2).with_counters(40, 20)
    project(replace(design, count=counted), work, get_machine(MACHINE))
    assert len(calls) == 1
