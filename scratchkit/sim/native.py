"""The simulators' compiled inner loops: `lru_engine.c` and `belady.c`, built with g++, via ctypes.

Why a C loop, and why g++. The whole LRU curve of a 10M-access trace has to come out faster than
libCacheSim's C loop simulates *one* capacity (1.8-3.5 s here, depending on the load). NumPy's best,
the vectorised wavelet pass of `stackdist.py`, does 24 bit levels of ~12 array passes and takes
4-8 s; a Python loop over a Fenwick tree takes about 3 us per access, half a minute. The C loop
takes about 0.1 us per access (10M in 1.0-1.1 s, `benchmarks/bench_sim.py --curves`), half of it
thanks to prefetching the hash entry of the access 16 ahead. Two compilers were on the table:
- numba (PyPI, 0.68.1): a new dependency of ~50 MB (llvmlite) whose numpy pins lag numpy's
  releases. Measured side by side (5 alternating rounds on a loaded machine, the same algorithm
  minus the prefetch, which numba does not expose): 5.5 s against the C loop's 3.2 s, plus a
  6.9 s JIT compile on the first call of every process (unless its cache is writable); and
  mixing uint64 with int64 silently made float64 indices, which had to be cast by hand;
- g++: already on every machine that runs the kit's tests (the `.cu` kernels are built with it for
  the host, `kernels/host_build.py`), no new dependency, and a build cached on disk.
We chose g++. The library is compiled on first use (never at import), into the kit's cache folder
beside the host kernels (`$SCRATCHKIT_CACHE_DIR/sim`, else `~/.cache/scratchkit/sim`), under a
name that hashes sources, flags and compiler, so an edit rebuilds and anything else loads at once
(the build takes under a second here). Where no compiler is found, `available()` is False and callers use the
NumPy twins (`stackdist.py`, `mrc._opt_hits`, `stack_twin.py`); SCRATCHKIT_SIM_NATIVE=0 forces
that, for tests of the fallback.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from scratchkit.kernels.host_build import default_cache_dir, find_compiler

HERE = Path(__file__).resolve().parent
SOURCES = ("lru_engine.c", "belady.c")
FLAGS = ("-x", "c++", "-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=default")

_I64P = ctypes.POINTER(ctypes.c_int64)
_F64P = ctypes.POINTER(ctypes.c_double)
_SIGNATURES = {   # name: (restype, argtypes)
    "sk_lru_new": (ctypes.c_void_p, [ctypes.c_uint64, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]),
    "sk_lru_free": (None, [ctypes.c_void_p]),
    "sk_lru_feed": (None, [ctypes.c_void_p, _I64P, ctypes.c_int64]),
    "sk_lru_stats": (None, [ctypes.c_void_p, _I64P, _F64P]),
    "sk_lru_hist": (None, [ctypes.c_void_p, _I64P]),
    "sk_lru_bins": (None, [ctypes.c_void_p, _F64P]),
    "sk_belady_hits": (ctypes.c_int64, [_I64P, ctypes.c_int64, ctypes.c_int64]),
}


class NativeBuildError(RuntimeError):
    """No C++ compiler, or the sources did not compile (the message holds the compiler's output)."""


def cache_dir() -> Path:
    return default_cache_dir().parent / "sim"


def library_path(compiler: str) -> Path:
    digest = hashlib.sha256()
    parts = [(HERE / s).read_bytes() for s in SOURCES] + [" ".join(FLAGS).encode(), compiler.encode()]
    for part in parts:
        digest.update(part)
        digest.update(b"\0")
    return cache_dir() / f"sim-{digest.hexdigest()[:16]}.so"


def build() -> Path:
    """Compile the sources unless the cache has them; return the library's path."""
    compiler = find_compiler()
    if compiler is None:
        raise NativeBuildError("no C++ compiler found (looked for $CXX, else g++)")
    lib = library_path(compiler)
    if lib.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent, prefix="build-") as tmp:
        out = Path(tmp) / lib.name
        cmd = [compiler, *FLAGS, "-o", str(out), *(str(HERE / s) for s in SOURCES)]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise NativeBuildError(f"building the simulators' C loops failed:\n{done.stdout}")
        os.replace(out, lib)          # atomic: a concurrent build never sees half a library
    return lib


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """The loaded library (built on the first call); raises NativeBuildError."""
    lib = ctypes.CDLL(str(build()))
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    return lib


def available() -> bool:
    """True when the C loops can run here (a compiler, or a cached build); never raises. A failed
    build is not retried in this process (each try would run the compiler again)."""
    if os.environ.get("SCRATCHKIT_SIM_NATIVE", "1") == "0":
        return False
    return _builds()


@lru_cache(maxsize=1)
def _builds() -> bool:
    try:
        library()
    except (NativeBuildError, OSError):
        return False
    return True


def i64_pointer(array: np.ndarray):
    """A pointer to a C-contiguous int64 array (checked: a wrong dtype would be read as garbage)."""
    if array.dtype != np.int64 or not array.flags.c_contiguous:
        raise ValueError(f"expected a C-contiguous int64 array, got {array.dtype}")
    return array.ctypes.data_as(_I64P)


def f64_pointer(array: np.ndarray):
    if array.dtype != np.float64 or not array.flags.c_contiguous:
        raise ValueError(f"expected a C-contiguous float64 array, got {array.dtype}")
    return array.ctypes.data_as(_F64P)


def belady_hits(keys: np.ndarray, capacity: int) -> int:
    """OPT hits at `capacity`, from `keys` as `mrc.opt_mrc` builds them (each < 2n). [n] int64"""
    hits = library().sk_belady_hits(i64_pointer(keys), keys.size, capacity)
    if hits < 0:
        raise MemoryError(f"OPT at capacity {capacity} on {keys.size:,} accesses ran out of memory")
    return int(hits)
