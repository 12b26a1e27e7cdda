"""The cost model's validation table: every profile x every trainer, stage by stage, in one run.

For each profile (tiny, small, criteo-like and the embedding-bound and skewed profiles at a
laptop's `--scale`), train every trainer here (scratchkit.measure.validate.validate_trainers:
warm-up, then timed steps in one `train()` call) and set the `this-cpu` cost model's prediction
beside each stage's measured seconds per step. The absolute bounds: every stage over 10% of its
step within 25%, every step within 15%. It prints the table, the worst stage and PASS or FAIL,
and exits 1 on FAIL. Then the checks a busy machine can resolve (measure/round_checks.py): each
trainer's samples/s over gpu-only's, the bound stage, and each stage, against their own spread
between the alternating parts of every round (reported, not in the exit code).

`this-cpu` is the profile `scratchkit calibrate` saved; `--calibrate` measures it afresh just
before and just after every profile's trainers instead (3 runs a figure, each saved as
`this-cpu`; the one after a profile is the next one's before) and prices the profile by the two
calibrations' median, so that the constants are measured on either side of the steps they
predict. `--rounds N` (default 3) runs the whole table N times and reports each row's medians over the rounds (measured and predicted
alike): on a shared VM the same step or constant moves by a third from one minute to the next,
and one slow round, on either side, then moves no row. Within a round each profile's trainers
alternate (`--alternate K`, default 4: every trainer open at once, each taking a K-th of its
timed steps in turn), so that they all cover the same minutes. Run it on a quiet machine all the
same: a neighbour's load slows the trainers' wall-clock steps more than the calibration's CPU-time
figures. Each profile's line says how much CPU time the hypervisor stole meanwhile (a VM's
`steal`, scratchkit/calibration/steal.py), one such neighbour that the guest can see. And each
profile's first trainer runs a second time beside the others (`--no-again` leaves it out): how
far the same code on the same batches in the same minutes measured from itself, and how far the
calibrations before and after predicted each row from their median, is the machine's own
repeatability; the table says how many rows outside their bound are outside by more than that.

    python benchmarks/bench_validate.py --calibrate                  # the whole table, 3 rounds, ~30 min on 2 cores
    python benchmarks/bench_validate.py --profiles tiny,small --quick  # a smoke run
    python benchmarks/bench_validate.py --json validation.json       # the rows, for notebooks and reports
    python benchmarks/bench_validate.py --record results/validate-table.json   # kept as a run record
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

from scratchkit.calibration.steal import StealMeter
from scratchkit.commands.validation import recorded
from scratchkit.measure.record import RunRecord
from scratchkit.measure.validate import Validation, median_of_rounds, validate_trainers
from scratchkit.profiles import PROFILES, get_profile, scalable_profiles
from scratchkit.trainers import available_trainers

# timed steps and warm-up steps per profile: enough steps for a steady mean, few enough that the
# whole table runs in minutes (an embedding-bound step is ~0.3 s on one core at scale 0.05). The
# small profiles' steps take 1-10 ms: at 30-40 of them one scheduler hiccup or collection moved a
# mean by 10-20%, so they run a second or so each
STEPS = {
    "tiny": (300, 20),
    "small": (150, 10),
    "criteo-like": (100, 10),
    "embedding-bound": (8, 3),
    "embedding-bound-skewed": (8, 3),
    "embedding-bound-wide": (6, 3),
    "criteo-skew": (8, 3),
}
# each profile's trainers alternate, in this many parts of their timed steps (run_bench's rounds):
# one after another, the same dense step spread by up to +95% across the trainers of one profile
ALTERNATE = 4
# timed runs per figure of each calibration: two of 3 on either side of a profile's minutes (the
# one after it is the next profile's before), not one of 7 a minute before them
CALIBRATION_REPEATS = 3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profiles", default=",".join(PROFILES), help="comma-separated (default: all)")
    parser.add_argument("--trainers", default=",".join(available_trainers()), help="comma-separated (default: all)")
    parser.add_argument("--scale", type=float, default=0.05, help="for the scalable profiles (default 0.05)")
    parser.add_argument("--quick", action="store_true", help="a third of the steps: a smoke run")
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="calibrate this machine (and save it) before and after every profile's trainers",
    )
    parser.add_argument("--rounds", type=int, default=3, help="whole tables run, rows' medians reported (default 3)")
    parser.add_argument(
        "--alternate",
        type=int,
        default=ALTERNATE,
        metavar="K",
        help=f"each profile's trainers take their timed steps in K alternating parts, so all of "
        f"them cover the same minutes (default {ALTERNATE}; 1: one after another)",
    )
    parser.add_argument(
        "--no-again",
        dest="again",
        action="store_false",
        help="don't run each profile's first trainer a second time beside the others (by "
        "default it runs again: the machine's own repeatability, no model in it)",
    )
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the rows and verdict here")
    parser.add_argument(
        "--record",
        default=None,
        metavar="PATH",
        help="also keep the run as a record (command, commit, date, machine: measure/record.py)",
    )
    args = parser.parse_args(argv)
    record = RunRecord("python benchmarks/bench_validate.py " + shlex.join(argv if argv is not None else sys.argv[1:]))
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    trainers = [t.strip() for t in args.trainers.split(",") if t.strip()]
    for name in profiles:
        if name not in PROFILES:
            parser.error(f"--profiles: unknown profile {name!r}; choose from {', '.join(PROFILES)}")
    if args.alternate < 1:
        parser.error(f"--alternate must be at least 1, got {args.alternate}")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    started = time.perf_counter()
    rounds, stolen = [], []
    for k in range(args.rounds):
        say = lambda text: print(f"round {k + 1}/{args.rounds}: {text}", file=sys.stderr, flush=True)
        validation, steal = one_round(profiles, trainers, args, say)
        rounds.append(validation)
        stolen.append(steal)
        say(rounds[-1].verdict().split(":")[0])
        for line in rounds[-1].noise() + rounds[-1].repeatability_lines():
            say(line)
    validation = median_of_rounds(rounds)
    checks = validation.round_check()  # every table round's alternating parts pooled as rounds
    from scratchkit.commands.tables import format_round_check, format_validation

    print(format_validation(validation))
    print(format_round_check(checks))
    print(
        f"{len(profiles)} profiles x {len(trainers)} trainers, medians of {args.rounds} round(s) in {time.perf_counter() - started:.0f} s "
        f"(scale {args.scale} for {', '.join(p for p in profiles if p in scalable_profiles()) or 'none'})"
    )
    shares = [(share, k, name) for k, steal in enumerate(stolen) for name, share in steal.items() if share is not None]
    if shares:
        share, k, name = max(shares)
        print(
            f"the hypervisor's steal: at most {100 * share:.0f}% of the CPU time wanted, on {name} in round "
            f"{k + 1} (a quiet machine: near 0)"
        )
    figures = {
        "hardware": validation.hardware,
        "verdict": validation.verdict(),
        "passed": validation.passed,
        "rows": validation.to_json(),
        **checks.to_json(),
        "noise": validation.noise(),
        "repeatability": validation.repeatability_lines(),
        "beyond_the_machine": [r.to_dict() for r in validation.beyond_the_machine()],
        "again": [r.to_dict() for r in validation.again],
        "rounds": [
            {
                "hardware": r.hardware,
                "verdict": r.verdict(),
                "noise": r.noise(),
                "steal": steal,
                "rows": r.to_json(),
                "again": [a.to_dict() for a in r.again],
            }
            for r, steal in zip(rounds, stolen)
        ],
    }
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=2)
    if args.record:  # the round checks as tables, as `bench --validate --record` keeps them
        kept = {
            "profiles": ", ".join(profiles),
            "scale": args.scale,
            "trainers": ", ".join(trainers),
            "rounds": args.rounds,
            "alternate": args.alternate,
            "hardware": validation.hardware,
            "verdict": validation.verdict(),
            "spread_verdict": checks.verdict(),
            **recorded(checks),
        }
        print(f"recorded {record.write(args.record, kept)}", file=sys.stderr)
    return 0 if validation.passed else 1


def one_round(profiles: list[str], trainers: list[str], args, say) -> tuple[Validation, dict[str, float | None]]:
    """The whole table once: every profile's trainers, each profile calibrated just before them
    with --calibrate. -> (its rows, the share of CPU time the hypervisor stole per profile:
    calibration/steal.py)."""
    validation, stolen = Validation(), {}
    before = None  # the calibration after a profile is the next one's before
    for name in profiles:
        calibrate = (lambda: calibrate_now(lambda s: say(f"{name}: calibrate: {s}"))) if args.calibrate else None
        steps, warmup = STEPS.get(name, (10, 3))
        if args.quick:
            steps, warmup = max(3, steps // 3), max(1, warmup // 2)
        config = get_profile(name, scale=args.scale if name in scalable_profiles() else None).alone()
        t0 = time.perf_counter()
        with StealMeter() as steal:
            part = validate_trainers(
                config,
                trainers,
                steps,
                warmup=warmup,
                profile=name,
                device="cpu",
                rounds=args.alternate,
                again=args.again,
                calibrate=calibrate,
                before=before,
            )
        before = part.calibrations[-1] if part.calibrations else None
        stolen[name] = steal.share
        stole = "" if steal.share is None else f"; {100 * steal.share:.0f}% stolen"
        say(
            f"{name}: {steps} steps after {warmup} warm-up, {time.perf_counter() - t0:.0f} s{stole}; "
            f"{part.verdict().split(';')[0]}"
        )
        validation += part
    return validation, stolen


def calibrate_now(say):
    """Measure this machine (3 runs a figure), save it as `this-cpu`, and return it. With
    --calibrate, validate_trainers calls this just before and just after a profile's trainers
    (the one after is the next profile's before) and prices the profile by the median of the
    two: on a shared VM the machine's speed moves over seconds to minutes, and a calibration
    made long before the steps measured another machine."""
    from scratchkit.calibration.calibrate import calibrate
    from scratchkit.projection.machines import save_calibration

    t0 = time.perf_counter()
    profile = calibrate(progress=say, repeats=CALIBRATION_REPEATS)
    path = save_calibration(profile)
    say(f"calibrated and saved {path} in {time.perf_counter() - t0:.0f} s")
    return profile


if __name__ == "__main__":
    raise SystemExit(main())
