"""Measure the kit's measured constants again and write them, with their provenance, to
scratchkit/measured.json (read by scratchkit/measured.py).

    .venv/bin/python scripts/measure_constants.py              # measure every one, print, write
    .venv/bin/python scripts/measure_constants.py miss_share   # only these
    .venv/bin/python scripts/measure_constants.py --dry-run    # print, write nothing

Each constant gets its value, what it is, the command, the commit, the date, the machine and the
figures it was chosen from:

    miss_share              ScratchPipe's rows fetched a step over the distinct rows the step
                            touches, on `small` (60 timed steps after 5 of warm-up): the share
                            the sharded cost model moves when no run measured one
                            (distributed/sharded_cost.py). Data, not speed: the same on any machine.
    criteo_kaggle_exponents the Zipf exponent of each of Criteo Kaggle's 26 categorical features,
                            fitted to the Kaggle sample (datasets/real/, scripts/fit_criteo_locality.py;
                            about 2 minutes): the `criteo-skew` profile's locality (profiles.py).
    bitmap_rows_per_lookup  up to how many table rows per lookup a batch's working set is made
                            with a bitmap rather than np.unique (embedding/working_sets.py): the
                            largest power of two at most half the crossover (where the bitmap
                            stops winning; at the crossover the two tie, and other machines
                            differ: the half is the margin). Timed here: bitmap against np.unique on a Zipf batch of
                            2,048 lookups (small's per table), alternating rounds, the best of them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from scratchkit.data.synthetic import SyntheticSource  # noqa: E402
from scratchkit.embedding.working_sets import WorkingSets  # noqa: E402
from scratchkit.measure.bench import run_bench  # noqa: E402
from scratchkit.measure.record import RunRecord  # noqa: E402
from scratchkit.measured import DATA  # noqa: E402
from scratchkit.profiles import get_profile  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
from fit_criteo_locality import DEFAULT as CRITEO_SAMPLE, fit_exponents  # noqa: E402
from scratchkit.data.samples import PLACE_IT  # noqa: E402

WARMUP, STEPS = 5, 60
LOOKUPS = 2048  # small's lookups a table a batch (256 x pooling 8)
ROWS_PER_LOOKUP = (16, 32, 64, 128, 256, 512, 1024)
ROUNDS, REPEATS = 9, 20


def miss_share() -> tuple[float, dict]:
    config = get_profile("small")
    result = run_bench(config, ["scratchpipe"], STEPS, warmup=WARMUP)[0]
    source = SyntheticSource(config.data)
    distinct = statistics.mean(
        sum(len(np.unique(ids)) for ids in source.batch(b).ids) for b in range(WARMUP, WARMUP + STEPS)
    )
    share = result.fetched_rows_per_step / distinct
    return round(share, 2), {
        "fetched rows a step": result.fetched_rows_per_step,
        "distinct rows a step": distinct,
        "share": share,
    }


def per_call(fn, ids) -> float:
    start = time.perf_counter()
    for _ in range(REPEATS):
        fn(ids)
    return (time.perf_counter() - start) / REPEATS


def bitmap_rows_per_lookup() -> tuple[int, dict]:
    rng = np.random.default_rng(0)
    times = {k: {"bitmap": [], "np.unique": []} for k in ROWS_PER_LOOKUP}
    # Zipf ranks folded into the table, as the synthetic source folds them (data/synthetic.py)
    batches = {k: ((rng.zipf(1.05, LOOKUPS) - 1) % (k * LOOKUPS)).astype(np.int64) for k in ROWS_PER_LOOKUP}
    for r in range(ROUNDS):
        for k in ROWS_PER_LOOKUP if r % 2 == 0 else ROWS_PER_LOOKUP[::-1]:
            sets = WorkingSets(k * LOOKUPS)
            bitmap = _always_bitmap(sets)
            bitmap(batches[k])  # its scratch made and faulted in: untimed
            times[k]["bitmap"].append(per_call(bitmap, batches[k]))
            times[k]["np.unique"].append(per_call(lambda ids: np.unique(ids, return_inverse=True), batches[k]))
    ratio = {k: min(t["np.unique"]) / min(t["bitmap"]) for k, t in times.items()}  # best of the rounds: least disturbed
    crossover = crossover_of(ratio)
    value = max([k for k in ROWS_PER_LOOKUP if k <= crossover / 2] or ROWS_PER_LOOKUP[:1])
    return value, {
        "lookups": LOOKUPS,
        "rounds": ROUNDS,
        "np.unique / bitmap, best of the rounds, by rows per lookup": {str(k): round(v, 2) for k, v in ratio.items()},
        "crossover, rows per lookup": round(crossover),
    }


def crossover_of(ratio: dict[int, float]) -> float:
    """Where the bitmap stops winning: between its last unbroken win from the smallest size and the
    next size, where np.unique / bitmap passes 1, interpolated in log size."""
    sizes = sorted(ratio)
    for small, large in zip(sizes, sizes[1:]):
        if ratio[small] > 1.0 >= ratio[large]:
            return small * (large / small) ** (np.log(ratio[small]) / np.log(ratio[small] / ratio[large]))
        if ratio[small] <= 1.0:
            return float(small)
    return float(sizes[-1])


def criteo_kaggle_exponents() -> tuple[list[float], dict]:
    if not CRITEO_SAMPLE.exists():
        raise SystemExit(f"criteo_kaggle_exponents: {PLACE_IT}")
    exponents, rows = fit_exponents(CRITEO_SAMPLE)
    md5 = hashlib.md5(CRITEO_SAMPLE.read_bytes()).hexdigest()
    return list(exponents), {
        "data": "the Criteo Kaggle sample (datasets/real/, not part of the kit)",
        "md5": md5,
        "rows": rows,
        "fit": "scripts/fit_criteo_locality.py: maximum likelihood, s in [0, 3]",
    }


def _always_bitmap(sets: WorkingSets) -> WorkingSets:
    """`sets` with the bitmap taken at any size (the threshold is what is being measured)."""
    sets.uses_bitmap = lambda lookups: True
    return sets


CONSTANTS = {
    "miss_share": (
        miss_share,
        "ScratchPipe's rows fetched a step over the distinct rows the step "
        "touches, on small; the sharded cost model's share where no run measured one",
        "scratchkit/distributed/sharded_cost.py:MISS_SHARE",
    ),
    "bitmap_rows_per_lookup": (
        bitmap_rows_per_lookup,
        "up to how many table rows per lookup a "
        "working set is made with a bitmap, not np.unique: the largest "
        "power of two at most half the measured crossover (a margin)",
        "scratchkit/embedding/working_sets.py:WorkingSets",
    ),
    "criteo_kaggle_exponents": (
        criteo_kaggle_exponents,
        "the Zipf exponent of each of Criteo Kaggle's 26 "
        "categorical features, fitted to real rows: the criteo-skew profile's locality",
        "scratchkit/profiles.py:CRITEO_KAGGLE_EXPONENTS",
    ),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"of {', '.join(CONSTANTS)} (default: all)")
    parser.add_argument("--dry-run", action="store_true", help="print, write nothing")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(CONSTANTS))
    if unknown:
        parser.error(f"unknown constant {unknown[0]!r}; choose from {', '.join(CONSTANTS)}")
    entries = json.loads(DATA.read_text()) if DATA.exists() else {}
    for name in args.names or list(CONSTANTS):
        measure, what, used_by = CONSTANTS[name]
        head = RunRecord.of_run(__file__, [name]).head
        value, figures = measure()
        entries[name] = {"value": value, "what": what, "used by": used_by, **head, "figures": figures}
        print(f"{name} = {value}  {json.dumps(figures)}")
    if not args.dry_run:
        DATA.write_text(json.dumps(entries, indent=2) + "\n")
        print(f"wrote {DATA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
