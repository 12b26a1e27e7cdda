"""docs/design.md's walk of one batch is the code's: trace a `train()` call and compare.

The walk ("One batch's way on the CPU default path") lists, per process, the scratchkit files a
middle batch's calls enter, in the order each is first entered, each item led by the functions it
enters (`scratchkit/path.py:Qualified.name`, then `.other` for another of the same class or
`other` for another of the same file). The test runs scratchpipe's CPU default path (a call of
at least MIN_STEPS_FOR_PROCESS steps: the host-process driver) under `sys.setprofile`, which the
forked host process inherits, and records, per process, every scratchkit function entered while
batch B is that process's batch:

    trainer's process   from ScratchPipeTrainer._train_one(b=B) being called until it returns
    host process        from its body(b=B) being called until body(b=B+1) is (Plan(B)'s
                        decisions packed into the ring included)
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

import scratchkit
from scratchkit.profiles import get_profile
from scratchkit.scratchpipe.drivers import MIN_STEPS_FOR_PROCESS, PlanIn
from scratchkit.scratchpipe.plan_native import native_planner_available
from scratchkit.trainers import make_trainer

REPO = Path(__file__).resolve().parents[1]
PACKAGE = str(Path(scratchkit.__file__).parent) + os.sep
SECTION = "## One batch's way on the CPU default path"
# the walk's sub-headings, each the process it walks
PROCESSES = {"### In the host process": "host", "### In the trainer's process": "trainer"}
CONFIG = get_profile("tiny")
B = 5  # the batch walked: past the first, with batches after it
# enough batches after B that an Insert waits for Train(B) (rule 3: the message is sent)
STEPS = max(MIN_STEPS_FOR_PROCESS, B + CONFIG.cache.depth + 2)

# the walk is the Linux default path: elsewhere (no fork) every call runs on threads
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the host-process driver forks (Linux)")

Entered = list[tuple[str, str]]  # (file under scratchkit/, qualified name), in order of first entry


def trace_one_batch(log: Path) -> dict[str, Entered]:
    """Per process ("trainer", "host"), what batch B's calls entered in a scratchpipe run on the
    CPU default path. The host process writes its entries to `log` as it goes (it ends with
    os._exit, so nothing kept in its memory would come back)."""
    trainer = make_trainer("scratchpipe", CONFIG, device="cpu")
    assert trainer.where_host_stages_run(STEPS) is PlanIn.HOST_PROCESS
    parent, seen, on, trainer_frame = os.getpid(), set(), [False], [None]
    entered: Entered = []

    def note(frame, event, _arg):
        code = frame.f_code
        if not code.co_filename.startswith(PACKAGE):
            return
        if os.getpid() == parent:
            if event == "call" and code.co_name == "_train_one" and frame.f_locals.get("b") == B:
                on[0], trainer_frame[0] = True, frame
            elif event == "return" and frame is trainer_frame[0]:
                on[0] = False
        elif event == "call" and code.co_qualname == "stages_in_order.<locals>.body":
            on[0] = frame.f_locals.get("b") == B
        key = (code.co_filename[len(PACKAGE) :], code.co_qualname)
        if event != "call" or not on[0] or key in seen:
            return
        seen.add(key)
        if os.getpid() == parent:
            entered.append(key)
        else:
            with log.open("a") as out:
                out.write("\t".join(key) + "\n")

    sys.setprofile(note)
    try:
        for _ in trainer.train(STEPS):
            pass
    finally:
        sys.setprofile(None)
    host = [tuple(line.split("\t")) for line in log.read_text().splitlines()] if log.exists() else []
    return {"trainer": entered, "host": host}


def first_entries(entered: Entered) -> list[str]:
    """The files of `entered`, each once, in order of first entry."""
    return list(dict.fromkeys(path for path, _ in entered))


def doc_walk(text: str) -> dict[str, list[tuple[str, list[str]]]]:
    """Per process, the walk's items: (file under scratchkit/, the qualified names it leads with)."""
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    walks, current = {}, None
    for line in section.splitlines():
        if line.startswith("### "):
            current = PROCESSES.get(line.strip())
            assert current, f"docs/design.md: the walk's sub-heading {line!r} is none of {list(PROCESSES)}"
            walks[current] = []
        item = re.match(r"\d+\. ((?:`[^`]+`(?:, | -> )?)+)", line)
        if item and current:
            walks[current].append(parse_item(item.group(1)))
    return walks


def parse_item(lead: str) -> tuple[str, list[str]]:
    """'`scratchkit/a/b.py:C.f`, `.g`, `h`' -> ('a/b.py', ['C.f', 'C.g', 'h'])."""
    path, names = None, []
    for token in re.findall(r"`([^`]+)`", lead):
        if ":" in token:
            where, name = token.split(":", 1)
            assert where.startswith("scratchkit/"), f"docs/design.md walk: {token!r} names no scratchkit file"
            path = where[len("scratchkit/") :]
        elif token.startswith(".") and names:
            name = names[-1].rsplit(".", 1)[0] + token
        else:
            name = token
        assert path, f"docs/design.md walk: {lead!r} must start with a file"
        names.append(name)
    return path, names


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    if not native_planner_available():
        pytest.skip("no C compiler: the default path plans with the NumPy twin, which the walk names aside")
    return trace_one_batch(tmp_path_factory.mktemp("walk") / "host.tsv")


@pytest.fixture(scope="module")
def walk():
    return doc_walk((REPO / "docs" / "design.md").read_text())


@pytest.mark.parametrize("process", ["host", "trainer"])
def test_the_walk_lists_the_files_a_batch_enters_in_order(traced, walk, process):
    assert traced[process], f"nothing traced in the {process} process"
    documented = [path for path, _ in walk[process]]
    assert documented == first_entries(traced[process]), (
        f"docs/design.md's walk in the {process} process lists\n  {documented}\nbut batch {B} enters\n  "
        f"{first_entries(traced[process])}"
    )


@pytest.mark.parametrize("process", ["host", "trainer"])
def test_every_function_the_walk_names_is_entered(traced, walk, process):
    entered = set(traced[process])
    for path, names in walk[process]:
        for name in names:
            assert (path, name) in entered, (
                f"docs/design.md's walk names {path}:{name} in the {process} process, which batch {B} never enters"
            )


def test_the_walk_parser_reads_an_item():
    text = (
        f"{SECTION}\n\n### In the trainer's process\n\n1. `scratchkit/a/b.py:C.f`, `.g`, `h`: "
        "prose with `scratchkit/x.py:not_led` in it\n2. no reference\n\n## next\n1. `scratchkit/y.py:z`\n"
    )
    assert doc_walk(text) == {"trainer": [("a/b.py", ["C.f", "C.g", "h"])]}


def test_the_walk_fails_a_wrong_order():
    entered = [("a.py", "f"), ("b.py", "g"), ("a.py", "h")]
    assert first_entries(entered) == ["a.py", "b.py"]
    assert first_entries(entered) != ["b.py", "a.py"]


def test_the_walk_says_which_calls_fork_and_which_run_on_threads():
    """The walk's first paragraph: calls of at least MIN_STEPS_FOR_PROCESS steps fork the host
    process, shorter ones run the same stages on threads."""
    text = " ".join((REPO / "docs" / "design.md").read_text().split(SECTION, 1)[1].split("###", 1)[0].split())
    assert f"at least {MIN_STEPS_FOR_PROCESS} steps" in text and "PlanIn.THREAD" in text
    trainer = make_trainer("scratchpipe", CONFIG, device="cpu")
    assert trainer.where_host_stages_run(MIN_STEPS_FOR_PROCESS) is PlanIn.HOST_PROCESS
    assert trainer.where_host_stages_run(MIN_STEPS_FOR_PROCESS - 1) is PlanIn.THREAD
