"""scripts/gpu_check.sh on a machine without a GPU: it must say so clearly and stop; its dry run
prints the plan and checks what it needs; a rehearsal runs every section on the CPU."""

import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from scratchkit.backend import detect
from scratchkit.commands.cli import build_parser
from scratchkit.profiles import PROFILES

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.sh"
SECTIONS = [
    "wheels",
    "gpu_probe",
    "env",
    "kernel_tests",
    "kernel_bench",
    "verify",
    "distributed",
    "bench_small",
    "bench_embedding",
    "calibrate",
    "validate",
    "summary",
]


def later_features() -> dict[str, bool]:
    """The sections waiting on features a later version adds: is each one here yet?"""
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    bench_options = {o for a in commands["bench"]._actions for o in a.option_strings}
    return {
        "bench_embedding": "embedding-bound" in PROFILES,
        "calibrate": "calibrate" in commands,
        "validate": "--validate" in bench_options,
    }


def fake_nvidia_smi(tmp_path, exit_code):
    """A PATH entry whose nvidia-smi just exits with exit_code (a driver that sees no GPU, or one)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\necho 'GPU 0: Fake'\nexit {exit_code}\n")
    fake.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def run(tmp_path, *args, timeout=120, **env):
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OUT": str(tmp_path / "report"), **env},
    )


def test_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    subprocess.run(["bash", "-n", str(SCRIPT.with_name("gpu_check_plan.sh"))], check=True)


def test_dry_run_prints_the_plan_and_checks_what_it_needs(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "cupy_cuda12x-14.2.0-cp311-cp311-manylinux2014_x86_64.whl").write_bytes(b"")
    proc = run(tmp_path, "--dry-run", PATH=fake_nvidia_smi(tmp_path, exit_code=9), GPU_CHECK_WHEELS=str(wheels))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    steps = re.findall(r"^  (\d+)\. (\w+) +(\d+s|-) +(.*)$", out, re.M)
    assert [name for _, name, _, _ in steps] == SECTIONS
    assert [int(n) for n, _, _, _ in steps] == list(range(1, len(SECTIONS) + 1))
    plans = {name: plan for _, name, _, plan in steps}
    for section, here in later_features().items():
        assert plans[section].startswith("not available in this version") != here, plans[section]
    assert "cupy_cuda12x-14.2.0" in plans["wheels"] and "--no-index --no-deps" in plans["wheels"]
    assert "tolerance 1e-4 on CUDA" in plans["verify"]
    assert "--world-size 1 --sharding row --device cuda" in plans["distributed"]  # a fake 1-GPU driver
    # the commands the benches, calibrate and validate run are the CLI's real commands and flags
    for section in ("bench_small", "bench_embedding", "calibrate", "validate"):
        if later_features().get(section, True):
            words = plans[section].split(" -> ")[0].split()
            assert words[0] == "scratchkit", plans[section]
            build_parser().parse_args(words[1:])  # an unknown flag exits (SystemExit 2)
    assert "--steps 50" in plans["bench_embedding"] and "--scale" not in plans["bench_embedding"]  # GPU: full size
    for line in (
        "[OK  ] python:",
        "[OK  ] torch importable:",
        "[OK  ] carried wheels in",
        "[NOTE] nvidia-smi: no GPU here",
        "[OK  ] budgets:",
    ):
        assert line in out
    total = int(re.search(r"budgets: (\d+) s", out).group(1))
    assert total == sum(int(b[:-1]) for _, _, b, _ in steps if b != "-") and total < 480
    assert out.rstrip().endswith("dry run: every check passed")
    assert not (tmp_path / "report").exists()  # nothing written, nothing installed


def test_dry_run_fails_when_something_is_missing(tmp_path):
    proc = run(tmp_path, "--dry-run", PYTHON=str(tmp_path / "no-such-python"))
    assert proc.returncode == 1
    assert "[FAIL] python:" in proc.stdout and "check(s) FAILED" in proc.stdout


def test_unknown_option_is_refused(tmp_path):
    proc = run(tmp_path, "--fast")
    assert proc.returncode == 2 and "unknown option --fast" in proc.stdout


def test_no_gpu_stops_with_a_clear_message(tmp_path):
    proc = run(tmp_path, PATH=fake_nvidia_smi(tmp_path, exit_code=9))
    assert proc.returncode == 2
    assert "no NVIDIA GPU here" in proc.stdout
    assert "no NVIDIA GPU here" in (tmp_path / "report" / "report.md").read_text()
    assert not (tmp_path / "report" / "kernel_tests.log").exists()  # nothing else ran


@pytest.mark.skipif(detect().cupy_gpu, reason="CuPy works here")
def test_driver_without_working_cupy_stops_with_a_clear_message(tmp_path):
    proc = run(tmp_path, PATH=fake_nvidia_smi(tmp_path, exit_code=0))
    assert proc.returncode == 2
    assert "cannot run CuPy on the GPU" in proc.stdout


def carried_wheel(folder: Path) -> str:
    """A tiny wheel shaped like NVIDIA's library wheels (nvidia/<name>/lib/...), in `folder`."""
    folder.mkdir()
    name = "sk_carried_test-1.0-py3-none-any.whl"
    with zipfile.ZipFile(folder / name, "w") as wheel:
        wheel.writestr("nvidia/sk_carried_test/lib/libsk_carried_test.so", b"")
        info = "sk_carried_test-1.0.dist-info"
        wheel.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: sk-carried-test\nVersion: 1.0\n")
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", "")
    return name


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils timeout")
def test_rehearsal_runs_every_section_and_writes_one_json(tmp_path):
    """The sections, timeouts and report plumbing, exercised without a GPU (GPU tests skip)."""
    wheel = carried_wheel(tmp_path / "wheels")
    proc = run(
        tmp_path,
        "--rehearse",
        timeout=400,
        GPU_CHECK_PROFILE="tiny",
        GPU_CHECK_WHEELS=str(tmp_path / "wheels"),
        GPU_CHECK_BENCH_ARGS="--quick --capacity 1024 --batch 256 --rounds 1",
    )
    report = (tmp_path / "report" / "report.md").read_text()
    assert proc.returncode == 0, report
    site = tmp_path / "report" / "site"
    assert f"  {wheel}" in report and (site / "nvidia" / "sk_carried_test" / "lib").is_dir()
    assert f"carried libraries: {site}/nvidia/sk_carried_test/lib" in report
    later = later_features()
    for section in (
        "wheels",
        "env",
        "kernel_tests",
        "kernel_bench",
        "verify",
        "distributed",
        "bench_small",
        "bench_embedding",
        "calibrate",
        "validate",
    ):
        expected = "passed" if later.get(section, True) else "not available in this version"
        assert f"## {section}\nstatus: {expected} in" in report
    summary = json.loads((tmp_path / "report" / "gpu_check.json").read_text())
    assert summary["mode"] == "rehearse" and len(summary["sections"]) == 10
    assert {v["trainer"] for v in summary["verify"]} >= {"gpu-only", "hybrid", "scratchpipe"}
    assert all(v["passed"] and v["max_abs_diff"] == 0.0 for v in summary["verify"])  # CPU: exact
    assert [(v["world_size"], v["backend"], v["max_abs_diff"]) for v in summary["distributed"]] == [
        (2, "gloo", 0.0)
    ] * 3  # 2 gloo ranks
    assert [r["trainer"] for r in summary["bench_small"]][:2] == ["gpu-only", "hybrid"]
    if later["calibrate"] and later["validate"]:  # validate prices with the profile calibrate saved
        assert summary["calibrate"]["name"] == "this-cpu"
        assert summary["validate"]["hardware"].startswith("saved calibration")
        assert summary["validate"]["verdict"].startswith(("PASS", "FAIL"))
        assert {r["trainer"] for r in summary["validate"]["rows"]} >= {"gpu-only", "hybrid", "scratchpipe"}
    assert "expected before the run" in report and summary["kernel_bench"]["results"]
