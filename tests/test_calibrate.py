"""`scratchkit calibrate`: what it measures, the JSON it saves and reads back, `this-cpu` using the
saved profile (and saying so), a corrupt file refused in one line naming it, and the GPU path run
through the CUDA stand-in (tests/stand_ins.py). No timing bound: the figures are only checked to
be there, positive and ordered where physics orders them."""

import json
import math

import pytest

from scratchkit.commands.cli import main
from scratchkit.device import Device
from scratchkit.calibration import co_run
from scratchkit.projection import machines
from scratchkit.calibration.calibrate import calibrate
from scratchkit.costmodel.hardware import Hardware, load_hardware, save_hardware
from scratchkit.calibration.plan_timings import MAP_SLOTS
from stand_ins import StandInCuda


@pytest.fixture(scope="module")
def quick_profile() -> Hardware:
    return calibrate(quick=True)


@pytest.fixture
def saved_at(tmp_path, monkeypatch):
    """$SCRATCHKIT_HARDWARE pointed at a file in tmp_path, and this-cpu forgotten."""
    path = tmp_path / "profile.json"
    monkeypatch.setenv(machines.ENV_PATH, str(path))
    machines.forget_this_cpu()
    yield path
    machines.forget_this_cpu()


def test_a_quick_calibration_measures_every_constant(quick_profile):
    p = quick_profile
    assert p.name == "this-cpu" and p.device_is_host and p.pcie_bw == math.inf
    assert p.host_stream_bw > 1e8 and p.device_flops.at(1e7) > 1e8
    # a table far beyond the caches gathers slower than one inside them; a sort of more keys
    # takes longer; the calls' fixed costs are positive and a backward costs more than a lookup
    small, big = p.host_gather.seconds_per_row(64, 2**18, 8192), p.host_gather.seconds_per_row(64, 2**26, 8192)
    assert 0 < small < big
    assert p.host_sort.at(32768) > 0 and p.host_numpy_sort.at(2048) > 0
    assert all(v >= 0 for v in p.host_calls.values()) and p.host_calls["backward"] > p.host_calls["lookup"]
    assert p.host_plan_lookup_rate.at(2**16) > 0 and p.host_plan_id_rate.at(2**16) > 0
    assert "calibrated (quick)" in p.origin and all(p.sources.get(k) for k in ("host_gather", "host_plan_id_rate"))
    # the table-batched C++ calls the trainers make on a CPU, timed themselves
    assert p.batched_host and all(
        p.host_calls[f"tbe_{k}"] + p.host_calls[f"tbe_{k}_table"] > 0 for k in ("forward", "backward", "sgd")
    )
    # (at 16k lookups a call, where the rows' time is ~10x the call's fixed cost taken out; at 1k
    # the two tables differed by only 1.08-1.17x in a third of quick calibrations on a busy VM)
    assert 0 < p.host_tbe_lookup.seconds_per_row(64, 2**18, 16384) < p.host_tbe_lookup.seconds_per_row(64, 2**26, 16384)
    assert (
        p.host_tbe_backward.seconds_per_row(64, 1.0, 128) > 0 and p.host_tbe_update.seconds_per_row(64, 2**22, 0.5) > 0
    )
    assert all(p.sources.get(k) for k in ("host_tbe_lookup", "host_tbe_backward", "host_tbe_update"))
    # the fused path (gpu-only's step on a CPU) timed on the backward's grid, so priced on its axes
    # (rows and lookups the same; the lookups per distinct id drawn alike, from their own ids)
    grid = lambda curve: [(row, round(repeats, 1), n) for row, repeats, n, _ in curve.points]
    assert grid(p.host_tbe_sort) == grid(p.host_tbe_fused) == grid(p.host_tbe_backward)
    assert all(point[-1] > 0 for point in p.host_tbe_sort.points + p.host_tbe_fused.points)
    assert all(p.sources.get(k) for k in ("host_tbe_sort", "host_tbe_fused"))
    # scratchpipe-device as this CPU runs it: the map's probes at each size timed, a kernel of the
    # host build (dearer than a NumPy call: ctypes and the arrays' checks), Plan per table. The
    # probes are not ordered by size: a quick calibration's largest map (2**18 slots, 8 MiB) still
    # fits a last-level cache, and CI's machine once timed it faster than the small one (44.3
    # against 43.2 M probes/s, 2026-12-03) where this one times it 2-3x slower.
    probes = p.device_map_probe_rate
    assert [s for s, _ in probes.points] == list(MAP_SLOTS[0])  # (a RateCurve's rates are > 0)
    assert p.sources.get("device_map_probe_rate")
    assert p.host_calls["kernel"] > p.host_calls["numpy"] and p.device_calls["kernel"] == p.host_calls["kernel"]
    assert p.host_calls["device_plan_table"] > 0


def test_the_json_round_trips(quick_profile, tmp_path):
    path = save_hardware(quick_profile, tmp_path / "p.json")
    assert load_hardware(path) == quick_profile
    data = json.loads(path.read_text())
    assert data["pcie_bw"] == "inf" and isinstance(data["host_gather"], list)


def test_this_cpu_uses_the_saved_profile_and_says_so(quick_profile, saved_at):
    marked = Hardware.from_json(quick_profile.to_json() | {"host_stream_bw": 1.25e9})
    machines.save_calibration(marked)
    assert saved_at.exists()
    machine = machines.get_machine("this-cpu")
    assert machine.host_stream_bw == 1.25e9 and f"saved calibration {saved_at}" in machine.origin


def test_a_profile_saved_by_an_earlier_kit_is_measured_afresh_with_a_warning(quick_profile, saved_at):
    """A profile saved before the planner's per-batch and victim costs were priced lacks them:
    `this-cpu` says so and measures this machine (quickly) rather than refuse to project."""
    old = quick_profile.to_json()
    old["host_calls"] = {k: v for k, v in old["host_calls"].items() if k not in ("plan_batch", "plan_victims")}
    saved_at.write_text(json.dumps(old))
    with pytest.warns(UserWarning, match="earlier scratchkit.*measuring this machine now"):
        machine = machines.get_machine("this-cpu")
    assert "measured now" in machine.origin and "plan_victims" in machine.host_calls


def test_a_profile_whose_update_is_by_rows_of_the_call_is_measured_afresh(quick_profile, saved_at):
    """Before 2026-12-02 the update curve's last axis was the call's rows (16 and up); read as a
    density (at most 1) it would price every update as the densest: the profile is outdated."""
    old = quick_profile.to_json()
    old["host_tbe_update"] = [p[:2] + [2048.0] + p[3:] for p in old["host_tbe_update"]]
    saved_at.write_text(json.dumps(old))
    with pytest.warns(UserWarning, match="earlier scratchkit.*share of the table"):
        machine = machines.get_machine("this-cpu")
    assert "measured now" in machine.origin and all(p[2] <= 1 for p in machine.host_tbe_update.points)


def test_a_profile_measured_with_other_builds_of_the_loops_is_measured_afresh(quick_profile, saved_at):
    """The loops' speed is what a profile holds: the table-batched forward became ~2x faster on
    2026-12-02 (its sums in registers), and a profile measured before priced the old one. Each
    calibration records the builds it measured; `this-cpu` measures afresh where one has changed
    since, and names it."""
    assert set(quick_profile.native_builds) == {"tbe", "plan"}
    other = quick_profile.native_builds | {"tbe": "tbe-0123456789abcdef"}
    saved_at.write_text(json.dumps(quick_profile.to_json() | {"native_builds": other}))
    with pytest.warns(UserWarning, match=r"other builds of the kit's C\+\+ loops \(tbe\)"):
        machine = machines.get_machine("this-cpu")
    assert "measured now" in machine.origin and machine.native_builds == quick_profile.native_builds


def test_a_profile_saved_before_the_co_run_cores_were_measured_is_measured_afresh(quick_profile, saved_at):
    """Without the figure saved hardware would price ScratchPipe's two sides as if each had a
    core, and hardware with the earlier slowdown factors prices them by those: `this-cpu` measures
    afresh, and the quick calibration measures the cores (1 to the machine's, sourced)."""
    assert 1 <= quick_profile.co_run_cores <= quick_profile.host_cores
    assert "alone against" in quick_profile.sources["co_run_cores"]
    old = quick_profile.to_json()
    del old["co_run_cores"]
    saved_at.write_text(json.dumps(old))
    with pytest.warns(UserWarning, match="before the kit measured the cores ScratchPipe's two sides get"):
        machine = machines.get_machine("this-cpu")
    assert "measured now" in machine.origin and machine.co_run_cores >= 1
    saved_at.write_text(json.dumps(old | {"host_co_run": 1.5, "train_co_run": 1.2}))
    with pytest.warns(UserWarning, match="slowdown factors"):
        machine = machines.get_machine("this-cpu")
    assert "measured now" in machine.origin


def test_the_co_run_cores_are_the_median_of_alone_over_two_at_once():
    """co_run.cores_at_once against runs whose seconds are known: each round runs one alone first,
    the figure is the median of the rounds' 2 x alone / at once, and noise beyond 1..cores is cut."""
    seconds = iter(
        [
            1.0,
            1.0,  # round 1: a core each, 2
            1.0,
            2.0,  # round 2: turns, 1
            1.0,
            1.25,
        ]
    )  # round 3: 1.6
    calls = []

    def run(processes):
        calls.append(processes)
        return next(seconds)

    assert co_run.cores_at_once(run, 3, cores=2) == pytest.approx(1.6)
    assert calls == [1, 2] * 3
    assert co_run.cores_at_once(lambda n: {1: 1.0, 2: 4.0}[n], 1, cores=2) == 1.0  # under 1: noise
    assert co_run.cores_at_once(lambda n: {1: 1.0, 2: 0.5}[n], 1, cores=2) == 2.0  # over the cores
    assert co_run.busy(1000) > 0


@pytest.mark.parametrize(
    "content, what",
    [
        ("{not json", "Expecting property name"),
        ('{"name": "x"}', "fields missing"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_a_corrupt_calibration_file_is_one_line_naming_it(saved_at, content, what):
    saved_at.write_text(content)
    with pytest.raises(ValueError, match=what) as err:
        machines.get_machine("this-cpu")
    assert str(saved_at) in str(err.value) and "\n" not in str(err.value)


def test_the_cli_names_a_corrupt_file_and_exits_2(saved_at, capsys):
    saved_at.write_text("{")
    code = main(["bench", "--profile", "tiny", "--trainers", "gpu-only", "--quick", "--project", "this-cpu"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("scratchkit bench: error: hardware") and str(saved_at) in err


def test_calibrate_command_saves_and_prints_json(quick_profile, tmp_path, capsys, monkeypatch):
    out = tmp_path / "cal" / "mine.json"

    def measured(quick, progress, device):  # the command's own work, not the measuring again
        progress("a step")
        return Hardware.from_json(quick_profile.to_json() | {"host_stream_bw": 2e9})

    monkeypatch.setattr("scratchkit.calibration.calibrate.calibrate", measured)
    code = main(["calibrate", "--quick", "--json", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["name"] == "this-cpu"
    assert load_hardware(out).host_stream_bw == 2e9
    assert "calibrate [" in captured.err and f"saved {out}" in captured.err  # progress on stderr
    code = main(["calibrate", "--out", str(tmp_path)])
    assert code == 2 and "is a folder" in capsys.readouterr().err


def test_the_gpu_path_runs_through_the_stand_in():
    """The device measurements run on a Device whose CUDA runtime is the stand-in: the same lines
    a GPU runs (pinned memory, non-blocking copies, synchronisation), the device being the CPU."""
    runtime = StandInCuda()
    steps = []
    p = calibrate(quick=True, device=Device("cpu", runtime), progress=steps.append)
    assert not p.device_is_host and p.pcie_bw > 0 and p.pcie_latency > 0
    # a GPU's Train is tbe.cu's kernels and torch ops (designs/kit.py's device_*): their fixed costs
    # are what it prices (the per-table ops' "backward" is no longer what a GPU step runs: it may
    # measure 0 where the stand-in's step has no per-table backward left to time)
    assert p.device_gather.seconds_per_row(64, 2**22, 8192) > 0
    assert p.device_calls["kernel"] > 0 and p.device_calls["op"] > 0
    assert "StandInCuda" in p.description and "pinned" in p.sources["pcie_bw"]
    calls = [c for c, _ in runtime.calls_of()]
    assert "pin" in calls and "synchronize" in calls
    copies = [d for c, d in runtime.calls_of() if c == "to_device" and d["non_blocking"]]
    assert copies and all(d["pinned"] for d in copies)  # the link timed from pinned memory
    assert any("host <-> device" in s for s in steps)


@pytest.mark.parametrize("profile", ["this-cpu", "v100-pcie3", "a100-pcie4", "h100-pcie5", "h200"])
def test_the_summary_names_every_constant_of_every_profile(quick_profile, profile):
    """What `scratchkit calibrate` prints without --json (and what a learner reads of a GPU
    profile): a line for every constant, whatever its kind (a figure, a curve, a table of calls)."""
    from scratchkit.commands.tables import describe_hardware

    machine = quick_profile if profile == "this-cpu" else machines.get_machine(profile)
    text = describe_hardware(machine)
    named = {line.split()[0] for line in text.splitlines()[1:]}
    constants = {
        f
        for f in Hardware.__dataclass_fields__
        if f not in ("name", "description", "origin", "sources", "device_is_host")
    }
    assert constants <= named, sorted(constants - named)


def test_calibrate_command_prints_its_summary(quick_profile, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("scratchkit.calibration.calibrate.calibrate", lambda quick, progress, device: quick_profile)
    assert main(["calibrate", "--quick", "--out", str(tmp_path / "mine.json")]) == 0
    out = capsys.readouterr().out
    assert "device_activation_rate" in out and "saved to" in out


def test_the_dense_step_is_calibrated_at_every_profiles_shape():
    """The activation rate is fitted to the dense step timed at the profiles' own MLP shapes: a
    profile whose shape has no point is priced by its neighbour's rate, which held tiny's MLP
    -32..-40% under its measured time in every trainer (its step is nearly all fixed costs)."""
    from scratchkit.calibration.kit_timings import DENSE_SHAPES
    from scratchkit.profiles import PROFILES, get_profile

    shapes = {shape[:4] for shape in DENSE_SHAPES[1]}
    for name in PROFILES:
        config = get_profile(name)
        width, dim = config.model.bottom_mlp
        assert config.model.top_mlp == (width, 1) and dim == config.model.dim, name
        assert (config.data.batch_size, len(config.data.table_sizes), dim, width) in shapes, name
    assert {shape[:4] for shape in DENSE_SHAPES[0]} <= shapes  # quick: a few of them


def test_the_median_of_calibrations_takes_every_figure_point_and_call_apart():
    """hardware.median_hardware: validation prices a profile by the median of the calibrations
    taken between its trainers' turns."""
    from dataclasses import replace

    from scratchkit.costmodel.hardware import RateCurve, median_hardware

    base = machines.get_machine("h100-pcie5")
    made = [
        replace(
            base,
            host_stream_bw=bw,
            host_numpy_sort=RateCurve(((512, r), (2048, 2 * r))),
            host_calls=base.host_calls | {"op": op},
        )
        for bw, r, op in ((1e9, 3e8, 5e-6), (3e9, 1e8, 1e-6), (2e9, 2e8, 9e-6))
    ]
    median = median_hardware(made)
    assert median.host_stream_bw == 2e9 and median.host_calls["op"] == 5e-6
    assert median.host_numpy_sort.points == ((512, 2e8), (2048, 4e8))
    assert median.host_gather == base.host_gather and median.name == base.name
    with pytest.raises(ValueError, match="not measured at the same points"):
        median_hardware([made[0], replace(base, host_numpy_sort=RateCurve(((1024, 1e8),)))])
