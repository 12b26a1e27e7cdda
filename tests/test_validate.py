"""`bench --validate` and its Python API: a validation run on `tiny` produces a row per trainer and
stage with the measured and predicted seconds and the error, a verdict that names the worst stage,
and JSON rows; bad input is refused in one line. The bounds themselves are checked by
benchmarks/bench_validate.py on a quiet machine, never here."""
import json

import pytest

from scratchkit.commands.cli import main
from scratchkit.measure.validate import STAGE_BOUND, STEP_BOUND, Validation, ValidationRow, compare, validate_trainers
from scratchkit.measure.costmodel import Projection


def row(stage, error, share, trainer="lru", bounded=True):
    within = abs(error) <= (STEP_BOUND if stage == "step" else STAGE_BOUND) if bounded else None
    return ValidationRow("tiny", trainer, stage, 0.01, 0.01 * (1 + error), share, error, bounded, within)


def test_the_verdict_applies_the_bounds_and_names_the_worst_stage():
    good = Validation([row("fetch", 0.2, 0.5), row("data", 0.9, 0.05, bounded=False), row("step", -0.1, 1.0)])
    assert good.passed and good.verdict().startswith("PASS")
    assert "worst stage: lru fetch on tiny +20%" in good.verdict()
    bad = good + Validation([row("train", -0.3, 0.4, "scratchpipe"), row("step", 0.16, 1.0, "scratchpipe")])
    assert not bad.passed and bad.verdict().startswith("FAIL (2 of 4 bounded rows outside)")
    assert "worst stage: scratchpipe train on tiny -30%" in bad.verdict()
    assert "worst step: scratchpipe on tiny +16%" in bad.verdict()


def test_compare_bounds_only_stages_over_a_tenth_of_the_step():
    p = Projection("lru", "this-cpu", {"fetch": 0.004, "update": 0.0001}, 0.012, 1.0, "fetch", False)
    rows = {r.stage: r for r in compare("tiny", "lru", {"fetch": 0.002, "update": 0.0002, "data": 0.001}, 0.01, p)}
    assert rows["fetch"].bounded and rows["fetch"].within is False and rows["fetch"].error == pytest.approx(1.0)
    assert not rows["update"].bounded and rows["update"].within is None          # 2% of the step
    assert rows["data"].predicted_s is None and rows["data"].error is None
    assert rows["step"].bounded and rows["step"].error == pytest.approx(0.2) and rows["step"].within is False


def test_a_validation_run_on_tiny_gives_rows_and_a_verdict(tiny_config):
    trainers = ["gpu-only", "hybrid", "lru", "prefetch-lru", "scratchpipe"]
    v = validate_trainers(tiny_config, trainers, steps=4, warmup=2, profile="tiny", device="cpu")
    assert [r.trainer for r in v.rows if r.stage == "step"] == trainers
    for r in v.rows:
        assert r.profile == "tiny" and r.measured_s >= 0
        if r.stage not in ("data",):
            assert r.predicted_s is not None and r.predicted_s >= 0
    stages = {(r.trainer, r.stage) for r in v.rows}
    assert {("scratchpipe", "plan"), ("scratchpipe", "train"), ("prefetch-lru", "prefetch"), ("lru", "fetch")} <= stages
    assert v.verdict().split(":")[0] in ("PASS", *[f"FAIL ({n} of {len(v.bounded())} bounded rows outside)"
                                                   for n in range(1, len(v.rows) + 1)])
    assert v.hardware and v.worst() is not None


def test_bench_validate_prints_json_rows_and_a_table(capsys):
    code = main(["bench", "--profile", "tiny", "--trainers", "gpu-only,lru", "--capacity", "300",
                 "--steps", "3", "--warmup", "1", "--validate", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and set(out) == {"hardware", "verdict", "passed", "worst", "rows"}
    for r in out["rows"]:
        assert {"profile", "trainer", "stage", "measured_s", "predicted_s", "error"} <= set(r)
    assert {r["trainer"] for r in out["rows"]} == {"gpu-only", "lru"}
    code = main(["bench", "--profile", "tiny", "--trainers", "hybrid", "--steps", "2", "--warmup", "1", "--validate"])
    text = capsys.readouterr().out
    assert code == 0 and "measured ms" in text and "this-cpu:" in text
    assert text.rstrip().splitlines()[-1].startswith(("PASS", "FAIL"))


@pytest.mark.parametrize("argv, message", [
    (["--profile", "nope"], "unknown profile 'nope'"),
    (["--profile", "tiny", "--trainers", "warp"], "warp"),
    (["--profile", "tiny", "--steps", "0"], "steps must be positive"),
    (["--profile", "tiny", "--scale", "0.5"], "--scale applies to the profiles"),
])
def test_bad_validate_input_is_one_line(argv, message, capsys):
    code = main(["bench", *argv, "--validate"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_profile_all_needs_validate(capsys):
    assert main(["bench", "--profile", "all"]) == 2
    assert "--profile all needs --validate" in capsys.readouterr().err
