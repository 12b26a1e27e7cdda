"""scripts/gpu_check.sh on a machine without a GPU: it must say so clearly and stop; its dry run
prints the plan and checks what it needs; a rehearsal runs every section on the CPU, as a bare GPU
machine would: no nbval, jupyter or libcachesim, and pytest loading no plugin by itself."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from scratchkit.commands.cli import build_parser
from scratchkit.backend import detect
from scratchkit.trainers import available_trainers

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.sh"
SECTIONS = [
    "wheels",
    "gpu_probe",
    "env",
    "warmup",
    "kernel_tests",
    "kernel_bench",
    "verify",
    "distributed",
    "calibrate",
    "bench_small",
    "bench_embedding",
    "validate",
    "summary",
]
# What a bare GPU machine lacks (its python3 has torch, CuPy and pytest): the rehearsal runs with
# each of these refusing to import, so no section may need one.
ABSENT = ("nbval", "jupyter", "jupyterlab", "jupyter_server", "libcachesim", "playwright", "plotly", "ipywidgets")
BLOCKER = f"""import sys

ABSENT = {ABSENT!r}


class Absent:
    \"\"\"Refuses the packages a bare GPU machine lacks, as a missing package would.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {{name!r}} (absent in this rehearsal)", name=name)
        return None


sys.meta_path.insert(0, Absent())
"""


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
    assert "cupy_cuda12x-14.2.0" in plans["wheels"] and "--no-index --no-deps" in plans["wheels"]
    assert "-o addopts=''" in plans["kernel_tests"]  # the ini's nbval options left out
    assert "--trainers all" in plans["verify"] and "tolerance 1e-4 on CUDA" in plans["verify"]
    assert "--trainers all" in plans["distributed"]
    assert "--world-size 1 --sharding row --device cuda" in plans["distributed"]  # a fake 1-GPU driver
    # the commands the sections run are the CLI's real commands and flags
    for section in ("verify", "distributed", "bench_small", "bench_embedding", "calibrate", "validate"):
        words = plans[section].split(" -> ")[0].split(":")[0].split(" (")[0].split()
        assert words[0] == "scratchkit", plans[section]
        build_parser().parse_args(words[1:])  # an unknown flag exits (SystemExit 2)
    assert "--steps 20" in plans["bench_embedding"] and "--scale" not in plans["bench_embedding"]  # GPU: full size
    for line in (
        "[OK  ] python:",
        "[OK  ] torch importable:",
        "[OK  ] test sections: pytest",
        "[OK  ] carried wheels in",
        "[NOTE] nvidia-smi: no GPU here",
        "[OK  ] budgets:",
    ):
        assert line in out
    assert re.search(r"compiled Python files: (torch's are here|none for torch here)", out)
    total = int(re.search(r"budgets: (\d+) s", out).group(1))
    assert total == sum(int(b[:-1]) for _, _, b, _ in steps if b != "-") and total < 480
    assert out.rstrip().endswith("dry run: every check passed")
    assert not (tmp_path / "report").exists()  # nothing written, nothing installed


def test_dry_run_notes_a_torch_without_compiled_files(tmp_path):
    """A site-packages that keeps no compiled files for torch (as on the first H200 host): every
    Python would compile torch again, so the check keeps them in OUT/pycache, and says so."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = 'a torch without .pyc'\n")
    proc = run(tmp_path, "--dry-run", PYTHONPATH=str(fake.parent), PYTHONDONTWRITEBYTECODE="1")
    assert "[NOTE] compiled Python files: none for torch here; the check keeps them in" in proc.stdout
    assert not (fake / "__pycache__").exists()


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
    """The sections, timeouts and report plumbing, exercised without a GPU (GPU tests skip), as on a
    bare GPU machine: pytest loads no plugin by itself, so the ini's nbval options would be
    refused, and the notebooks' and the cache simulators' packages cannot be imported."""
    wheel = carried_wheel(tmp_path / "wheels")
    absent = tmp_path / "absent"
    absent.mkdir()
    (absent / "sitecustomize.py").write_text(BLOCKER)
    proc = run(
        tmp_path,
        "--rehearse",
        timeout=900,
        GPU_CHECK_PROFILE="tiny",
        GPU_CHECK_WHEELS=str(tmp_path / "wheels"),
        GPU_CHECK_BENCH_ARGS="--quick --capacity 1024 --batch 256 --rounds 1",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        PYTHONPATH=str(absent),
    )
    report = (tmp_path / "report" / "report.md").read_text()
    assert proc.returncode == 0, report
    site = tmp_path / "report" / "site"
    assert f"  {wheel}" in report and (site / "nvidia" / "sk_carried_test" / "lib").is_dir()
    assert f"carried libraries: {site}/nvidia/sk_carried_test/lib" in report
    for section in SECTIONS[2:-1] + ["wheels"]:
        assert f"## {section}\nstatus: passed in" in report
    assert re.search(r"## warmup\nstatus: passed in \d+ s \(budget 240 s\)", report)  # 3 x 80 s on a CPU
    tests_log = (tmp_path / "report" / "kernel_tests.log").read_text()
    assert "NVRTC checks" in tests_log or "NVRTC not available" in tests_log
    summary = json.loads((tmp_path / "report" / "gpu_check.json").read_text())
    assert summary["mode"] == "rehearse" and len(summary["sections"]) == 11
    trainers = available_trainers()
    assert [w["part"].split(":")[0] for w in summary["warmup"]][-len(trainers) - 1 : -1] == trainers
    assert all(w["ok"] for w in summary["warmup"]) and "warm-up:" in report
    assert [v["trainer"] for v in summary["verify"]] == trainers
    assert all(v["passed"] and v["max_abs_diff"] == 0.0 for v in summary["verify"])  # CPU: exact
    assert [(v["trainer"], v["world_size"], v["backend"], v["max_abs_diff"]) for v in summary["distributed"]] == [
        (t, 2, "gloo", 0.0) for t in trainers
    ]  # 2 gloo ranks
    assert [r["trainer"] for r in summary["bench_small"]][:2] == ["gpu-only", "hybrid"]
    assert all(r["setup_s"] > 0 and r["warmup_s"] > 0 for r in summary["bench_small"])
    assert summary["calibrate"]["name"] == "this-cpu"  # validate prices with the profile calibrate saved
    assert summary["validate"]["hardware"].startswith("saved calibration")
    assert summary["validate"]["verdict"].startswith(("PASS", "FAIL"))
    assert {r["trainer"] for r in summary["validate"]["rows"]} >= {"gpu-only", "hybrid", "scratchpipe"}
    assert "expected before the run" in report and summary["kernel_bench"]["results"]


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils timeout")
def test_a_section_out_of_time_shows_where_its_python_was(tmp_path):
    """A section past its budget gets SIGABRT, as run_section sends it: Python's fault handler (the
    check sets PYTHONFAULTHANDLER) writes each thread's stack to the log before it dies."""
    stuck = tmp_path / "stuck.py"
    stuck.write_text("import time\n\n\ndef waits_forever():\n    time.sleep(60)\n\n\nwaits_forever()\n")
    proc = subprocess.run(
        ["timeout", "--signal=ABRT", "--kill-after=10", "2", "bash", "-c", f"ulimit -c 0; {sys.executable} {stuck}"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        timeout=30,
    )
    assert proc.returncode == 124
    assert "Fatal Python error: Aborted" in proc.stderr and "waits_forever" in proc.stderr
    assert "timeout --signal=ABRT" in SCRIPT.read_text() and "PYTHONFAULTHANDLER=1" in SCRIPT.read_text()
