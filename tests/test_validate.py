"""`bench --validate` and its Python API: a validation run on `tiny` produces a row per trainer and
stage with the measured and predicted seconds and the error, a verdict that names the worst stage,
and JSON rows; bad input is refused in one line. The bounds themselves are checked by
benchmarks/bench_validate.py on a quiet machine, never here."""

import json

import pytest

from scratchkit.commands.cli import main
from scratchkit.commands.tables import format_validation
from scratchkit.measure.validate import (
    STAGE_BOUND,
    STEP_BOUND,
    Validation,
    ValidationRow,
    compare,
    make_row,
    median_of_rounds,
    validate_trainers,
)
from scratchkit.projection.project import Projection


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
    assert not rows["update"].bounded and rows["update"].within is None  # 2% of the step
    assert rows["data"].predicted_s is None and rows["data"].error is None
    assert rows["step"].bounded and rows["step"].error == pytest.approx(0.2) and rows["step"].within is False


def test_rounds_combine_as_medians_so_one_slow_round_moves_no_row():
    """Three rounds; in the second the machine ran the step 3x slow and the calibration read 2x
    fast. The medians are the other rounds' figures, and the errors, shares and bounds follow
    from the medians (not the median of the errors)."""

    def one(step, fetch, predicted_step, predicted_fetch, origin):
        rows = [
            make_row("tiny", "lru", "fetch", fetch, predicted_fetch, step),
            make_row("tiny", "lru", "data", 0.001, None, step),
            make_row("tiny", "lru", "step", step, predicted_step, step),
        ]
        return Validation(rows, origin)

    rounds = [
        one(0.010, 0.004, 0.011, 0.0045, "a"),
        one(0.030, 0.012, 0.005, 0.002, "b"),
        one(0.012, 0.005, 0.0115, 0.005, "c"),
    ]
    combined = {r.stage: r for r in median_of_rounds(rounds).rows}
    assert list(combined) == ["fetch", "data", "step"]
    step, fetch = combined["step"], combined["fetch"]
    assert step.measured_s == pytest.approx(0.012) and step.predicted_s == pytest.approx(0.011)
    assert step.error == pytest.approx(0.011 / 0.012 - 1) and step.within is True
    assert fetch.measured_s == pytest.approx(0.005) and fetch.predicted_s == pytest.approx(0.0045)
    assert fetch.share == pytest.approx(0.005 / 0.012) and fetch.bounded and fetch.within is True
    assert combined["data"].predicted_s is None and combined["data"].bounded is False
    assert median_of_rounds(rounds).hardware == "3 rounds: a; b; c" and median_of_rounds(rounds).passed
    assert not median_of_rounds(rounds[1:2]).passed  # the slow round alone fails


def test_the_machines_spread_is_the_same_dense_step_across_trainers():
    """Trainers that run the same dense step: its fastest and slowest measurement per profile,
    never a profile with one trainer's, never a stage other than mlp."""
    rows = [
        make_row("tiny", t, "mlp", s, 0.5e-3, 1e-3) for t, s in (("gpu-only", 0.5e-3), ("lru", 0.8e-3), ("lfu", 0.6e-3))
    ]
    rows += [make_row("tiny", "lru", "fetch", 5e-3, 1e-3, 1e-3), make_row("small", "lru", "mlp", 2e-3, 2e-3, 4e-3)]
    v = Validation(rows)
    assert v.dense_spread() == {"tiny": (pytest.approx(0.5e-3), pytest.approx(0.8e-3), 3)}
    assert v.noise() == ["tiny: the same dense step (mlp) measured 0.500-0.800 ms across 3 trainers (+60%)"]
    assert "the machine's spread:\n  tiny: the same dense step" in format_validation(v)


def test_the_same_trainer_run_twice_tells_the_machines_errors_from_the_models():
    """`again`: gpu-only's second run measured mlp 40% and the step 10% above its first. lru's mlp,
    30% off its prediction, is outside its bound but inside that difference; its fetch (no stage of
    the repeated trainer: the step's 10% stands for it) is outside both; the step of small, whose
    profile has no repeated trainer, outside its bound. The second run's rows are kept apart."""
    step = 10e-3
    rows = [
        make_row("tiny", "gpu-only", "mlp", 1e-3, 1e-3, step),
        make_row("tiny", "gpu-only", "step", step, step, step),
        make_row("tiny", "lru", "mlp", 2e-3, 1.4e-3, step),
        make_row("tiny", "lru", "fetch", 4e-3, 2e-3, step),
        make_row("tiny", "lru", "step", step, 9e-3, step),
        make_row("small", "lru", "step", step, 5e-3, step),
    ]
    again = [
        make_row("tiny", "gpu-only (again)", "mlp", 1.4e-3, 1e-3, 1.1 * step),
        make_row("tiny", "gpu-only (again)", "step", 1.1 * step, step, 1.1 * step),
    ]
    v = Validation(rows, "a", again)
    assert v.repeatability() == {("tiny", "mlp"): pytest.approx(0.4), ("tiny", "step"): pytest.approx(0.1)}
    outside = [(r.profile, r.trainer, r.stage) for r in v.failures()]
    assert outside == [("tiny", "lru", "mlp"), ("tiny", "lru", "fetch"), ("small", "lru", "step")]
    assert [(r.profile, r.stage) for r in v.beyond_the_machine()] == [("tiny", "fetch"), ("small", "step")]
    assert v.repeatability_lines() == [
        "tiny: the same trainer run twice differed by up to +40% (mlp), +10% on the step"
    ]
    assert "2 of the 3 rows outside are outside by more than" in format_validation(v)
    assert len(median_of_rounds([v, v]).again) == 2 and Validation(rows).beyond_the_machine() == v.failures()
    # the calibrations of those minutes predicted lru's fetch up to 60% from their median: its
    # 50% error is inside that and the step's 10% together
    both = Validation(rows, "a", again, {("tiny", "lru", "fetch"): 0.6})
    assert [(r.profile, r.stage) for r in both.beyond_the_machine()] == [("small", "step")]
    assert (
        "tiny: the calibrations before and after its trainers predicted a bounded row up to 60% from "
        "their median (lru fetch)"
    ) in both.repeatability_lines()
    assert median_of_rounds(
        [
            both,
            Validation(rows, "b", again, {("tiny", "lru", "fetch"): 0.2}),
            Validation(rows, "c", again, {("tiny", "lru", "fetch"): 0.4}),
        ]
    ).calibration_spread == {("tiny", "lru", "fetch"): pytest.approx(0.4)}


def test_the_validation_benchmark_runs_rounds_and_writes_them(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_validate.py"
    spec = importlib.util.spec_from_file_location("bench_validate", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out, kept = tmp_path / "v.json", tmp_path / "record.json"
    code = bench.main(
        [
            "--profiles",
            "tiny",
            "--trainers",
            "gpu-only,lru",
            "--quick",
            "--rounds",
            "2",
            "--json",
            str(out),
            "--record",
            str(kept),
        ]
    )
    text, err = capsys.readouterr()
    written = json.loads(out.read_text())
    record = json.loads(kept.read_text())
    assert record["command"].startswith("python benchmarks/bench_validate.py")
    assert record["figures"]["spread_verdict"] == written["spread_verdict"] and list(record["figures"]["ratios"]) == [
        "tiny lru / gpu-only"
    ]
    assert [(r["trainer"], r["reference"]) for r in written["ratio_rows"]] == [("lru", "gpu-only")]
    assert "samples/s ratios, medians of the rounds:" in text and written["spread_verdict"].startswith(("PASS", "FAIL"))
    assert code == (0 if written["passed"] else 1) and "medians of 2 round(s)" in text
    assert len(written["rounds"]) == 2 and "round 2/2: tiny:" in err
    assert written["noise"][0].startswith("tiny: the same dense step (mlp) measured")  # gpu-only's and lru's
    assert all(set(k["steal"]) == {"tiny"} for k in written["rounds"])  # the hypervisor's share, or None
    by_round = [{(r["trainer"], r["stage"]): r["measured_s"] for r in k["rows"]} for k in written["rounds"]]
    for r in written["rows"]:
        low, high = sorted(rounds[(r["trainer"], r["stage"])] for rounds in by_round)
        assert r["measured_s"] == pytest.approx((low + high) / 2)  # the median of two
    with pytest.raises(SystemExit) as refused:
        bench.main(["--rounds", "0"])
    assert refused.value.code == 2 and "--rounds must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:
        bench.main(["--alternate", "0"])
    assert refused.value.code == 2 and "--alternate must be at least 1, got 0" in capsys.readouterr().err


def test_each_profile_is_calibrated_before_and_after_its_trainers(monkeypatch, capsys):
    """--calibrate: a calibration on either side of every profile's trainers, the one after a
    profile standing for the next one's before, not one a round (the machine's speed moves over
    minutes)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_validate.py"
    spec = importlib.util.spec_from_file_location("bench_validate", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    happened, made = [], iter(range(100))
    monkeypatch.setattr(bench, "calibrate_now", lambda say: happened.append("calibrate") or f"machine{next(made)}")

    def validate(config, trainers, steps, profile, calibrate, before, **_):  # as validate_trainers does
        passes = [before if before is not None else calibrate()]
        happened.append(profile)
        passes.append(calibrate())
        return Validation(calibrations=passes)

    monkeypatch.setattr(bench, "validate_trainers", validate)
    bench.main(["--profiles", "tiny,small", "--trainers", "gpu-only", "--quick", "--rounds", "2", "--calibrate"])
    capsys.readouterr()
    assert happened == ["calibrate", "tiny", "calibrate", "small", "calibrate"] * 2


def test_alternated_trainers_take_their_steps_in_turn_and_count_the_same(tiny_config):
    """run_bench(rounds=K): each trainer's timed steps in K parts, taken in turn (the order reversed
    every other round), every trainer on the same batches as one after another: its counters and
    ScratchPipe's hits are the same (each trainer trains alone, only in turns)."""
    from scratchkit.measure.bench import run_bench

    order = []

    def wrap(records, total, name):  # a progress hook that sees each timed step as it is taken
        for record in records:
            order.append(name)
            yield record

    trainers = ["gpu-only", "lru", "scratchpipe"]
    alternated = run_bench(tiny_config, trainers, 5, warmup=2, device="cpu", wrap=wrap, rounds=2)
    assert (
        order
        == ["gpu-only"] * 3 + ["lru"] * 3 + ["scratchpipe"] * 3 + ["scratchpipe"] * 2 + ["lru"] * 2 + ["gpu-only"] * 2
    )
    alone = run_bench(tiny_config, trainers, 5, warmup=2, device="cpu")
    for a, b in zip(alternated, alone):
        assert (a.trainer, a.steps) == (b.trainer, b.steps)
        assert (a.lookups_per_step, a.fetched_rows_per_step, a.written_back_rows_per_step, a.hit_rate) == (
            b.lookups_per_step,
            b.fetched_rows_per_step,
            b.written_back_rows_per_step,
            b.hit_rate,
        )
    assert alternated[2].hit_rate == 1.0
    once = run_bench(tiny_config, ["lru"], 4, warmup=1, device="cpu")
    twice = run_bench(tiny_config, ["lru", "lru"], 4, warmup=1, device="cpu", rounds=2)  # each its own steps
    assert [(r.trainer, r.lookups_per_step, r.fetched_rows_per_step) for r in twice] == [
        ("lru", once[0].lookups_per_step, once[0].fetched_rows_per_step)
    ] * 2
    assert twice[0].seconds != twice[1].seconds  # two trainers timed, not one reported twice
    with pytest.raises(ValueError, match="rounds must be at least 1, got 0"):
        run_bench(tiny_config, trainers, 5, rounds=0)


def test_a_validation_run_on_tiny_gives_rows_and_a_verdict(tiny_config):
    trainers = ["gpu-only", "hybrid", "lru", "prefetch-lru", "scratchpipe"]
    from scratchkit.projection.machines import get_machine

    machine = get_machine("this-cpu")
    taken = []
    v = validate_trainers(
        tiny_config,
        trainers,
        steps=4,
        warmup=2,
        profile="tiny",
        device="cpu",
        again=True,
        rounds=2,
        calibrate=lambda: taken.append(machine) or machine,
    )
    from dataclasses import replace

    last = replace(machine, origin="the last profile's")  # the calibration after the profile before
    assert validate_trainers(
        tiny_config, ["gpu-only"], steps=2, warmup=1, device="cpu", calibrate=lambda: machine, before=last
    ).calibrations == [last, machine]
    assert [r.trainer for r in v.rows if r.stage == "step"] == trainers
    assert {r.trainer for r in v.again} == {"gpu-only (again)"} and set(v.repeatability()) >= {("tiny", "step")}
    assert len(taken) == 2 and set(v.calibration_spread.values()) == {0.0}  # the same profile twice
    assert v.calibration_spread[("tiny", "lru", "fetch")] == 0.0 and "median of 2: before and after" in v.hardware
    for r in v.rows:
        assert r.profile == "tiny" and r.measured_s >= 0
        if r.stage not in ("data",):
            assert r.predicted_s is not None and r.predicted_s >= 0
    stages = {(r.trainer, r.stage) for r in v.rows}
    assert {("scratchpipe", "plan"), ("scratchpipe", "train"), ("prefetch-lru", "prefetch"), ("lru", "fetch")} <= stages
    assert v.verdict().split(":")[0] in (
        "PASS",
        *[f"FAIL ({n} of {len(v.bounded())} bounded rows outside)" for n in range(1, len(v.rows) + 1)],
    )
    assert v.hardware and v.worst() is not None


def test_bench_validate_prints_json_rows_and_a_table(capsys):
    code = main(
        [
            "bench",
            "--profile",
            "tiny",
            "--trainers",
            "gpu-only,lru",
            "--capacity",
            "300",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--validate",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and {"hardware", "verdict", "passed", "worst", "rows"} <= set(out)  # and the round checks
    for r in out["rows"]:
        assert {"profile", "trainer", "stage", "measured_s", "predicted_s", "error"} <= set(r)
    assert {r["trainer"] for r in out["rows"]} == {"gpu-only", "lru"}
    code = main(["bench", "--profile", "tiny", "--trainers", "hybrid", "--steps", "2", "--warmup", "1", "--validate"])
    text = capsys.readouterr().out
    assert code == 0 and "measured ms" in text and "this-cpu:" in text
    assert text.rstrip().splitlines()[-1].startswith(("PASS", "FAIL"))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--profile", "nope"], "unknown profile 'nope'"),
        (["--profile", "tiny", "--trainers", "warp"], "warp"),
        (["--profile", "tiny", "--steps", "0"], "--steps must be >= 1, got 0"),
        (["--profile", "tiny", "--scale", "0.5"], "--scale applies to the profiles"),
    ],
)
def test_bad_validate_input_is_one_line(argv, message, capsys):
    code = main(["bench", *argv, "--validate"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_profile_all_needs_validate(capsys):
    assert main(["bench", "--profile", "all"]) == 2
    assert "--profile all needs --validate" in capsys.readouterr().err
