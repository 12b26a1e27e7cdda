"""Every code block of the README and docs/*.md, as a test: a newcomer copies them first.

A fenced block tagged `bash` or `python` runs as written, in a folder holding the small sample
files its commands name (`train.tsv`: 409 Criteo lines, 3 batches of 128 and 25 rows over, from
datasets/make_samples.py; `ml-100k/u.data`: the MovieLens sample; `criteo/`: TorchRec's `.npy`
files), with this environment's `scratchkit` first on the PATH. A block whose first line is a
comment starting `# synopsis` is a synopsis (`[x]` optional, `a|b` one of, `...` the rest): it is
not run, but every command it names must exist with every flag it shows (`--help`, the Makefile's
targets). A block whose first line starts `# illustration` is not run (it needs a GPU or the
network). Untagged blocks are text (a layout, a command's output) and are left alone.
(Before: the README's Python snippet raised ValueError on a 409-line file, right under "A small
file works as it is", and no test ran the README's code.)
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
RUN, SYNOPSIS, ILLUSTRATION = "run", "# synopsis", "# illustration"


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    text: str

    @property
    def kind(self) -> str:
        first = self.text.lstrip().split("\n", 1)[0]
        return next((k for k in (SYNOPSIS, ILLUSTRATION) if first.startswith(k)), RUN)

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def code_blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            if match.group(1) in ("bash", "sh", "python"):
                line = text[: match.start()].count("\n") + 1
                found.append(Block(str(page.relative_to(REPO)), line, match.group(1), match.group(2)))
    return found


BLOCKS = code_blocks()


def commands(text: str) -> list[str]:
    """The block's commands: continued lines joined, comments and blank lines left out."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_pages_have_blocks_of_every_kind():
    kinds = {b.kind for b in BLOCKS}
    assert kinds == {RUN, SYNOPSIS, ILLUSTRATION}, kinds
    assert any(b.page == "README.md" and b.language == "python" and b.kind == RUN for b in BLOCKS)


# --- the blocks that run ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    """A folder with the files the blocks name, each small: a few batches at most."""
    sys.path.insert(0, str(REPO / "datasets"))
    try:
        from make_samples import criteo_lines
    finally:
        sys.path.pop(0)
    from test_own_data import write_torchrec_days

    folder = tmp_path_factory.mktemp("samples")
    (folder / "train.tsv").write_text("\n".join(criteo_lines(409)) + "\n")
    (folder / "ml-100k").mkdir()
    (folder / "ml-100k" / "u.data").write_text((REPO / "datasets/samples/movielens-synthetic-u.data").read_text())
    (folder / "criteo").mkdir()
    write_torchrec_days(folder / "criteo", days=1, rows=409)
    return folder


def environment() -> dict:
    """This interpreter's scripts (`scratchkit`) first on the PATH, this checkout first on the path."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return env


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == RUN], ids=str)
def test_a_block_runs_as_written(block, samples):
    if block.language == "python":
        runs = [[sys.executable, "-c", block.text]]
    else:
        runs = [["bash", "-c", command] for command in commands(block.text)]
    assert runs, f"{block}: nothing to run"
    for argv in runs:
        done = subprocess.run(argv, cwd=samples, env=environment(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{block}: {argv[-1]}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr, f"{block}: {argv[-1]}\n{done.stderr[-2000:]}"


# --- the synopses -----------------------------------------------------------------------------------
@functools.cache
def scratchkit_help(command: str) -> str:
    from scratchkit.commands.cli import build_parsers

    return build_parsers()[1][command].format_help()


@functools.cache
def rank_help(command: str) -> str:
    from scratchkit.commands.rank import build_rank_parser

    parser = build_rank_parser()
    return next(a for a in parser._subparsers._group_actions).choices[command].format_help()


@functools.cache
def script_help(path: str) -> str:
    done = subprocess.run(
        [sys.executable, path, "--help"], cwd=REPO, env=environment(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{path} --help: {done.stderr[-1000:]}"
    return done.stdout


def helps(command: str) -> tuple[list[str], str]:
    """(the help texts a synopsis line's flags must be in, the part of the line they are read from)."""
    words = command.split("#", 1)[0].split()
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # OUT=gpu-report ...
        words.pop(0)
    if words[:1] == ["make"]:
        makefile = (REPO / "Makefile").read_text()
        for target in words[1:]:
            assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"no make target {target}"
        return [], ""
    if words[:1] == ["scratchkit"]:
        return [scratchkit_help(c) for c in words[1].split("|")], " ".join(words[2:])
    if "-m" in words and words[words.index("-m") + 1] == "scratchkit.distributed":
        at = words.index("-m") + 2
        return [rank_help(c) for c in words[at].split("|")], " ".join(words[at + 1 :])
    script = next((w for w in words if w.endswith((".py", ".sh"))), None)
    assert script is not None and (REPO / script).exists(), f"a synopsis line names no program here: {command}"
    rest = " ".join(words[words.index(script) + 1 :])
    if script.endswith(".sh"):
        return [(REPO / script).read_text()], rest
    return [script_help(script)], rest


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == SYNOPSIS], ids=str)
def test_a_synopsis_names_commands_and_flags_that_exist(block):
    for command in commands(block.text):
        texts, rest = helps(command)
        for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", rest):
            missing = [t for t in texts if not re.search(rf"{re.escape(flag)}\b", t)]
            assert not missing, f"{block}: {command.strip()}: no {flag} in its --help"


def test_the_synopsis_check_can_fail():
    with pytest.raises(AssertionError, match="no --profle"):
        test_a_synopsis_names_commands_and_flags_that_exist(
            Block("x", 1, "bash", "# synopsis\nscratchkit bench --profle")
        )
    with pytest.raises(AssertionError, match="no make target lob"):
        helps("make lob")
