"""benchmarks/bench_machine.py: how far the same probe's times spread, window by window."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest


def load():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_machine.py"
    spec = importlib.util.spec_from_file_location("bench_machine", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_spread_is_the_ratio_of_the_windows_medians():
    bench = load()
    stamps = np.arange(0, 10, 0.01)  # 10 s, a sample every 10 ms
    assert bench.spread(np.full(stamps.size, 2e-3), stamps, 1.0) == pytest.approx(1.0)
    slow = np.where((stamps // 1) % 2 == 0, 1e-3, 3e-3)  # alternate seconds 3x slower
    assert bench.spread(slow, stamps, 1.0) == pytest.approx(3.0)
    assert bench.spread(slow, stamps, 2.0) == pytest.approx(1.0)  # each 2 s window holds both
    assert bench.spread(slow, stamps, 5.0) is None  # two windows: too few


def test_it_reports_every_probe(tmp_path, capsys):
    bench = load()
    out = tmp_path / "m.json"
    assert bench.main(["--seconds", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report) == {"memory", "compute", "lookup"}
    assert all(r["median_s"] > 0 and r["samples"] >= 3 for r in report.values())
    assert "spread" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["--seconds", "0"])
