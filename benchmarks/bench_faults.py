"""The fault campaign, in four parts (each checked bit for bit against plain PyTorch):

    scratchpipe   SIGKILLs of ScratchPipe's host process, its planner process and the whole run,
                  live checkpoints and Ctrl-C, each at a random moment (or a stage boundary),
                  compared on the batches whose Train finished, then after training on to the end
                  (scratchkit/measure/faults.py)
    steps         every trainer and optimizer: a spoiled batch at each rule of the door, a failure
                  planted at each stage of a step, a torn update; then the source repaired and
                  training goes on (scratchkit/measure/step_faults.py)
    capacity      prefetch-lru on random configurations at the capacity its error names
    saves         a checkpoint save SIGKILLed at random moments: no torn file, and no temporary
                  file after the next save (scratchkit/measure/killed_saves.py)

    .venv/bin/python benchmarks/bench_faults.py                 # all four: ~10 min on 2 cores
    .venv/bin/python benchmarks/bench_faults.py --cases 5       # a quick look
    .venv/bin/python benchmarks/bench_faults.py --parts steps,saves
    .venv/bin/python benchmarks/bench_faults.py --record results/faults.json   # keep the run as data
    .venv/bin/python benchmarks/bench_faults.py --json          # one JSON object per scratchpipe case

It prints a table per part and exits 1 if any case was not exact (or, for saves, left anything).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict

from scratchkit.config import OptimizerKind
from scratchkit.measure.faults import Campaign, FaultKind, Snapshots, default_cases
from scratchkit.measure.killed_saves import kill_saves
from scratchkit.measure.record import RunRecord, add_record_option
from scratchkit.measure.step_faults import (
    INSIDE_UPDATE,
    SPOILERS,
    STEPS,
    all_cases,
    case_config,
    prefetch_capacity_case,
    run_case,
)


def progress(n: int, total: int) -> None:
    print(f"\r{n}/{total} cases", end="" if n < total else "\n", file=sys.stderr, flush=True)


def scratchpipe_part(args) -> tuple[dict, bool]:
    kinds = [FaultKind(k.strip()) for k in args.kinds.split(",")]
    campaign = Campaign.for_profile(args.profile, steps=args.steps)
    cases = default_cases(args.cases, kinds, seed=args.seed, steps=args.steps)
    tally: dict[FaultKind, Counter] = defaultdict(Counter)
    landed: dict[FaultKind, list[int]] = defaultdict(list)
    for n, case in enumerate(cases, 1):
        result = campaign.run_case(case)
        t = tally[case.kind]
        t["run"] += 1
        t["exact"] += result.exact
        t["lost rows"] += result.lost_rows + result.resumed_lost_rows
        t["stopped early"] += result.finished_batches < args.steps
        t["checkpoints"] += result.checkpoints
        landed[case.kind].append(result.finished_batches)
        if args.json:
            print(json.dumps(result.to_dict()), flush=True)
        elif not result.exact:
            print(f"NOT EXACT: {result}", flush=True)
        progress(n, len(cases))
    print(
        f"scratchpipe: profile {args.profile}, {args.steps} batches a case, capacity "
        f"{campaign.base.cache.capacity} (the smallest for depth {campaign.base.cache.depth})"
    )
    print(
        f"{'fault':<14}{'cases':>7}{'exact':>7}{'lost rows':>11}{'stopped early':>15}"
        f"{'finished batches (min-median-max)':>36}{'checkpoints':>13}"
    )
    figures = {}
    for kind, t in tally.items():
        done = sorted(landed[kind])
        spread = f"{done[0]}-{done[len(done) // 2]}-{done[-1]}"
        print(
            f"{kind.value:<14}{t['run']:>7}{t['exact']:>7}{t['lost rows']:>11}"
            f"{t['stopped early']:>15}{spread:>36}{t['checkpoints']:>13}"
        )
        figures[kind.value] = dict(t) | {"finished_batches_min_median_max": spread}
    return figures, all(t["exact"] == t["run"] for t in tally.values())


def steps_part(args) -> tuple[dict, bool]:
    cases = [c for o in OptimizerKind for c in all_cases(o.value)]
    snapshots = {o.value: Snapshots(case_config(o.value), STEPS) for o in OptimizerKind}
    tally: dict[str, Counter] = defaultdict(Counter)
    for n, case in enumerate(cases, 1):
        result = run_case(case, snapshots[case.optimizer])
        kind = (
            "spoiled batch"
            if case.fault in SPOILERS
            else "torn update"
            if case.fault in INSIDE_UPDATE
            else "planted failure"
        )
        torn = kind == "torn update"
        right = (
            result.error == SPOILERS[case.fault][1]
            if case.fault in SPOILERS
            else result.error != "" and result.one_line
        )
        # a torn update must stop the trainer with the tables intact; the others must go on exactly
        ok = right and (
            bool(result.refused_after) and result.lost_rows == 0 if torn else not result.refused_after and result.exact
        )
        t = tally[case.trainer]
        t["cases"] += 1
        t["ok"] += ok
        t[kind] += 1
        if not ok:
            print(f"NOT OK: {result}", flush=True)
        progress(n, len(cases))
    print(f"steps: profile tiny, {STEPS} batches a case, the fault at batch 3, {len(OptimizerKind)} optimizers")
    print(f"{'trainer':<20}{'cases':>7}{'ok':>6}{'spoiled batch':>15}{'planted failure':>17}{'torn update':>13}")
    for trainer, t in tally.items():
        print(
            f"{trainer:<20}{t['cases']:>7}{t['ok']:>6}{t['spoiled batch']:>15}"
            f"{t['planted failure']:>17}{t['torn update']:>13}"
        )
    return {k: dict(t) for k, t in tally.items()}, all(t["ok"] == t["cases"] for t in tally.values())


def capacity_part(args) -> tuple[dict, bool]:
    results = []
    for n, seed in enumerate(range(args.seed, args.seed + args.configs), 1):
        results.append(prefetch_capacity_case(seed))
        if results[-1].error or not results[-1].exact:
            print(f"NOT OK: {results[-1]}", flush=True)
        progress(n, args.configs)
    refused = sum(bool(r.error) for r in results)
    exact = sum(r.exact for r in results)
    print(
        f"capacity: prefetch-lru on {len(results)} random configurations at the capacity it "
        f"names: {refused} calls refused, {exact} exact"
    )
    return {"configurations": len(results), "refused": refused, "exact": exact}, refused == 0 and exact == len(results)


def saves_part(args) -> tuple[dict, bool]:
    with tempfile.TemporaryDirectory() as folder:
        tally = kill_saves(folder, args.kills, seed=args.seed)
    print(
        f"saves: {tally.kills} SIGKILLs of a process saving an 8 MB checkpoint, "
        f"{tally.inside_a_save} inside a save: {tally.torn_files} torn files, "
        f"{tally.left_after_next_save} temporary files left after the next save"
    )
    return asdict(tally), tally.torn_files == 0 and tally.left_after_next_save == 0


PARTS = {"scratchpipe": scratchpipe_part, "steps": steps_part, "capacity": capacity_part, "saves": saves_part}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)} (default: all)"
    )
    parser.add_argument("--cases", type=int, default=50, help="scratchpipe: cases of each kind (default 50)")
    parser.add_argument(
        "--kinds",
        default=",".join(k.value for k in FaultKind),
        help="scratchpipe: comma-separated fault kinds (default: all)",
    )
    parser.add_argument("--profile", default="tiny", help="scratchpipe: the profile trained (default tiny)")
    parser.add_argument("--steps", type=int, default=40, help="scratchpipe: batches per case (default 40)")
    parser.add_argument("--configs", type=int, default=200, help="capacity: random configurations (default 200)")
    parser.add_argument("--kills", type=int, default=20, help="saves: SIGKILLs (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="scratchpipe: one JSON line per case")
    add_record_option(parser, "faults")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",")]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part {unknown[0]!r}; choose from {', '.join(PARTS)}")
    if min(args.cases, args.configs, args.kills) < 1:
        parser.error("--cases, --configs and --kills must be >= 1")
    record = RunRecord.of_run(__file__, argv)
    figures, good, started = {}, True, time.perf_counter()
    for part in parts:
        figures[part], ok = PARTS[part](args)
        good &= ok
        print()
    figures["seconds"] = round(time.perf_counter() - started)
    print(f"{'all exact' if good else 'NOT ALL EXACT'}, {figures['seconds']} s")
    record.keep(args.record, figures)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
