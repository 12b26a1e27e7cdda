"""The kit's compiled inner loops: C++ sources built with g++ on first use and called through ctypes.

Where NumPy cannot reach the speed a lesson needs (the simulators' LRU curves, ScratchPipe's
planner), the loop is a small C++ file beside the module that calls it, with a NumPy twin that the
tests hold it against. g++ is on every machine that runs the kit's tests (the `.cu` kernels are
built with it for the host, scratchkit/kernels/host_build.py): no new dependency.

A library is compiled on first use (never at import), into the kit's cache folder
(`$SCRATCHKIT_CACHE_DIR`, else `~/.cache/scratchkit`), under a name that hashes its sources, flags
and compiler, so an edit rebuilds and anything else loads at once. Where no compiler is found,
`available()` is False and callers use the NumPy twins; `SCRATCHKIT_NATIVE=0` forces that (for
tests of the fallback).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from functools import cached_property
from pathlib import Path

import numpy as np

from scratchkit.kernels.host_build import default_cache_dir, find_compiler

FLAGS = ("-x", "c++", "-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=default")
I64P = ctypes.POINTER(ctypes.c_int64)
I32P = ctypes.POINTER(ctypes.c_int32)
U8P = ctypes.POINTER(ctypes.c_uint8)
F64P = ctypes.POINTER(ctypes.c_double)


class NativeBuildError(RuntimeError):
    """No C++ compiler, or the sources did not compile (the message holds the compiler's output)."""


class CLibrary:
    """C++ `sources` in `folder`, built as one library named `name`; `signatures` maps each
    function to (restype, argtypes). Name the headers the sources include among them too: they
    are not compiled, but an edit to one must rebuild the library."""

    def __init__(
        self, name: str, folder: Path, sources: tuple[str, ...], signatures: dict, switch: str = "SCRATCHKIT_NATIVE"
    ):
        self.name, self.folder, self.sources, self.signatures = name, folder, sources, signatures
        self.switch = switch  # an environment variable: "0" turns it off
        self._failed = False

    def path(self, compiler: str) -> Path:
        digest = hashlib.sha256()
        for part in [(self.folder / s).read_bytes() for s in self.sources] + [
            " ".join(FLAGS).encode(),
            compiler.encode(),
        ]:
            digest.update(part)
            digest.update(b"\0")
        return default_cache_dir().parent / self.name / f"{self.name}-{digest.hexdigest()[:16]}.so"

    def build_name(self) -> str | None:
        """The name of the library this machine's compiler builds from the sources as they are now
        (it changes with any edit to them), without building it; None without a compiler."""
        compiler = find_compiler()
        return None if compiler is None else self.path(compiler).stem

    def build(self) -> Path:
        """Compile the sources unless the cache has them; return the library's path."""
        compiler = find_compiler()
        if compiler is None:
            raise NativeBuildError("no C++ compiler found (looked for $CXX, else g++)")
        lib = self.path(compiler)
        if lib.exists():
            return lib
        lib.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=lib.parent, prefix="build-") as tmp:
            out = Path(tmp) / lib.name
            compiled = [str(self.folder / s) for s in self.sources if not s.endswith(".h")]  # headers: hashed only
            cmd = [compiler, *FLAGS, "-o", str(out), *compiled]
            done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if done.returncode != 0:
                raise NativeBuildError(f"building {self.name} ({', '.join(self.sources)}) failed:\n{done.stdout}")
            os.replace(out, lib)  # atomic: a concurrent build never sees half a library
        return lib

    @cached_property
    def library(self) -> ctypes.CDLL:
        """The loaded library (built on the first call); raises NativeBuildError."""
        lib = ctypes.CDLL(str(self.build()))  # CDLL: each call releases the GIL
        for name, (restype, argtypes) in self.signatures.items():
            function = getattr(lib, name)
            function.restype, function.argtypes = restype, argtypes
        return lib

    def available(self) -> bool:
        """True when the library can run here; never raises. A failed build is not retried in this
        process (each try would run the compiler again)."""
        if os.environ.get(self.switch, "1") == "0" or self._failed:
            return False
        try:
            self.library
        except (NativeBuildError, OSError):
            self._failed = True
            return False
        return True


def pointer(array: np.ndarray, dtype, kind):
    """A pointer to a C-contiguous array of `dtype` (checked: a wrong dtype would be read as garbage)."""
    address(array, dtype)
    return array.ctypes.data_as(kind)


def address(array: np.ndarray, dtype) -> int:
    """The address of a C-contiguous array of `dtype` (checked), for a `c_void_p` argument.
    Unlike `pointer`, no ctypes object refers to the array: `data_as` ties it into a reference
    cycle (through ctypes.cast), so it lives until the next garbage collection; for arrays made
    per call and large (the loader's blocks), that held several at once."""
    if array.dtype != dtype or not array.flags.c_contiguous:
        raise ValueError(f"expected a C-contiguous {np.dtype(dtype).name} array, got {array.dtype}")
    return array.ctypes.data


def address_array(addresses) -> ctypes.Array:
    """A C array of pointers (`void *const *`, a `c_void_p` argument) to the arrays at `addresses`
    (ints; None: a null pointer), for a loop that takes one array per table. ctypes keeps it alive
    through the call; the caller keeps the arrays alive."""
    addresses = list(addresses)
    return (ctypes.c_void_p * len(addresses))(*addresses)


def i64(array: np.ndarray):
    return pointer(array, np.int64, I64P)


def i32(array: np.ndarray):
    return pointer(array, np.int32, I32P)


def u8(array: np.ndarray):
    return pointer(array, np.uint8, U8P)


def f64(array: np.ndarray):
    return pointer(array, np.float64, F64P)
