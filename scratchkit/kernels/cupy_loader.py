"""Run the `.cu` kernels on a GPU through CuPy.

Nothing here touches CuPy until the first launch: `CupyLauncher()` asks `scratchkit.backend` for
the cupy module (which explains what is missing when there is no GPU), and each `.cu` file is
compiled the first time one of its kernels is launched, then loaded as a `cupy.RawModule`.

We call NVRTC ourselves (CuPy's thin `cupy.cuda.nvrtc` bindings) instead of handing the source
to `RawModule(code=...)`, because RawModule appends `-ftz=true` to every compile: subnormal floats
would flush to zero on the GPU and not in the twin. Our options spell out the IEEE behaviour the
bitwise twin comparison relies on:
  --fmad=false       no a*b+c fused behind our back: the kernels write `fmaf` where they mean it
  -ftz=false         keep subnormals
  -prec-div=true     correctly rounded division and square root (NVRTC's defaults, made explicit)
  -prec-sqrt=true
The result (a cubin for the device's architecture, or PTX when NVRTC is older than the device)
goes to `<cache>/cuda/`, named by a hash of source, options, architecture and NVRTC version, next
to the host build (see host_build.default_cache_dir).

The source handed to NVRTC starts with `#line 1 "<path of the .cu>"`, so a compile error names
the file on disk and its line, not "kernel.cu" or a line of a Python string.

Every compile is checked against the launch signatures (kernels/compiled.py) before it is cached:
each kernel of signatures.py is an entry of the PTX with the parameters its launchers pass, and
is exported by the cubin. NVRTC needs no GPU, so CI compiles every `.cu` for CI_TARGETS this way.
NVRTC's bindings come from `scratchkit.backend.get_nvrtc()`: backend.py is the only module that
imports CuPy.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..backend import get_cupy, get_nvrtc, nvrtc_architectures, supports_architecture
from .compiled import check_compiled
from .host_build import default_cache_dir
from .signatures import KERNEL_DIR, KERNELS, Arg, check_arrays, kernels_in

NVRTC_OPTIONS = ("--fmad=false", "-ftz=false", "-prec-div=true", "-prec-sqrt=true")

_SCALAR = {Arg.I64: np.int64, Arg.F32: np.float32}


class KernelCompileError(RuntimeError):
    """NVRTC rejected a `.cu` file; the message is its log (file and line thanks to #line)."""


# The architectures CI compiles every kernel for (NVRTC needs no GPU), by the GPUs the hardware
# profiles name: a profile whose GPU is not here fails tests/test_kernels_nvrtc.py until it is.
GPU_ARCHITECTURES = {
    "V100": 70,  # v100-pcie3: the DLRM/ScratchPipe era
    "A100": 80,  # the minimum; the most common rented GPU
    "H100": 90,  # h100-pcie5
    "H200": 90,
}  # same architecture as the H100, more HBM
CI_TARGETS = tuple(f"sm_{a}" for a in sorted(set(GPU_ARCHITECTURES.values())))


def nvrtc_targets(nvrtc=None) -> tuple[tuple[str, ...], dict[str, str]]:
    """(the CI_TARGETS the NVRTC in use compiles for, {each other CI target: why not}).

    Each NVRTC drops old architectures (CUDA 13's no longer targets sm_70, the V100's), so a check
    asks only for what this one can build, and names what it left out. CI's NVRTC (12.x, the
    kernels-ci extra) still builds them all."""
    nvrtc = nvrtc if nvrtc is not None else get_nvrtc()
    _, how = nvrtc_architectures(nvrtc)
    usable = tuple(t for t in CI_TARGETS if supports_architecture(nvrtc, int(t[3:])))
    return usable, {t: f"{how} has no {t}" for t in CI_TARGETS if t not in usable}


@dataclass(frozen=True)
class Compiled:
    """One `.cu` file compiled for one target: the binary the driver loads, and its PTX."""

    source: str
    target: str
    binary: bytes  # a cubin (ELF) for "sm_XX", the PTX text for "compute_XX"
    ptx: str  # the PTX NVRTC generated on the way (for "compute_XX", the binary itself)

    @property
    def cubin(self) -> bytes | None:
        return self.binary if self.target.startswith("sm_") else None


def with_line_directive(path: Path) -> str:
    """A `.cu` file's text behind `#line 1 "<path>"`: compiler messages then name that file."""
    return f'#line 1 "{path}"\n' + path.read_text()


def cupy_source(source: str, kernel_dir: Path = KERNEL_DIR) -> str:
    """The text NVRTC compiles for one `.cu` file of `kernel_dir` (this folder by default)."""
    return with_line_directive(kernel_dir / source)


def compile_checked(source: str, target: str, kernel_dir: Path = KERNEL_DIR, kernels=KERNELS) -> Compiled:
    """Compile one `.cu` file with NVRTC_OPTIONS for `target`, then check the result against the
    launch signatures (compiled.check_compiled): a kernel the launchers would call by a wrong name
    or with wrong arguments fails here, on any machine with NVRTC, not on the first GPU.

    target: "sm_90" gives a cubin (runs on exactly that architecture), "compute_90" gives PTX
    (the driver compiles it for any architecture >= 9.0). Needs CuPy and NVRTC, not a GPU.
    `kernels`: the signature table to check against (a kernel puzzle brings its own).
    """
    nvrtc = get_nvrtc()
    path = kernel_dir / source
    program = nvrtc.createProgram(cupy_source(source, kernel_dir), str(path), [], [])
    try:
        try:
            nvrtc.compileProgram(program, [*NVRTC_OPTIONS, f"-arch={target}"])
        except nvrtc.NVRTCError as err:
            raise KernelCompileError(
                f"NVRTC could not compile {path} for {target}:\n{nvrtc.getProgramLog(program)}"
            ) from err
        ptx = nvrtc.getPTX(program)
        binary = nvrtc.getCUBIN(program) if target.startswith("sm_") else ptx
    finally:
        nvrtc.destroyProgram(program)
    compiled = Compiled(source, target, binary, ptx.decode().rstrip("\0"))
    check_compiled(source, compiled.ptx, compiled.cubin, kernels)
    return compiled


def nvrtc_compile(source: str, target: str, kernel_dir: Path = KERNEL_DIR) -> bytes:
    """The checked binary of one `.cu` file for `target` (see compile_checked)."""
    return compile_checked(source, target, kernel_dir).binary


def target_for(compute_capability: int) -> str:
    """A cubin for the device when NVRTC knows its architecture, else PTX for the newest it knows."""
    nvrtc = get_nvrtc()
    archs, how = nvrtc_architectures(nvrtc)
    if archs is None:  # bindings without NVRTC's list: its version decides
        if supports_architecture(nvrtc, compute_capability):
            return f"sm_{compute_capability}"
        raise KernelCompileError(f"{how}: no sm_{compute_capability}")
    known = [a for a in archs if a <= compute_capability]
    if compute_capability in known:
        return f"sm_{compute_capability}"
    if not known:
        raise KernelCompileError(f"NVRTC {nvrtc.getVersion()} knows no architecture <= {compute_capability}")
    return f"compute_{max(known)}"


def cuda_binary(source: str, target: str, cache_dir: Path | None = None) -> Path:
    """The compiled `source` for `target`, from the cache or compiled now (atomically written)."""
    nvrtc = get_nvrtc()
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "cuda"
    # the signatures are in the key too: a cached binary was checked against the table of its day
    signatures = repr([(k.name, k.args) for k in kernels_in(source)])
    digest = hashlib.sha256(
        "\0".join((cupy_source(source), *NVRTC_OPTIONS, target, signatures, str(nvrtc.getVersion()))).encode()
    ).hexdigest()[:16]
    path = cache_dir / f"{Path(source).stem}-{digest}.{target}.{'cubin' if target.startswith('sm_') else 'ptx'}"
    if not path.exists():
        binary = nvrtc_compile(source, target)
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(binary)
        os.replace(tmp, path)
    return path


class CupyLauncher:
    """Launches kernels on the current CUDA device: `launch(name, grid, block, args)`.

    cp: the cupy module (default: `backend.get_cupy()`, which explains what is missing). Tests pass
    a stand-in with the same three names (cuda.Device, RawModule, RawModule.get_function), so every
    line here, compile and cache included, runs in CI without a GPU.
    """

    def __init__(self, cp=None, kernels=KERNELS, binary=None):
        self.cp = cp if cp is not None else get_cupy()
        # `kernels` and `binary(source, target) -> path` default to this folder's .cu files; a
        # kernel puzzle passes its own (scratchkit/course/exercises/kernels.py)
        self.kernels, self.binary = kernels, binary or cuda_binary
        self._modules = {}  # source -> RawModule, created on first use
        self._functions = {}  # kernel name -> RawKernel

    def _function(self, name: str):
        if name not in self._functions:
            source = self.kernels[name].source
            if source not in self._modules:
                target = target_for(int(self.cp.cuda.Device().compute_capability))
                self._modules[source] = self.cp.RawModule(path=str(self.binary(source, target)))
            self._functions[name] = self._modules[source].get_function(name)
        return self._functions[name]

    def launch(self, name: str, grid: int, block: int, args: tuple) -> None:
        kernel = self.kernels[name]
        check_arrays(kernel, args)
        converted = tuple(a if kind.is_array else _SCALAR[kind](a) for a, kind in zip(args, kernel.args))
        self._function(name)((grid,), (block,), converted)
