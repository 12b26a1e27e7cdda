"""`bench --validate`'s checks against the run's own spread between rounds (measure/round_checks.py),
on made-up round data: a ratio off by 10% passes, by 30% with a small spread fails, by 30% with a
20% spread passes under the spread bound; a stage likewise at 25%; the bound the model names beside
the one the measured stages say; the hook that keeps each trainer's steps by round; and the JSON's
shape from a real run on `tiny`."""

import json

import pytest

from scratchkit.commands.cli import main
from scratchkit.measure.round_checks import (
    BoundFrom,
    Predicted,
    RoundTimes,
    check,
    limit,
    measured_bound,
    spread,
    stage_row,
)
from scratchkit.measure.round_checks import by_round
from scratchkit.measure.validate import median_of_rounds, Validation

BATCH = 1000


def rounds_of(sps: list[float], stages: dict[str, list[float]] | None = None) -> list[RoundTimes]:
    """Per round: samples/s (a batch of BATCH) and each stage's seconds per step."""
    stages = stages or {}
    return [RoundTimes(BATCH / s, s, {k: v[i] for k, v in stages.items()}) for i, s in enumerate(sps)]


def predicted(sps: float, stages: dict[str, float] | None = None, bound: str = "mlp", resources=None) -> Predicted:
    return Predicted(sps, stages or {}, bound, resources or {"serial": BATCH / sps})


def ratio_row(measured_per_round: list[float], predicted_ratio: float):
    """lru's ratio to gpu-only: gpu-only at 1000 samples/s every round, lru at the given ratios."""
    rounds = {
        "gpu-only": rounds_of([1000.0] * len(measured_per_round)),
        "lru": rounds_of([1000.0 * r for r in measured_per_round]),
    }
    model = {"gpu-only": predicted(1000.0), "lru": predicted(1000.0 * predicted_ratio)}
    (row,) = check("small", rounds, model).ratio_rows
    return row


def test_spread_is_the_farthest_round_from_the_median():
    assert spread([1.0, 1.1, 0.8]) == pytest.approx(0.2)
    assert spread([2.0]) == 0.0 and spread([]) == 0.0
    assert limit(0.15, 0.05) == (0.15, BoundFrom.FIXED) and limit(0.15, 0.2) == (pytest.approx(0.4), BoundFrom.SPREAD)


def test_a_ratio_off_by_ten_percent_passes():
    row = ratio_row([0.5, 0.5, 0.5], 0.55)
    assert row.measured_ratio == pytest.approx(0.5) and row.predicted_ratio == pytest.approx(0.55)
    assert row.error == pytest.approx(0.10) and row.spread == 0.0
    assert row.within and row.bound == pytest.approx(0.15) and row.bound_from is BoundFrom.FIXED
    assert row.reference == "gpu-only"


def test_a_ratio_off_by_thirty_percent_with_a_small_spread_fails():
    row = ratio_row([0.5, 0.51, 0.49], 0.65)
    assert row.error == pytest.approx(0.30) and row.spread == pytest.approx(0.02)
    assert not row.within and row.bound_from is BoundFrom.FIXED


def test_a_ratio_off_by_thirty_percent_with_a_twenty_percent_spread_passes_under_the_spread_bound():
    row = ratio_row([0.5, 0.6, 0.4], 0.65)
    assert row.measured_ratio == pytest.approx(0.5) and row.spread == pytest.approx(0.2)
    assert row.within and row.bound == pytest.approx(0.4) and row.bound_from is BoundFrom.SPREAD
    assert not ratio_row([0.5, 0.6, 0.4], 0.75).within  # +50%: outside even twice the spread


def test_the_ratio_is_taken_per_round_so_a_slow_round_for_both_moves_nothing():
    """Round 2 ran everything at half speed: the per-round ratios are all 0.5, the spread 0."""
    rounds = {"gpu-only": rounds_of([1000.0, 500.0, 1000.0]), "lru": rounds_of([500.0, 250.0, 500.0])}
    (row,) = check("small", rounds, {"gpu-only": predicted(1000.0), "lru": predicted(500.0)}).ratio_rows
    assert row.measured_ratio == pytest.approx(0.5) and row.spread == 0.0 and row.error == pytest.approx(0.0)


def test_without_gpu_only_the_first_trainer_is_the_reference():
    rounds = {"lru": rounds_of([500.0]), "lfu": rounds_of([250.0])}
    (row,) = check("small", rounds, {"lru": predicted(500.0), "lfu": predicted(250.0)}).ratio_rows
    assert (row.trainer, row.reference, row.measured_ratio) == ("lfu", "lru", pytest.approx(0.5))


def test_a_stage_is_held_to_its_own_spread_where_wider_than_a_quarter():
    steady = stage_row("small", "lru", "fetch", [4e-3, 4.1e-3, 3.9e-3], 1e-2, 5.2e-3)  # +30%, 2.5% spread
    assert steady.error == pytest.approx(0.3) and not steady.within and steady.bound_from is BoundFrom.FIXED
    wobbly = stage_row("small", "lru", "fetch", [4e-3, 4.8e-3, 3.2e-3], 1e-2, 5.2e-3)  # +30%, 20% spread
    assert wobbly.within and wobbly.bound == pytest.approx(0.4) and wobbly.bound_from is BoundFrom.SPREAD
    assert stage_row("small", "lru", "fetch", [4e-3] * 3, 1e-2, 4.8e-3).within  # +20%
    small = stage_row("small", "lru", "update", [5e-4] * 3, 1e-2, 5e-3)  # 5% of the step
    assert small.within is None and small.bound is None and small.error == pytest.approx(9.0)
    data = stage_row("small", "lru", "data", [5e-3] * 3, 1e-2, None)
    assert data.within is None and data.error is None


def test_the_check_fails_on_a_stage_and_says_so():
    """A step of 1 s: mlp 0.6 s as predicted, the backward 0.3 s predicted at 0.48 s (+60%)."""
    rounds = {"gpu-only": rounds_of([1000.0] * 3, {"mlp": [0.6] * 3, "embedding_backward": [0.3] * 3})}
    out = check("small", rounds, {"gpu-only": predicted(1000.0, {"mlp": 0.6, "embedding_backward": 0.48})})
    assert [r.stage for r in out.failures()] == ["embedding_backward"]
    assert not out.passed and out.verdict().startswith("FAIL (1 of 2 rows outside) against the run's own spread")
    doc = json.loads(json.dumps(out.to_json()))
    assert set(doc) == {"ratio_rows", "bound_rows", "stage_rows", "spread_verdict", "spread_passed"}
    assert doc["stage_rows"][1]["bound_from"] == "fixed" and doc["spread_passed"] is False


def test_the_bound_the_model_names_beside_the_one_the_run_measured():
    """A serial trainer: its largest modelled stage (data not counted). A CPU ScratchPipe: the busier
    of its host process (its host stages and the batches it reads) and Train."""
    serial = predicted(1000.0, {"fetch": 1e-3, "mlp": 2e-3}, bound="mlp")
    assert measured_bound({"data": 9e-3, "fetch": 3e-3, "mlp": 2e-3}, serial) == ("fetch", None)
    pipe = predicted(1000.0, bound="plan", resources={"host process": 3e-3, "train": 2e-3, "shared cores": 2.5e-3})
    assert measured_bound({"plan": 1e-3, "collect": 0.5e-3, "data": 1e-3, "train": 2e-3}, pipe) == (
        "plan",
        "host process",
    )
    assert measured_bound({"plan": 1e-3, "collect": 0.5e-3, "train": 2e-3}, pipe) == ("train", "train")
    rounds = {
        "gpu-only": rounds_of([1000.0], {"mlp": [6e-4], "embedding_backward": [3e-4]}),
        "scratchpipe": rounds_of([1000.0], {"plan": [1e-3], "collect": [5e-4], "train": [2e-3]}),
    }
    out = check("small", rounds, {"gpu-only": predicted(1000.0, {"mlp": 6e-4}, bound="mlp"), "scratchpipe": pipe})
    assert [(b.trainer, b.agree) for b in out.bound_rows] == [("gpu-only", True), ("scratchpipe", False)]
    assert out.bound_rows[1].to_dict()["measured_resource"] == "train"
    assert out.bound_rows[1].predicted_resource == "host process"


def test_the_hook_keeps_each_trainers_steps_by_round_in_run_bench_order():
    """run_bench starts every trainer (ScratchPipe first), asking the hook for each round in turn,
    then drains the rounds alternately: a name given twice is its occurrences in order."""
    names, parts = ["gpu-only", "scratchpipe", "gpu-only"], 2
    hook, taken = by_round(names, parts)
    started = {}
    for i in (1, 0, 2):  # the order run_bench starts them in
        started[i] = [hook(iter([f"{names[i]}{i}-r{k}"]), 1, names[i]) for k in range(parts)]
    for k in range(parts):  # drained alternately, the order reversed every other round
        for i in (0, 1, 2) if k % 2 == 0 else (2, 1, 0):
            assert list(started[i][k]) == [f"{names[i]}{i}-r{k}"]
    assert taken == [
        [["gpu-only0-r0"], ["gpu-only0-r1"]],
        [["scratchpipe1-r0"], ["scratchpipe1-r1"]],
        [["gpu-only2-r0"], ["gpu-only2-r1"]],
    ]


def test_rounds_of_whole_tables_pool_their_rounds():
    key = ("small", "lru")
    one = Validation(times={key: rounds_of([1.0, 2.0])}, predicted={key: predicted(1.0)})
    two = Validation(times={key: rounds_of([3.0])}, predicted={key: predicted(3.0)})
    three = Validation(times={key: rounds_of([4.0])}, predicted={key: predicted(2.0)})
    pooled = median_of_rounds([one, two, three])
    assert [t.samples_per_s for t in pooled.times[key]] == [1.0, 2.0, 3.0, 4.0]
    assert pooled.predicted[key].samples_per_s == 2.0


def test_bench_validate_alternates_in_rounds_and_writes_the_checks(tmp_path, capsys):
    record = tmp_path / "v.json"
    code = main(
        [
            "bench",
            "--profile",
            "tiny",
            "--trainers",
            "gpu-only,lru,scratchpipe",
            "--steps",
            "6",
            "--warmup",
            "1",
            "--rounds",
            "3",
            "--validate",
            "--json",
            "--record",
            str(record),
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["rounds"] == 3
    assert {
        "rows",
        "verdict",
        "passed",
        "ratio_rows",
        "bound_rows",
        "stage_rows",
        "spread_verdict",
        "spread_passed",
    } <= set(out)
    assert [r["trainer"] for r in out["ratio_rows"]] == ["lru", "scratchpipe"]
    for r in out["ratio_rows"]:
        assert {
            "profile",
            "trainer",
            "measured_ratio",
            "predicted_ratio",
            "error",
            "spread",
            "bound",
            "bound_from",
            "within",
        } <= set(r)
        assert r["profile"] == "tiny" and r["measured_ratio"] > 0 and r["spread"] >= 0
        assert r["bound"] == pytest.approx(max(0.15, 2 * r["spread"]))
        assert r["within"] == (abs(r["error"]) <= r["bound"])
    assert [b["trainer"] for b in out["bound_rows"]] == ["gpu-only", "lru", "scratchpipe"]
    assert {(s["trainer"], s["stage"]) for s in out["stage_rows"]} >= {("lru", "fetch"), ("scratchpipe", "plan")}
    kept = json.loads(record.read_text())
    assert {"command", "commit", "date", "machine", "figures"} <= set(kept)
    figures = kept["figures"]
    assert figures["profiles"] == "tiny" and figures["spread_verdict"] == out["spread_verdict"]
    assert "the 1-minute load average" in figures["load"]
    assert [(k, v["measured"]) for k, v in figures["ratios"].items()] == [
        (f"tiny {r['trainer']} / gpu-only", round(r["measured_ratio"], 3)) for r in out["ratio_rows"]
    ]
    assert list(figures["bounds"]) == ["tiny gpu-only", "tiny lru", "tiny scratchpipe"]
    assert all(v["within"] is not None for v in figures["stages"].values())  # the bounded stages
    code = main(
        [
            "bench",
            "--profile",
            "tiny",
            "--trainers",
            "gpu-only,lru",
            "--steps",
            "4",
            "--warmup",
            "1",
            "--rounds",
            "2",
            "--validate",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0 and "samples/s ratios, medians of the rounds:" in text
    assert "the stage that bounds each step:" in text and "against the run's own spread" in text.splitlines()[-1]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--profile", "tiny", "--validate", "--rounds", "0"], "--rounds must be >= 1, got 0"),
        (["--profile", "tiny", "--rounds", "3"], "--rounds applies to --validate runs"),
        (["--profile", "tiny", "--record", "x.json"], "--record applies to --validate runs"),
        (["--profile", "tiny,nope", "--validate"], "unknown profile 'nope'"),
        (["--profile", "tiny,small"], "--profile all needs --validate (so does a list of profiles)"),
    ],
)
def test_bad_rounds_input_is_one_line(argv, message, capsys):
    code = main(["bench", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
