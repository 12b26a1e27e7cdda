"""Run a kernel given as CUDA source text on the CPU, and record which thread wrote what.

The kit's own kernels run on a CPU through the host build (host_build.py). A kernel a learner
types in a notebook (notebook 08's puzzles) goes the same way, with `traced_launch.h` in front of
`cuda_compat.h`: its launcher runs the threads one at a time and, after each, notes every element
of every array argument that changed. So a check can say which thread wrote a wrong element, and
find a race deterministically: an element that two threads changed, one of them without an
atomic (traced_launch.h says why that is a race, and what it cannot see).

Each array is laid out with guard zones before and after it (`guard` elements, filled with a
marker), so a write past either end is a write into a guard zone, named by the thread that made
it. The launch runs in a forked child process over shared memory: a kernel that crashes the
process (a wild pointer) or never ends (a probe loop without an exit) costs the child, not the
notebook's kernel, and the checker learns which thread was running (`progress`). Where there is
no fork (Windows) the launch runs in this process, without those two protections.
"""

from __future__ import annotations

import ctypes
import faulthandler
import hashlib
import mmap
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .host_build import CTYPES, CXX_FLAGS, HostBuildError, default_cache_dir, find_compiler
from .signatures import COMPAT_HEADER, KERNEL_DIR, Kernel, check_arrays

TRACED_HEADER = KERNEL_DIR / "traced_launch.h"
FLOAT_GUARD = np.array([0x7FC0BAD0], dtype=np.uint32).view(np.float32)[0]  # a NaN no kernel computes
INT_GUARD = -7_777_777


class KernelBuildError(HostBuildError):
    """The kernel's source did not compile; the message is the compiler's, naming its lines."""


@dataclass
class Watched:
    """One array after the launch: its contents, and per element (guard zones included) who wrote it."""

    name: str
    data: np.ndarray  # [n] the array's elements, guard zones left out
    writer: np.ndarray  # [guard + n + guard] the last thread that changed the element, -1 = none
    other: np.ndarray  # [guard + n + guard] an earlier, different thread that changed it, -1 = none
    plain: np.ndarray  # [guard + n + guard] a change not through an atomic
    guard: int


@dataclass
class TracedRun:
    """What happened: 'finished', 'crashed' (by `signal_name`) or 'timed out', in which thread."""

    status: str
    thread: int  # the thread running when the child died or was stopped (-1: none)
    arrays: dict[int, Watched]  # argument position -> its record
    signal_name: str = ""


def kernel_names(source: str) -> list[str]:
    """The names of the `__global__` functions a source defines, in order."""
    return re.findall(r"__global__\s+void\s+(\w+)\s*\(", source)


def library_for(source: str, name: str, cache_dir: Path | None = None) -> Path:
    """Build `source` for the CPU, traced (traced_launch.h), for kernel `name` (cached by a hash of
    headers, source, flags and compiler); KernelBuildError with the compiler's message.
    The library exports the kernel's launcher (sk_launcher_<name>) and sk_trace_setup."""
    compiler = find_compiler()
    if compiler is None:
        raise HostBuildError("no C++ compiler found (set CXX): a kernel puzzle needs g++ to run on the CPU")
    unit = (
        f'#include "{TRACED_HEADER}"\n#line 1 "{name}.cu"\n{source}\n'
        f'#line 1 "(the checker\'s export of {name})"\nSK_HOST_EXPORT({name})\n'
    )
    digest = hashlib.sha256(
        "\0".join((TRACED_HEADER.read_text(), COMPAT_HEADER.read_text(), unit, " ".join(CXX_FLAGS), compiler)).encode()
    ).hexdigest()[:16]
    cache_dir = (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / "traced"
    library = cache_dir / f"{name}-{digest}.so"
    if library.exists():
        return library
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix="build-") as tmp:
        unit_path, out = Path(tmp) / f"{name}-traced.cpp", Path(tmp) / library.name
        unit_path.write_text(unit)
        done = subprocess.run([compiler, *CXX_FLAGS, "-o", str(out), str(unit_path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise KernelBuildError(compiler_errors(done.stdout + done.stderr, name))
        os.replace(out, library)
    return library


def compiler_errors(log: str, name: str, most: int = 20) -> str:
    """The compiler's lines about the learner's source (`name.cu:LINE:COL: error: ...`) first."""
    lines = [line for line in log.splitlines() if line.strip()]
    own = [i for i, line in enumerate(lines) if line.startswith(f"{name}.cu:")]
    start = own[0] if own else 0
    return "\n".join(lines[start : start + most])


class _Watch(ctypes.Structure):
    """traced_launch.h's sk_trace::Watch, field for field."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("copy", ctypes.c_void_p),
        ("elements", ctypes.c_longlong),
        ("elem_bytes", ctypes.c_longlong),
        ("writer", ctypes.c_void_p),
        ("other", ctypes.c_void_p),
        ("plain", ctypes.c_void_p),
    ]


class _Shared:
    """Views into one anonymous shared mapping, handed out in order (64-byte aligned)."""

    def __init__(self, nbytes: int):
        self.map = mmap.mmap(-1, max(nbytes, 1))
        self.used = 0

    def take(self, dtype, count: int) -> np.ndarray:
        dtype = np.dtype(dtype)
        view = np.frombuffer(self.map, dtype=dtype, count=count, offset=self.used)
        self.used += -(-count * dtype.itemsize // 64) * 64
        return view


def run_traced(
    library: Path,
    kernel: Kernel,
    grid: int,
    block: int,
    args: list,
    names: list[str],
    outputs: set[int],
    guard: int = 64,
    timeout: float = 5.0,
) -> TracedRun:
    """Launch `kernel` from `library` on `args` (NumPy arrays and scalars, in the kernel's order),
    every array watched and fenced by `guard` elements each side. Array arguments are not changed:
    the kernel works on copies, returned in the result."""
    check_arrays(kernel, tuple(args))
    arrays = [i for i, kind in enumerate(kernel.args) if kind.is_array]
    sizes = [args[i].size + 2 * guard for i in arrays]
    widths = lambda i: (args[i].dtype.itemsize,) * 2 + (8, 8, 1)  # data, copy, writer, other, plain
    shared = _Shared(sum(-(-n * w // 64) * 64 for i, n in zip(arrays, sizes) for w in widths(i)) + 64)
    watches, views, values = (_Watch * max(len(arrays), 1))(), {}, []
    for w, (position, n) in enumerate(zip(arrays, sizes)):
        array = args[position]
        data, copy = shared.take(array.dtype, n), shared.take(array.dtype, n)
        data[:] = _guard_value(array.dtype, position in outputs)
        data[guard : guard + array.size] = array.reshape(-1)
        copy[:] = data
        writer, other, plain = shared.take(np.int64, n), shared.take(np.int64, n), shared.take(np.uint8, n)
        writer[:], other[:] = -1, -1
        watches[w] = _Watch(
            data.ctypes.data,
            copy.ctypes.data,
            n,
            array.dtype.itemsize,
            writer.ctypes.data,
            other.ctypes.data,
            plain.ctypes.data,
        )
        views[position] = (data, writer, other, plain)
    progress = shared.take(np.int64, 2)
    progress[:] = (-1, 0)
    for position, (arg, kind) in enumerate(zip(args, kernel.args)):
        values.append(
            views[position][0][guard:].ctypes.data
            if kind.is_array
            else float(arg)
            if np.issubdtype(kind.dtype, np.floating)
            else int(arg)
        )
    setup, launcher = _traced_function(library, kernel)

    def call():
        setup(ctypes.addressof(watches), len(arrays), progress.ctypes.data)
        launcher(grid, block, *values)

    status, signal_name = _launch(call, progress, timeout)
    result = {
        position: Watched(
            names[position],
            data[guard : guard + args[position].size].copy(),
            writer.copy(),
            other.copy(),
            plain.astype(bool),
            guard,
        )
        for position, (data, writer, other, plain) in views.items()
    }
    thread = int(progress[0]) if status != "finished" else -1
    return TracedRun(status, thread, result, signal_name)


class TracedLauncher:
    """`launch(name, grid, block, args)` like HostLauncher, for one kernel built from source text:
    each launch is a traced run whose results are copied back into the array arguments, as a
    launch on a device changes its arrays in place (tests/stand_ins.py's CuPy runs a puzzle so)."""

    def __init__(self, library: Path, kernel: Kernel, timeout: float = 5.0):
        self.library, self.kernel, self.timeout = library, kernel, timeout

    def launch(self, name: str, grid: int, block: int, args: tuple) -> None:
        if name != self.kernel.name:
            raise KeyError(f"this launcher runs {self.kernel.name}, not {name}")
        names = [f"argument {i}" for i in range(len(args))]
        run = run_traced(self.library, self.kernel, grid, block, list(args), names, set(), 64, self.timeout)
        if run.status != "finished":
            raise RuntimeError(f"{name} {run.status} {run.signal_name} in thread {run.thread}".strip())
        for position, watched in run.arrays.items():
            args[position].reshape(-1)[:] = watched.data


def _guard_value(dtype: np.dtype, output: bool):
    # float guards read as a NaN that no kernel computes; int guards of inputs read as 0 (a valid
    # index, so a thread reading past an input does not crash), of outputs as a marker
    if np.issubdtype(dtype, np.floating):
        return FLOAT_GUARD
    return INT_GUARD if output else 0


_FUNCTIONS: dict[tuple[str, str], tuple] = {}  # (library, kernel) -> (CDLL, setup, launcher): loaded once


def _traced_function(library: Path, kernel: Kernel):
    """(sk_trace_setup, the kernel's launcher) of a traced library, as ctypes functions."""
    key = (str(library), kernel.name)
    if key not in _FUNCTIONS:
        lib = ctypes.CDLL(str(library))
        setup = lib.sk_trace_setup
        setup.restype, setup.argtypes = None, [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p]
        getter = getattr(lib, f"sk_launcher_{kernel.name}")
        getter.restype, getter.argtypes = ctypes.c_void_p, []
        prototype = ctypes.CFUNCTYPE(None, ctypes.c_uint, ctypes.c_uint, *(CTYPES[a] for a in kernel.args))
        _FUNCTIONS[key] = (lib, setup, prototype(getter()))
    return _FUNCTIONS[key][1:]


def _launch(call, progress: np.ndarray, timeout: float) -> tuple[str, str]:
    """Run `call` in a forked child; ('finished' | 'crashed' | 'timed out', signal name)."""
    if not hasattr(os, "fork"):
        call()
        return "finished", ""
    pid = os.fork()
    if pid == 0:  # the child: launch, then leave at once
        faulthandler.disable()  # a crash is the checker's to report, quietly
        code = 0
        try:
            call()
        except BaseException:  # noqa: BLE001 - a child must never return
            code = 70
        os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timed out", ""
        time.sleep(0.002)
    if os.WIFSIGNALED(status):
        return "crashed", signal.Signals(os.WTERMSIG(status)).name
    if os.WEXITSTATUS(status) != 0 or progress[1] != 1:
        return "crashed", f"exit status {os.WEXITSTATUS(status)}"
    return "finished", ""
