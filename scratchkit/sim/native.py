"""The simulators' compiled inner loops: `lru_engine.cpp` and `belady.cpp`, built with g++, via ctypes.

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
We chose g++, built and loaded as every compiled loop of the kit is (scratchkit/native.py: on
first use, cached; the build takes under a second here). Where no compiler is found,
`available()` is False and callers use the NumPy twins (`stackdist.py`, `mrc._opt_hits`,
`stack_twin.py`); SCRATCHKIT_SIM_NATIVE=0 forces that, for tests of the fallback.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from scratchkit.native import F64P, I64P, CLibrary, NativeBuildError, f64, i64

_SIGNATURES = {  # name: (restype, argtypes)
    "sk_lru_new": (ctypes.c_void_p, [ctypes.c_uint64, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]),
    "sk_lru_free": (None, [ctypes.c_void_p]),
    "sk_lru_feed": (None, [ctypes.c_void_p, I64P, ctypes.c_int64]),
    "sk_lru_stats": (None, [ctypes.c_void_p, I64P, F64P]),
    "sk_lru_hist": (None, [ctypes.c_void_p, I64P]),
    "sk_lru_bins": (None, [ctypes.c_void_p, F64P]),
    "sk_belady_hits": (ctypes.c_int64, [I64P, ctypes.c_int64, ctypes.c_int64]),
}
LOOPS = CLibrary(
    "sim",
    Path(__file__).resolve().parent,
    ("lru_engine.cpp", "belady.cpp"),
    _SIGNATURES,
    switch="SCRATCHKIT_SIM_NATIVE",
)
i64_pointer, f64_pointer = i64, f64
__all__ = ["NativeBuildError", "available", "belady_hits", "f64_pointer", "i64_pointer", "library"]


def library() -> ctypes.CDLL:
    """The loaded library (built on the first call); raises NativeBuildError."""
    return LOOPS.library


def available() -> bool:
    """True when the C loops can run here (a compiler, or a cached build); never raises."""
    return LOOPS.available()


def belady_hits(keys: np.ndarray, capacity: int) -> int:
    """OPT hits at `capacity`, from `keys` as `mrc.opt_mrc` builds them (each < 2n). [n] int64"""
    hits = library().sk_belady_hits(i64(keys), keys.size, capacity)
    if hits < 0:
        raise MemoryError(f"OPT at capacity {capacity} on {keys.size:,} accesses ran out of memory")
    return int(hits)
