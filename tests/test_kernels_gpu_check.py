"""scripts/gpu_check.sh on a machine without a GPU: it must say so clearly and stop."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scratchkit.backend import detect

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.sh"


def fake_nvidia_smi(tmp_path, exit_code):
    """A PATH entry whose nvidia-smi just exits with exit_code (a driver that sees no GPU, or one)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\necho 'GPU 0: Fake'\nexit {exit_code}\n")
    fake.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def run(tmp_path, **env):
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OUT": str(tmp_path / "report"), **env})


def test_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_no_gpu_stops_with_a_clear_message(tmp_path):
    proc = run(tmp_path, PATH=fake_nvidia_smi(tmp_path, exit_code=9))
    assert proc.returncode == 2
    assert "no NVIDIA GPU here" in proc.stdout
    assert "no NVIDIA GPU here" in (tmp_path / "report" / "report.md").read_text()
    assert not (tmp_path / "report" / "kernel_tests.log").exists()     # nothing else ran


@pytest.mark.skipif(detect().cupy_gpu, reason="CuPy works here")
def test_driver_without_working_cupy_stops_with_a_clear_message(tmp_path):
    proc = run(tmp_path, PATH=fake_nvidia_smi(tmp_path, exit_code=0))
    assert proc.returncode == 2
    assert "cannot run CuPy on the GPU" in proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils timeout")
def test_dry_run_writes_every_section(tmp_path):
    """The sections, timeouts and report plumbing, exercised without a GPU (GPU tests skip)."""
    proc = run(tmp_path, GPU_CHECK_DRY_RUN="1",
               GPU_CHECK_BENCH_ARGS="--quick --capacity 1024 --batch 256 --rounds 1")
    report = (tmp_path / "report" / "report.md").read_text()
    assert proc.returncode == 0, report
    for section in ("env", "kernel_tests", "kernel_bench", "trainer_tests", "trainer_bench"):
        assert f"## {section}\nstatus: passed" in report
    assert (tmp_path / "report" / "bench_kernels.json").exists()
