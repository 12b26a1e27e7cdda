"""How long each course notebook takes top to bottom, as a learner runs it (the README's course map).

    .venv/bin/python benchmarks/bench_notebooks.py [--rounds 3] [--solutions] [NN ...]

Each round runs every notebook once, in order, so a machine that gets busier or quieter during the
run affects all of them alike; the table gives the median and the slowest round per notebook, in
seconds from starting its kernel to the kernel's end (what a learner waits for after Run All).
As shipped, the exercise cells stop with NotImplementedError and the run goes on (they are tagged
raises-exception); `--solutions` fills them in first (tests/course_solutions.py), as a learner who
has done them all would run it (notebook 08 then builds its four kernels with g++).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from course_solutions import notebook_with_solutions  # noqa: E402 (the tests' helper)

from scratchkit.measure.record import RunRecord, add_record_option  # noqa: E402


def run_once(path: Path, solutions: bool) -> float:
    nb = notebook_with_solutions(path)[0] if solutions else nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,
    ).execute()
    return time.perf_counter() - started


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="two-digit numbers (default: all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--solutions", action="store_true", help="with the exercises' solutions filled in")
    add_record_option(parser, "notebooks")
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    paths = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if args.notebooks:
        paths = [p for p in paths if p.name[:2] in args.notebooks]
    seconds = {p.stem: [] for p in paths}
    for _ in range(args.rounds):
        for path in paths:
            seconds[path.stem].append(run_once(path, args.solutions))
    print(
        f"{'notebook':28}{'median s':>10}{'max s':>8}   ({args.rounds} rounds, "
        f"{'with solutions' if args.solutions else 'as shipped'})"
    )
    for name, values in seconds.items():
        print(f"{name:28}{statistics.median(values):>10.1f}{max(values):>8.1f}")
    record.keep(
        args.record,
        {
            "rounds": args.rounds,
            "solutions": args.solutions,
            "seconds": {
                name: {"median": statistics.median(values), "max": max(values)} for name, values in seconds.items()
            },
        },
    )


if __name__ == "__main__":
    main()
