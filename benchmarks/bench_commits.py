"""The same `scratchkit bench` at two commits, side by side: did a change (a restructuring, a
rename) move any trainer's speed beyond what this machine's noise moves it?

    .venv/bin/python benchmarks/bench_commits.py --before REV [--after HEAD] [--profile small]
        [--trainers gpu-only,hybrid,lru,scratchpipe] [--steps 60] [--rounds 5] [--record PATH]

Each revision is checked out into a temporary worktree of this repository (its C++ loops build
there on first use, in a warm-up round that is not counted), and each round runs `bench` once at
each revision, in alternating order, in a fresh process. Per trainer it reports after / before,
the median of the rounds' ratios and their spread (max / min of the ratios, less 1): a ratio
within its spread is no change this machine can resolve. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scratchkit.commands.bench import bench_command  # noqa: E402
from scratchkit.measure.record import RunRecord, add_record_option  # noqa: E402


def checkout(rev: str, into: Path) -> Path:
    """A detached worktree of `rev` at `into`."""
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(into), rev], check=True)
    return into


def bench(tree: Path, args) -> dict[str, float]:
    """samples/s of each trainer: `scratchkit bench --json` run from `tree`, in a fresh process."""
    command = bench_command(args.profile, args.trainers, args.steps)
    env = os.environ | {"PYTHONPATH": str(tree)}
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench at {tree} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return {row["trainer"]: row["samples_per_s"] for row in json.loads(done.stdout)}


def compare(before: list[dict], after: list[dict]) -> dict[str, dict]:
    """Per trainer: the rounds' after / before ratios, their median and spread."""
    out = {}
    for trainer in before[0]:
        ratios = [a[trainer] / b[trainer] for b, a in zip(before, after)]
        out[trainer] = {
            "before": statistics.median(b[trainer] for b in before),
            "after": statistics.median(a[trainer] for a in after),
            "ratio": statistics.median(ratios),
            "spread": max(ratios) / min(ratios) - 1,
            "rounds": " ".join(f"{r:.3f}" for r in ratios),
        }
        out[trainer]["within"] = abs(out[trainer]["ratio"] - 1) <= out[trainer]["spread"]
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the revision before the change")
    parser.add_argument("--after", default="HEAD", help="the revision after it (default HEAD)")
    parser.add_argument("--profile", default="small")
    parser.add_argument("--trainers", default="gpu-only,hybrid,lru,scratchpipe")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    add_record_option(parser, "commits")
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    with tempfile.TemporaryDirectory(prefix="bench-commits-") as tmp:
        trees = {}
        try:
            for side, rev in (("before", args.before), ("after", args.after)):
                trees[side] = checkout(rev, Path(tmp) / side)
            for tree in trees.values():  # warm-up: builds the loops, fills the caches
                bench(tree, args)
            runs = {"before": [], "after": []}
            for k in range(args.rounds):
                order = ("before", "after") if k % 2 == 0 else ("after", "before")
                for side in order:
                    runs[side].append(bench(trees[side], args))
                print(f"round {k + 1}/{args.rounds} done", file=sys.stderr)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    rows = compare(runs["before"], runs["after"])
    print(f"{'trainer':20s} {'before':>10s} {'after':>10s} {'after/before':>12s} {'spread':>7s}  rounds")
    for trainer, r in rows.items():
        print(
            f"{trainer:20s} {r['before']:10,.0f} {r['after']:10,.0f} {r['ratio']:12.3f} "
            f"{100 * r['spread']:6.1f}%  {r['rounds']}{'' if r['within'] else '  (beyond its spread)'}"
        )
    figures = {"before": args.before, "after": args.after, "profile": args.profile, "steps": args.steps}
    record.keep(args.record, figures | {"rounds": args.rounds, "trainers": rows})


if __name__ == "__main__":
    main()
