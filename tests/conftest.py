"""Shared test fixtures: small configs and the Criteo Kaggle sample (skipped where it was not placed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def tiny_config():
    from scratchkit.profiles import get_profile

    return get_profile("tiny")


@pytest.fixture
def criteo_sample() -> Path:
    from scratchkit.data.samples import KAGGLE_SAMPLE, PLACE_IT

    if not KAGGLE_SAMPLE.exists():
        pytest.skip(f"no Criteo Kaggle sample: {PLACE_IT}")
    return KAGGLE_SAMPLE


def require_nvrtc():
    """CuPy's NVRTC bindings (no GPU needed). Where they are missing the test skips, except in CI
    (CI=true), which installs the kernels-ci extra: there a missing NVRTC fails, so the compile
    checks can never be skipped without anyone noticing."""
    from scratchkit.backend import NvrtcUnavailable, get_nvrtc

    try:
        return get_nvrtc()
    except NvrtcUnavailable as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the NVRTC checks, but: {err}")
        pytest.skip(f"NVRTC not available here: {err}")


@pytest.fixture
def nvrtc():
    return require_nvrtc()


def require_target(target: str):
    """NVRTC, where it compiles for `target`. An NVRTC that dropped the architecture (CUDA 13's has
    no sm_70) skips the check and says why; CI's (12.x, the kernels-ci extra) must build every
    target, so there a missing one fails, as a missing NVRTC does."""
    from scratchkit.kernels.cupy_loader import nvrtc_targets

    nvrtc = require_nvrtc()
    _, skipped = nvrtc_targets(nvrtc)
    if target in skipped:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must compile for every CI target, but: {skipped[target]}")
        pytest.skip(f"NVRTC cannot compile for {target} here: {skipped[target]}")
    return nvrtc


@pytest.fixture(params=["twin", "host", "cupy-stand-in", pytest.param("cupy", marks=pytest.mark.gpu)])
def engine(request):
    """A kernel engine: the NumPy twins, the .cu files built for the CPU, CuPy's launcher with a
    stand-in for the GPU (tests/stand_ins.py: real NVRTC compile and cubin, host execution), or
    CuPy on a GPU.

    32 threads per block, so small batches still span several blocks and a partial last block.
    (test_scratchpad.py overrides this fixture with the engine's name, which Scratchpad takes.)
    """
    from scratchkit.backend import detect
    from scratchkit.kernels import make_engine

    if request.param == "cupy" and not detect().cupy_gpu:
        pytest.skip("needs an NVIDIA GPU with CuPy")
    if request.param == "cupy-stand-in":
        return cupy_stand_in_engine(compute_capability=90)
    return make_engine(request.param, threads_per_block=32)


def cupy_stand_in_engine(compute_capability: int):
    """The CuPy engine's own code (LaunchedEngine + CupyLauncher) with tests/stand_ins.py's cupy."""
    import numpy as np

    from scratchkit.kernels import make_engine
    from scratchkit.kernels.cupy_loader import CupyLauncher
    from scratchkit.kernels.launched import LaunchedEngine
    from stand_ins import StandInCupy

    require_nvrtc()
    cp = StandInCupy(compute_capability, make_engine("host").launcher)
    return LaunchedEngine("cupy-stand-in", CupyLauncher(cp=cp), np, threads_per_block=32)


def pytest_terminal_summary(terminalreporter):
    """One line in every run's log: did the NVRTC compile checks and the CuPy stand-in run? And,
    when the browser test ran, its table of widget latencies (tests/test_browser.py)."""
    latency = getattr(terminalreporter.config, "widget_latency", None)
    if latency:
        terminalreporter.write_line("widget latency in JupyterLab, key press or click to the first changed frame:")
        for line in latency.splitlines():
            terminalreporter.write_line("  " + line)
    counts = {}
    for outcome in ("passed", "failed", "skipped", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if "test_kernels_nvrtc.py" in nodeid or "cupy-stand-in" in nodeid:
                counts[outcome] = counts.get(outcome, 0) + 1
    if not counts:
        return
    from scratchkit.backend import NvrtcUnavailable
    from scratchkit.kernels.cupy_loader import CI_TARGETS, nvrtc_targets
    from scratchkit.kernels.signatures import SOURCES

    try:
        targets, skipped = nvrtc_targets()
    except NvrtcUnavailable as err:
        targets, skipped = (), {t: str(err) for t in CI_TARGETS}
    summary = ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
    left_out = "".join(f"; {t} skipped ({why})" for t, why in skipped.items())
    terminalreporter.write_line(
        f"NVRTC checks (test_kernels_nvrtc.py and the cupy-stand-in engine): "
        f"{summary}; .cu files {', '.join(SOURCES)}; targets "
        f"{', '.join(targets) or 'none'}{left_out}"
    )
