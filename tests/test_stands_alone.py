"""The project stands alone: nothing it runs reads a folder outside the repository (a sample it
may not ship is placed inside it, in datasets/real/: scratchkit/data/samples.py)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"\.\./shared|REPO\.parent|parents\[\d\] / \"shared\"|parent / \"shared\"")


def test_no_code_reaches_outside_the_repository():
    code = [
        *ROOT.glob("scratchkit/**/*.py"),
        *ROOT.glob("scripts/*.py"),
        *ROOT.glob("benchmarks/*.py"),
        *ROOT.glob("notebooks/*.py"),
        *ROOT.glob("tests/*.py"),
        *ROOT.glob("solutions/*.py"),
    ]
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in code
        if p.name not in (Path(__file__).name, "test_architecture.py")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == [], "\n".join(found)


def test_the_kaggle_sample_is_looked_for_inside_the_repository():
    from scratchkit.data.samples import COMMITTED_SAMPLE, KAGGLE_SAMPLE

    for path in (KAGGLE_SAMPLE, COMMITTED_SAMPLE):
        assert path.is_relative_to(ROOT / "datasets"), path
    assert COMMITTED_SAMPLE.exists()
