"""What this machine can run: torch on CUDA, CuPy kernels, or neither.

This is the only module that decides availability, and the only one that imports CuPy (NVRTC's
bindings included). Everything else asks it, so `import scratchkit` never touches CuPy or a GPU:
CuPy is imported lazily, on the first call of `detect()`, `get_cupy()` or `get_nvrtc()`.
"""

from __future__ import annotations

import importlib
import platform
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Backend:
    """A snapshot of what is available. Frozen: detection runs once per process."""

    torch_version: str
    torch_cuda: bool  # torch can place tensors on a CUDA device
    cuda_device_name: str  # "" when there is no CUDA device
    cupy_version: str  # "" when CuPy is not installed
    cupy_available: bool  # CuPy imports
    cupy_gpu: bool  # CuPy imports AND a GPU is usable, so RawKernels can run

    @property
    def device(self) -> str:
        """The torch device the trainers call "device": CUDA when present, else the CPU."""
        return "cuda" if self.torch_cuda else "cpu"

    def describe(self) -> str:
        """One line for `scratchkit info` and the notebooks."""
        gpu = f"CUDA ({self.cuda_device_name})" if self.torch_cuda else "no CUDA device (device = CPU)"
        if self.cupy_gpu:
            kernels = f"CuPy {self.cupy_version} kernels run on the GPU"
        elif self.cupy_available:
            kernels = f"CuPy {self.cupy_version} installed but no GPU: kernels run as host builds / NumPy twins"
        else:
            kernels = "CuPy not installed: kernels run as host builds / NumPy twins"
        return (
            f"scratchkit {kit_version()} on Python {platform.python_version()}, torch "
            f"{self.torch_version}, {gpu}; {kernels}"
        )


def kit_version() -> str:
    """The installed kit's version (pyproject.toml), "unknown" in a never-installed checkout."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("scratchkit")
    except PackageNotFoundError:
        return "unknown"


def _probe_cupy() -> tuple[str, bool, bool]:
    try:
        cp = importlib.import_module("cupy")
    except Exception:  # ImportError, or a broken CUDA install raising on import
        return "", False, False
    try:
        usable = bool(cp.cuda.is_available())
    except Exception:
        usable = False
    return getattr(cp, "__version__", "?"), True, usable


@lru_cache(maxsize=1)
def detect() -> Backend:
    """Detect once per process (cached): torch CUDA and CuPy."""
    import torch

    torch_cuda = bool(torch.cuda.is_available())
    name = torch.cuda.get_device_name(0) if torch_cuda else ""
    cupy_version, cupy_available, cupy_gpu = _probe_cupy()
    return Backend(torch.__version__, torch_cuda, name, cupy_version, cupy_available, cupy_gpu)


def get_cupy():
    """Return the cupy module when CuPy kernels can run here; otherwise explain why not."""
    backend = detect()
    if not backend.cupy_available:
        raise RuntimeError(
            "CuPy is not installed: install the GPU extra (pip install -e '.[gpu]') "
            "on a machine with an NVIDIA GPU, or use the NumPy twins."
        )
    if not backend.cupy_gpu:
        raise RuntimeError(
            "CuPy is installed but no GPU is usable here: use the NumPy twins or the host build of the kernels."
        )
    return importlib.import_module("cupy")


class NvrtcUnavailable(RuntimeError):
    """CuPy's NVRTC bindings cannot compile here: CuPy is missing, or libnvrtc is not found."""


def get_nvrtc():
    """CuPy's NVRTC bindings (`cupy.cuda.nvrtc`), loaded with libnvrtc: enough to compile the `.cu`
    files to PTX and cubins. Needs CuPy and NVRTC, not a GPU: CI compiles every kernel this way.

    libnvrtc comes from a CUDA toolkit or from the `nvidia-cuda-nvrtc-cu12` wheel (CuPy 14 finds
    the wheel's copy itself); `getVersion()` loads it now, so a missing one is reported here and
    not in the middle of a compile.
    """
    try:
        nvrtc = importlib.import_module("cupy.cuda").nvrtc  # an attribute: a cupy_backends module
    except ImportError as err:
        raise NvrtcUnavailable(
            f"CuPy is not installed ({err}): install the kernels-ci extra "
            "(pip install -e '.[kernels-ci]') to compile the kernels"
        ) from err
    try:
        nvrtc.getVersion()
    except Exception as err:  # CuPy raises its own errors (or OSError) when libnvrtc is missing
        raise NvrtcUnavailable(
            f"CuPy is installed but libnvrtc cannot be loaded "
            f"({type(err).__name__}: {err}): install nvidia-cuda-nvrtc-cu12 "
            "(the kernels-ci extra) or a CUDA toolkit"
        ) from err
    return nvrtc


# The oldest architecture each NVRTC major release still compiles for, for bindings that cannot
# say (no `getSupportedArchs`): CUDA 12 dropped Kepler (sm_35/37), CUDA 13 Maxwell, Pascal and
# Volta (below sm_75).
OLDEST_ARCH_OF_NVRTC = {11: 35, 12: 50, 13: 75}


def nvrtc_architectures(nvrtc=None) -> tuple[tuple[int, ...] | None, str]:
    """(the architectures this NVRTC compiles for, how that was found).

    NVRTC's own list (nvrtcGetSupportedArchs, CuPy's `getSupportedArchs`) where the bindings have
    it. Otherwise the list is None, and the second item says which oldest architecture NVRTC's
    major version implies (OLDEST_ARCH_OF_NVRTC): `supports_architecture` then decides by it.
    """
    nvrtc = nvrtc if nvrtc is not None else get_nvrtc()
    version = ".".join(map(str, nvrtc.getVersion()))
    ask = getattr(nvrtc, "getSupportedArchs", None)
    if ask is not None:
        return tuple(int(a) for a in ask()), f"NVRTC {version}'s getSupportedArchs"
    major = nvrtc.getVersion()[0]
    oldest = OLDEST_ARCH_OF_NVRTC.get(major, max(OLDEST_ARCH_OF_NVRTC.values()))
    return None, f"NVRTC {version} (its bindings lack getSupportedArchs: assumed sm_{oldest} and newer)"


def supports_architecture(nvrtc, architecture: int) -> bool:
    """Whether this NVRTC compiles for sm_`architecture` (see nvrtc_architectures)."""
    known, _ = nvrtc_architectures(nvrtc)
    if known is not None:
        return architecture in known
    major = nvrtc.getVersion()[0]
    return architecture >= OLDEST_ARCH_OF_NVRTC.get(major, max(OLDEST_ARCH_OF_NVRTC.values()))
