"""Run the `.cu` kernels on a GPU through CuPy.

Nothing here touches CuPy until the first launch: `CupyLauncher()` asks `scratchkit.backend` for
the cupy module (which explains what is missing when there is no GPU), and each `.cu` file becomes
a `cupy.RawModule` the first time one of its kernels is launched; CuPy compiles it with NVRTC then
and caches the binary (in `$CUPY_CACHE_DIR`, default `~/.cupy`).

The source handed to NVRTC starts with `#line 1 "<path of the .cu>"`, so a compile error names
the file on disk and its line, not "kernel.cu" or a line of a Python string.

`--fmad=false` stops NVRTC from fusing a*b+c on its own: the kernels call `fmaf` exactly where the
NumPy twins use a fused multiply-add, so both round the same way (see embedding_bag.cu).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..backend import get_cupy
from .signatures import KERNELS, Arg, check_arrays

NVRTC_OPTIONS = ("--std=c++14", "--fmad=false")

_SCALAR = {Arg.I64: np.int64, Arg.F32: np.float32}
_PATHS = {k.source: k.path for k in KERNELS.values()}


def with_line_directive(path: Path) -> str:
    """A `.cu` file's text behind `#line 1 "<path>"`: compiler messages then name that file."""
    return f'#line 1 "{path}"\n' + path.read_text()


def cupy_source(source: str) -> str:
    """The text CuPy compiles for one `.cu` file of this folder."""
    return with_line_directive(_PATHS[source])


class CupyLauncher:
    """Launches kernels on the current CUDA device: `launch(name, grid, block, args)`."""

    def __init__(self):
        self.cp = get_cupy()
        self._modules = {}     # source -> RawModule, created on first use
        self._functions = {}   # kernel name -> RawKernel

    def _function(self, name: str):
        if name not in self._functions:
            source = KERNELS[name].source
            if source not in self._modules:
                self._modules[source] = self.cp.RawModule(code=cupy_source(source),
                                                          options=NVRTC_OPTIONS)
            self._functions[name] = self._modules[source].get_function(name)
        return self._functions[name]

    def launch(self, name: str, grid: int, block: int, args: tuple) -> None:
        kernel = KERNELS[name]
        check_arrays(kernel, args)
        converted = tuple(a if kind.is_array else _SCALAR[kind](a) for a, kind in zip(args, kernel.args))
        self._function(name)((grid,), (block,), converted)
