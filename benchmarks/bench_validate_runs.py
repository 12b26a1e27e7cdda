"""`bench --validate` run after run, each after a fresh `calibrate --quick`: whether the cost model
holds on this machine every time, not once.

Each run is the two commands a user types, in subprocesses: `scratchkit calibrate --quick` (saved
as this machine's `this-cpu`), then `scratchkit bench --validate` on the profiles at `--scale`
(every trainer, `--rounds` alternating rounds; each stage alone, as the calibration times it:
`TrainConfig.alone`). A run passes where every trainer's samples/s over gpu-only's is within 15%
of the model's, or within twice that ratio's spread between the run's rounds where that is wider
(measure/round_checks.py). The record keeps each run's ratios, its stages outside their bound,
its verdicts and the machine's load as it started and ended. Run it on a quiet machine.

    python benchmarks/bench_validate_runs.py                                   # 3 runs, ~7 min on 2 cores
    python benchmarks/bench_validate_runs.py --runs 3 --record results/validate.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from scratchkit.measure.record import RunRecord, add_record_option

PROFILES = "small,criteo-like,embedding-bound"


def validate_once(profiles: str, scale: float, steps: int, rounds: int, folder: Path, run: int) -> dict:
    """One fresh calibration, then one validation; -> its record's figures."""
    scratchkit = [sys.executable, "-c", "import sys; from scratchkit.commands.cli import main; sys.exit(main())"]
    subprocess.run([*scratchkit, "calibrate", "--quick"], check=True, stdout=subprocess.DEVNULL)
    record = folder / f"run{run}.json"
    subprocess.run(
        [
            *scratchkit,
            "bench",
            "--validate",
            f"--profile={profiles}",
            f"--scale={scale}",
            f"--steps={steps}",
            "--warmup=5",
            f"--rounds={rounds}",
            f"--record={record}",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return json.loads(record.read_text())["figures"]


def summary(figures: dict) -> dict:
    """What a run's record keeps here: its verdicts and load, every ratio, the stages outside."""
    ratios = figures["ratios"]
    outside = {name: row for name, row in figures["stages"].items() if row["within"] is False}
    held = sum(row["within"] for row in ratios.values())
    return {
        "ratios within": f"{held} of {len(ratios)}",
        "passed": held == len(ratios),
        "spread_verdict": figures["spread_verdict"],
        "hardware": figures["hardware"],
        "load": figures["load"],
        "ratios": ratios,
        "stages outside their bound": outside or {"none": {"within": True}},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="calibrations and validations in a row (default 3)")
    parser.add_argument("--profiles", default=PROFILES, help=f"comma-separated (default {PROFILES})")
    parser.add_argument("--scale", type=float, default=0.1, help="for the scalable profiles (default 0.1)")
    parser.add_argument("--steps", type=int, default=60, help="timed steps a trainer (default 60)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds a validation (default 5)")
    add_record_option(parser, "validate")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    record = RunRecord.of_run(__file__, argv)
    runs = {}
    with tempfile.TemporaryDirectory() as folder:
        for k in range(1, args.runs + 1):
            print(f"run {k} of {args.runs}: calibrate --quick, then bench --validate", file=sys.stderr)
            runs[f"run {k}"] = summary(
                validate_once(args.profiles, args.scale, args.steps, args.rounds, Path(folder), k)
            )
            print(f"  ratios within: {runs[f'run {k}']['ratios within']}", file=sys.stderr)
    passed = sum(run["passed"] for run in runs.values())
    print(f"{passed} of {args.runs} runs held every ratio")
    record.keep(args.record, {"runs passed": f"{passed} of {args.runs}", **runs})
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
