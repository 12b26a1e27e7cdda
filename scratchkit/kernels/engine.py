"""Choose how the kernels run: NumPy twin, host build of the `.cu` source, or CuPy on a GPU."""

from __future__ import annotations

from contextlib import nullcontext
from enum import Enum
from functools import lru_cache

import numpy as np

from .host_build import HostBuildError, HostLauncher
from .launched import LaunchedEngine
from .twin import TwinEngine


class EngineKind(str, Enum):
    """Where the scratchpad's kernels execute. All three give the same results (see twin.py)."""

    AUTO = "auto"  # CUPY for a CUDA device; on the CPU, HOST when a C++ compiler works, else TWIN
    TWIN = "twin"  # the NumPy twins: clear, slow (the hash map is a Python loop)
    HOST = "host"  # the .cu source compiled with g++, run serially on the CPU through ctypes
    CUPY = "cupy"  # the .cu source compiled by NVRTC, run on the GPU


@lru_cache(maxsize=1)
def host_build_works() -> bool:
    """True when the host build compiles (or is cached) and loads here. Tried once per process."""
    try:
        make_engine(EngineKind.HOST)
    except HostBuildError:
        return False
    return True


def resolve(kind: EngineKind | str, device: str) -> EngineKind:
    """The concrete engine for `kind` and a torch device ("cpu" or "cuda[:n]")."""
    kind = EngineKind(kind)
    on_gpu = device.startswith("cuda")
    if kind is EngineKind.AUTO:
        if on_gpu:
            return EngineKind.CUPY
        return EngineKind.HOST if host_build_works() else EngineKind.TWIN
    if on_gpu != (kind is EngineKind.CUPY):
        raise ValueError(
            f"engine {kind.value!r} cannot serve device {device!r}: the CuPy engine "
            "keeps rows on a CUDA device, the twin and host engines on the CPU"
        )
    return kind


@lru_cache(maxsize=None)
def make_engine(kind: EngineKind | str, threads_per_block: int = 256):
    """The engine object for a concrete kind; built once per process (the host build is compiled
    or loaded from the cache on the first call, CuPy modules on their first launch)."""
    kind = EngineKind(kind)
    if kind is EngineKind.TWIN:
        return TwinEngine()
    if kind is EngineKind.HOST:
        return LaunchedEngine("host", HostLauncher(), np, threads_per_block)
    if kind is EngineKind.CUPY:
        from .cupy_loader import CupyLauncher

        launcher = CupyLauncher()
        return LaunchedEngine("cupy", launcher, launcher.cp, threads_per_block)
    raise ValueError(f"resolve {kind.value!r} to a concrete engine first (scratchkit.kernels.engine.resolve)")


class OwnStream:
    """A stream of its own for one thread's kernels: `with stream:` sends them there, `finish()`
    waits for them. On a GPU a non-blocking CuPy stream (no implicit wait on the default stream,
    so its kernels run beside Train's); on a CPU nothing (NumPy is done when it returns)."""

    def __init__(self, xp):
        self.xp = xp
        self.stream = None if xp is np else xp.cuda.Stream(non_blocking=True)

    def follow(self) -> None:
        """What is queued here from now on starts, on the device, after everything the calling
        thread has queued on its current stream so far: arrays that thread made may be read here.
        The host does not wait (an event recorded there, waited for here)."""
        if self.stream is not None:
            self.stream.wait_event(self.xp.cuda.get_current_stream().record())

    def __enter__(self):
        (self.stream or nullcontext()).__enter__()
        return self

    def __exit__(self, *exc):
        (self.stream or nullcontext()).__exit__(*exc)
        return False

    def finish(self) -> None:
        if self.stream is not None:
            self.stream.synchronize()


class SameStream:
    """OwnStream's interface for work that stays on the caller's stream (an on-demand step, every
    stage in order on the trainer's): `with` changes nothing, so what is queued follows, in order,
    what the caller queued before it, and what the caller queues next follows it; `finish()` waits
    for nothing, since whatever reads the results is queued after them on the same stream."""

    stream = None

    def follow(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def finish(self) -> None:
        pass
