"""benchmarks/bench_commits.py: a trainer's speed at two commits, as the median of the rounds'
ratios beside their spread (the run itself is a benchmark, never timed here)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_commits import compare  # noqa: E402


def test_a_ratio_inside_its_spread_is_no_change_and_one_outside_is():
    before = [{"a": 100.0, "b": 100.0}, {"a": 120.0, "b": 100.0}, {"a": 100.0, "b": 100.0}]
    after = [{"a": 110.0, "b": 150.0}, {"a": 108.0, "b": 151.0}, {"a": 95.0, "b": 149.0}]
    rows = compare(before, after)
    assert rows["a"]["ratio"] == 0.95 and rows["a"]["within"]  # 1.10, 0.90, 0.95: noise
    assert abs(rows["b"]["ratio"] - 1.50) < 1e-12 and not rows["b"]["within"]  # 1.49-1.51: a change
    assert rows["b"]["before"] == 100.0 and rows["b"]["after"] == 150.0
