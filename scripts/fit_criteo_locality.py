"""Fit a Zipf exponent to each of Criteo Kaggle's 26 categorical features, from real rows.

    .venv/bin/python scripts/fit_criteo_locality.py [PATH]   # default: datasets/real/criteo-kaggle-sample/train.tsv

Prints the 26 exponents that the `criteo-skew` profile (scratchkit/profiles.py) uses, so its
synthetic ids are as skewed, feature by feature, as the real log's. Only these 26 numbers go into
the kit (scripts/measure_constants.py writes them into scratchkit/measured.json with where they
came from); the rows stay where they are.

The fit, per feature t with cardinality N_t (the DLRM reference's counts): hash each value into its
table as the loader does, count how often each row occurs, rank rows by count (rank 1 = the most
frequent), and take the exponent s that maximises the likelihood of those counts under a Zipf law
over N_t ranks: sum_k c_k * (-s * log k) - n * log H(N_t, s), with H(N, s) = sum_{k<=N} k^-s. The
ranks of rows seen once are a guess (any order among them), which is why the law is fitted to the
counts by rank rather than to individual rows. A sample of a few thousand rows says little about a
table of millions of rows' far tail; the exponent is what those rows say about the head.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from scratchkit.data.criteo import load_criteo
from scratchkit.data.samples import KAGGLE_SAMPLE as DEFAULT
from scratchkit.profiles import CRITEO_KAGGLE_CARDINALITIES


def log_partition(num_ranks: int, s: float, chunk: int = 1 << 22) -> float:
    """log H(N, s), summed in chunks so a 10M-rank law needs little memory."""
    total = 0.0
    for start in range(1, num_ranks + 1, chunk):
        k = np.arange(start, min(start + chunk, num_ranks + 1), dtype=np.float64)
        total += float(np.sum(k**-s))
    return float(np.log(total))


def fit_exponent(counts: np.ndarray, num_ranks: int) -> float:
    """The maximum-likelihood Zipf exponent in [0, 3] for `counts` (any order) over `num_ranks`."""
    counts = np.sort(counts)[::-1].astype(np.float64)  # rank 1 = most frequent
    log_rank_weight = float(np.sum(counts * np.log(np.arange(1, len(counts) + 1))))
    n = counts.sum()
    likelihood = lambda s: -s * log_rank_weight - n * log_partition(num_ranks, s)
    low, high = 0.0, 3.0
    for _ in range(40):  # golden-section search
        a, b = high - 0.618 * (high - low), low + 0.618 * (high - low)
        if likelihood(a) < likelihood(b):
            low = a
        else:
            high = b
    return round((low + high) / 2, 3)


def fit_exponents(path: Path) -> tuple[tuple[float, ...], int]:
    """(the 26 features' exponents, the rows they were fitted to); each feature's fit on stderr."""
    data = load_criteo(path, list(CRITEO_KAGGLE_CARDINALITIES), batch_size=1)
    exponents = []
    for t, size in enumerate(CRITEO_KAGGLE_CARDINALITIES):
        counts = np.unique(data.ids[t], return_counts=True)[1]
        exponents.append(fit_exponent(counts, size))
        print(
            f"C{t + 1:<3} {size:>10,} rows  {len(counts):>6,} distinct in {data.num_rows:,}  s = {exponents[-1]}",
            file=sys.stderr,
        )
    return tuple(exponents), data.num_rows


def main(path: Path) -> None:
    print(fit_exponents(path)[0])


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
