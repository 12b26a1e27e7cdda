"""Write the tiny synthetic samples in datasets/samples/: the real file formats, made-up values.

    python datasets/make_samples.py           # (re)write the samples
    python datasets/make_samples.py --check   # exit 1 if the files on disk differ from a fresh run

They exist so that a notebook or a test can show the loaders at work without any real data.
Nothing in them comes from Criteo or MovieLens: every value is derived from SHA-256 of a label and a
counter, so the files come out byte for byte the same on every machine and Python version (no
random-number generator whose stream might change). The categorical values are skewed (a few
values recur often, most are rare), as in real click logs, so the samples also make a small
access trace worth caching.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

SAMPLES_DIR = Path(__file__).resolve().parent / "samples"
CRITEO_ROWS = 48  # 3 batches of 16: a few KB, enough to show batching and a report
U_DATA_ROWS = 200  # MovieLens-100K layout
RATINGS_CSV_ROWS = 120  # ml-latest layout, half stars


def draw(*key: object) -> int:
    """A 64-bit number fixed by `key`: the same on every run, unrelated between keys."""
    digest = hashlib.sha256(":".join(map(str, key)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def uniform(*key: object) -> float:
    """A number in [0, 1) fixed by `key`."""
    return draw(*key) / 2**64


def skewed(cardinality: int, *key: object) -> int:
    """A value in [0, cardinality), small values far more often (u**3 piles up near 0)."""
    return int(uniform(*key) ** 3 * cardinality)


def criteo_lines(rows: int = CRITEO_ROWS) -> list[str]:
    """Criteo Kaggle layout: label, I1-I13 (some empty, I2 sometimes negative), C1-C26 (some empty)."""
    lines = []
    for r in range(rows):
        label = "1" if uniform("label", r) < 0.25 else "0"  # about Criteo's click rate
        dense = []
        for j in range(1, 14):
            if uniform("I-missing", j, r) < 0.2:
                dense.append("")
            else:
                low = -2 if j == 2 else 0  # Kaggle's I2 is the column with negative values
                dense.append(str(low + skewed(500, "I", j, r)))
        cats = []
        for t in range(1, 27):
            if uniform("C-missing", t, r) < 0.1:
                cats.append("")
            else:
                value = skewed(20 * t, "C", t, r)  # tables of growing cardinality
                cats.append(hashlib.sha256(f"C{t}={value}".encode()).hexdigest()[:8])
        lines.append("\t".join([label, *dense, *cats]))
    return lines


def _ratings(rows: int, users: int, movies: int, half_stars: bool, tag: str):
    for r in range(rows):
        user = 1 + skewed(users, tag, "user", r)
        movie = 1 + skewed(movies, tag, "movie", r)
        stars = 1 + draw(tag, "rating", r) % (9 if half_stars else 5)
        rating = f"{(stars + 1) / 2:.1f}" if half_stars else str(stars)
        yield user, movie, rating, 880_000_000 + draw(tag, "time", r) % 10_000_000


def u_data_lines(rows: int = U_DATA_ROWS) -> list[str]:
    """MovieLens-100K `u.data`: user, item, rating 1-5, timestamp; tab-separated, no header."""
    return [f"{u}\t{m}\t{r}\t{t}" for u, m, r, t in _ratings(rows, 30, 80, False, "u.data")]


def ratings_csv_lines(rows: int = RATINGS_CSV_ROWS) -> list[str]:
    """MovieLens `ratings.csv`: a header, then user, movie, rating 1.0-5.0 in half stars, timestamp."""
    body = [f"{u},{m},{r},{t}" for u, m, r, t in _ratings(rows, 20, 60, True, "ratings.csv")]
    return ["userId,movieId,rating,timestamp", *body]


def render() -> dict[str, str]:
    """File name -> file text of every sample."""
    return {
        "criteo-synthetic.tsv": "\n".join(criteo_lines()) + "\n",
        "movielens-synthetic-u.data": "\n".join(u_data_lines()) + "\n",
        "movielens-synthetic-ratings.csv": "\n".join(ratings_csv_lines()) + "\n",
    }


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, text in render().items():
        path = SAMPLES_DIR / name
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            SAMPLES_DIR.mkdir(exist_ok=True)
            path.write_text(text)
            print(f"wrote {path} ({len(text.encode()):,} bytes)")
    if stale:
        print(f"out of date: {', '.join(stale)}; run python datasets/make_samples.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
