"""The fault campaign: SIGKILLs of ScratchPipe's host process, its planner process and the whole
run, live checkpoints and Ctrl-C, each at a random moment (or at a stage boundary), each checked
bit for bit against plain PyTorch trained on the batches whose Train finished, then again after
training on to the end (scratchkit/measure/faults.py).

    .venv/bin/python benchmarks/bench_faults.py            # 50 cases of each kind: 300 cases, ~4 min
    .venv/bin/python benchmarks/bench_faults.py --cases 5  # a quick look
    .venv/bin/python benchmarks/bench_faults.py --json     # one JSON object per case

It prints, per kind of fault: cases run, cases exact, rows lost, and where the faults landed.
Kills are spread over the planner modes that have that process, and over the three optimizers.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict

from scratchkit.measure.faults import Campaign, FaultKind, default_cases


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=50, help="cases of each kind (default 50)")
    parser.add_argument("--kinds", default=",".join(k.value for k in FaultKind),
                        help="comma-separated fault kinds (default: all)")
    parser.add_argument("--profile", default="tiny", help="the profile trained (default tiny)")
    parser.add_argument("--steps", type=int, default=40, help="batches per case (default 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="one JSON line per case")
    args = parser.parse_args(argv)
    if args.cases < 1:
        raise SystemExit(f"--cases must be >= 1, got {args.cases}")
    kinds = [FaultKind(k.strip()) for k in args.kinds.split(",")]
    campaign = Campaign.for_profile(args.profile, steps=args.steps)
    cases = default_cases(args.cases, kinds, seed=args.seed, steps=args.steps)
    tally: dict[FaultKind, Counter] = defaultdict(Counter)
    landed: dict[FaultKind, list[int]] = defaultdict(list)
    started = time.perf_counter()
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
        print(f"\r{n}/{len(cases)} cases", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    if not args.json:
        print(f"profile {args.profile}, {args.steps} batches a case, capacity "
              f"{campaign.base.cache.capacity} (the smallest for depth {campaign.base.cache.depth}), "
              f"{time.perf_counter() - started:.0f} s")
        print(f"{'fault':<14}{'cases':>7}{'exact':>7}{'lost rows':>11}{'stopped early':>15}"
              f"{'finished batches (min-median-max)':>36}{'checkpoints':>13}")
        for kind, t in tally.items():
            done = sorted(landed[kind])
            spread = f"{done[0]}-{done[len(done) // 2]}-{done[-1]}"
            print(f"{kind.value:<14}{t['run']:>7}{t['exact']:>7}{t['lost rows']:>11}"
                  f"{t['stopped early']:>15}{spread:>36}{t['checkpoints']:>13}")
        total = sum(t["run"] for t in tally.values())
        exact = sum(t["exact"] for t in tally.values())
        print(f"{'all':<14}{total:>7}{exact:>7}{sum(t['lost rows'] for t in tally.values()):>11}")
    return 0 if all(t["exact"] == t["run"] for t in tally.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
