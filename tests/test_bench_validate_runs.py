"""benchmarks/bench_validate_runs.py: a run passes only where every ratio held."""

import importlib.util
from pathlib import Path


def load():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_validate_runs.py"
    spec = importlib.util.spec_from_file_location("bench_validate_runs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def figures(*within: bool, stage_within=(True, False, None)) -> dict:
    ratio = lambda ok: {"measured": 0.5, "predicted": 0.6, "error %": 20.0, "within": ok}
    stage = lambda ok: {"measured ms": 1.0, "predicted ms": 2.0, "within": ok}
    return {
        "ratios": {f"small t{k} / gpu-only": ratio(ok) for k, ok in enumerate(within)},
        "stages": {f"small t{k} mlp": stage(ok) for k, ok in enumerate(stage_within)},
        "spread_verdict": "FAIL (1 of 2 rows outside)",
        "hardware": "saved calibration",
        "load": "0.9 as it started, 1.1 as it ended",
    }


def test_one_ratio_outside_fails_the_run_and_the_stages_outside_are_kept():
    run = load().summary(figures(True, False, True))
    assert run["ratios within"] == "2 of 3" and run["passed"] is False
    assert list(run["stages outside their bound"]) == ["small t1 mlp"]


def test_every_ratio_within_passes():
    run = load().summary(figures(True, True, stage_within=(True,)))
    assert run["ratios within"] == "2 of 2" and run["passed"] is True
    assert run["stages outside their bound"] == {"none": {"within": True}}
