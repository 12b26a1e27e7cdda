"""Run the `.cu` kernels on the CPU: compile them with the system C++ compiler, call them via ctypes.

For each `.cu` file we write a tiny C++ translation unit:

    #include ".../cuda_compat.h"     // CUDA keywords, thread indices, serial launcher, atomics
    #include ".../hashmap.cu"        // the kernel source, unchanged
    SK_HOST_EXPORT(hashmap_query)    // one line per kernel: exports its launcher
    ...

and compile it with `g++ -O2 -shared -fPIC` into a cache folder, never into the package:
`$SCRATCHKIT_CACHE_DIR/kernels`, else `$XDG_CACHE_HOME/scratchkit/kernels`, else
`~/.cache/scratchkit/kernels`. The library's file name carries a hash of everything that goes into
it (header, source, flags, compiler), so an edited kernel is rebuilt and an unchanged one is loaded
straight away. Because the source is included by its path, compiler errors name the `.cu` file and
line.

`-ffp-contract=off` keeps g++ from fusing a*b+c into one instruction on CPUs that have FMA: the
kernels write `fmaf` where they mean a fused multiply-add, and nowhere else.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


from .signatures import COMPAT_HEADER, KERNEL_DIR, KERNELS, SOURCES, Arg, check_arrays, kernels_in

CXX_FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-ffp-contract=off")

# the ctypes type a launcher passes for each kind of kernel argument
CTYPES = {
    Arg.I64_ARRAY: ctypes.c_void_p,
    Arg.U64_ARRAY: ctypes.c_void_p,
    Arg.F32_ARRAY: ctypes.c_void_p,
    Arg.BOOL_ARRAY: ctypes.c_void_p,
    Arg.I64: ctypes.c_longlong,
    Arg.F32: ctypes.c_float,
}


class HostBuildError(RuntimeError):
    """No C++ compiler, or the kernels did not compile (the message holds the compiler's output)."""


def default_cache_dir() -> Path:
    """Where built kernel libraries go (created on first build)."""
    root = os.environ.get("SCRATCHKIT_CACHE_DIR")
    if root:
        return Path(root) / "kernels"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "scratchkit" / "kernels"


def find_compiler() -> str | None:
    """The C++ compiler to use: $CXX if set, else g++; None when it is not on PATH."""
    return shutil.which(os.environ.get("CXX", "g++"))


def translation_unit(source: str, kernel_dir: Path = KERNEL_DIR) -> str:
    """The C++ text that turns one `.cu` file into a host library."""
    exports = "".join(f"SK_HOST_EXPORT({k.name})\n" for k in kernels_in(source))
    return f'#include "{COMPAT_HEADER}"\n#include "{kernel_dir / source}"\n{exports}'


def library_path(source: str, cache_dir: Path, compiler: str, kernel_dir: Path = KERNEL_DIR) -> Path:
    """The cached library for `source`: its name hashes header, source, unit, flags, compiler."""
    digest = hashlib.sha256()
    for part in (
        COMPAT_HEADER.read_bytes(),
        (kernel_dir / source).read_bytes(),
        translation_unit(source, kernel_dir).encode(),
        " ".join(CXX_FLAGS).encode(),
        compiler.encode(),
    ):
        digest.update(part)
        digest.update(b"\0")
    return cache_dir / f"{Path(source).stem}-{digest.hexdigest()[:16]}.so"


def build(
    sources: tuple[str, ...] = SOURCES, cache_dir: Path | None = None, kernel_dir: Path = KERNEL_DIR
) -> dict[str, Path]:
    """Compile every source not yet in the cache (in parallel); return {source: library path}."""
    compiler = find_compiler()
    if compiler is None:
        raise HostBuildError(
            f"no C++ compiler found (looked for {os.environ.get('CXX', 'g++')!r}; "
            "set CXX): the kernels can only run as NumPy twins here"
        )
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    libraries = {s: library_path(s, cache_dir, compiler, kernel_dir) for s in sources}
    missing = {s: lib for s, lib in libraries.items() if not lib.exists()}
    if not missing:
        return libraries
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix="build-") as tmp:
        jobs = []
        for source, lib in missing.items():
            unit = Path(tmp) / f"{Path(source).stem}.cpp"
            unit.write_text(translation_unit(source, kernel_dir))
            out = Path(tmp) / lib.name
            cmd = [compiler, *CXX_FLAGS, "-o", str(out), str(unit)]
            jobs.append(
                (source, lib, out, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            )
        errors = []
        for source, lib, out, proc in jobs:
            log, _ = proc.communicate()
            if proc.returncode != 0:
                errors.append(f"--- {kernel_dir / source} ---\n{log}")
            else:
                os.replace(out, lib)  # atomic: a concurrent build never sees half a library
        if errors:
            raise HostBuildError("the host build of the kernels failed:\n" + "\n".join(errors))
    return libraries


class HostLauncher:
    """Launches kernels of the host build: `launch(name, grid, block, args)`, like `k<<<grid, block>>>`.

    Arrays are passed as raw pointers, after a check of their dtype and C-contiguity; the call
    runs every thread of the grid serially, in increasing global thread index.
    """

    def __init__(self, cache_dir: Path | None = None):
        self.libraries = build(cache_dir=cache_dir)
        self._handles = []  # keep the CDLLs alive as long as their functions
        self._functions = {}  # name -> (ctypes function, ((position, dtype) of each array arg))
        for source, path in self.libraries.items():
            lib = ctypes.CDLL(str(path))
            self._handles.append(lib)
            for kernel in kernels_in(source):
                getter = getattr(lib, f"sk_launcher_{kernel.name}")
                getter.restype, getter.argtypes = ctypes.c_void_p, []
                prototype = ctypes.CFUNCTYPE(None, ctypes.c_uint, ctypes.c_uint, *(CTYPES[a] for a in kernel.args))
                arrays = tuple((i, a.dtype) for i, a in enumerate(kernel.args) if a.is_array)
                self._functions[kernel.name] = (prototype(getter()), arrays)

    def launch(self, name: str, grid: int, block: int, args: tuple) -> None:
        # Called tens of times per batch by ScratchPipe's planner: checks and pointers in one pass.
        function, arrays = self._functions[name]
        values = list(args)
        for position, dtype in arrays:
            array = args[position]
            if array.dtype != dtype or not array.flags.c_contiguous:
                check_arrays(KERNELS[name], args)  # raises, naming the argument
            values[position] = array.ctypes.data
        function(grid, block, *values)
