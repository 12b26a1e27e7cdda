"""Building the `.cu` sources: for the host (g++ + compat header), for real GPUs (nvcc), for CuPy."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from scratchkit.kernels import EngineKind, engine as engine_module, resolve
from scratchkit.kernels.cupy_loader import cupy_source, with_line_directive
from scratchkit.kernels.host_build import HostBuildError, build
from scratchkit.kernels.signatures import KERNEL_DIR, KERNELS, SOURCES, Arg

CU_FILES = sorted(p.name for p in KERNEL_DIR.glob("*.cu"))
NVCC = shutil.which("nvcc")


def parse_kernels(text):
    """{name: (Arg, ...)} for every `extern "C" __global__ void name(...)` in a .cu text."""
    found = {}
    for name, params in re.findall(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', text):
        kinds = []
        for param in params.split(","):
            words = param.replace("*", " * ").replace("const", " ").split()[:-1]  # drop the name
            c_type = " ".join(words).replace(" *", "*")
            kinds.append(next((a for a in Arg if a.value == c_type), c_type))
        found[name] = tuple(kinds)
    return found


def test_host_launcher_refuses_wrong_arrays():
    import numpy as np

    from scratchkit.kernels import make_engine

    engine = make_engine("host")
    table = np.zeros((4, 3), dtype=np.float32)
    with pytest.raises(TypeError, match="gather_rows argument 2 must be a C-contiguous int64 array, got int32"):
        engine.gather_rows(table, np.array([1, 2], dtype=np.int32))
    with pytest.raises(
        TypeError,
        match="argument 0 must be a C-contiguous float32 array, got float32 "
        r"\(C-contiguous: False\)",
    ):
        engine.gather_rows(np.zeros((3, 4), np.float32).T, np.array([1]))


def test_signature_table_matches_the_cu_files():
    assert set(CU_FILES) == set(SOURCES)
    declared = {}
    for source in CU_FILES:
        for name, args in parse_kernels((KERNEL_DIR / source).read_text()).items():
            declared[name] = (source, args)
    assert declared == {k.name: (k.source, k.args) for k in KERNELS.values()}


@pytest.mark.skipif(NVCC is None, reason="nvcc not found: skipping the compile check for real GPUs")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_cu_file_compiles_for_gpus(tmp_path, arch):
    procs = [
        (
            source,
            subprocess.Popen(
                [
                    NVCC,
                    "--cubin",
                    f"-arch={arch}",
                    "-o",
                    str(tmp_path / f"{source}.{arch}.cubin"),
                    str(KERNEL_DIR / source),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ),
        )
        for source in CU_FILES
    ]
    for source, proc in procs:
        log, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"nvcc -arch={arch} {source} failed:\n{log}"
        assert (tmp_path / f"{source}.{arch}.cubin").stat().st_size > 0


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_line_directive_makes_gpu_compile_errors_name_the_file(tmp_path):
    broken = tmp_path / "broken_kernel.cu"
    broken.write_text('extern "C" __global__ void k(float* x) {\n    x[0] = undefined_name;\n}\n')
    unit = tmp_path / "as_cupy_sees_it.cu"
    unit.write_text("// text before the kernel, as if pasted from a Python string\n\n" + with_line_directive(broken))
    proc = subprocess.run(
        [NVCC, "--cubin", "-arch=sm_80", "-o", str(tmp_path / "x.cubin"), str(unit)], capture_output=True, text=True
    )
    assert proc.returncode != 0
    assert f"{broken}(2)" in proc.stdout + proc.stderr  # file and line of the error


def test_cupy_source_starts_with_the_line_directive():
    for source in SOURCES:
        first, rest = cupy_source(source).split("\n", 1)
        assert first == f'#line 1 "{KERNEL_DIR / source}"'
        assert rest == (KERNEL_DIR / source).read_text()


def test_host_build_goes_to_the_cache_and_is_reused(tmp_path):
    libraries = build(cache_dir=tmp_path)
    assert set(libraries) == set(SOURCES)
    for lib in libraries.values():
        assert lib.parent == tmp_path and lib.exists()
    stamps = {lib: lib.stat().st_mtime_ns for lib in libraries.values()}
    assert build(cache_dir=tmp_path) == libraries  # second call: nothing rebuilt
    assert {lib: lib.stat().st_mtime_ns for lib in libraries.values()} == stamps
    assert not list(KERNEL_DIR.glob("*.so"))  # never into the package


def copy_kernels(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    for source in SOURCES:
        shutil.copy(KERNEL_DIR / source, kernels / source)
    return kernels


def test_an_edited_source_gets_a_new_library(tmp_path):
    kernels = copy_kernels(tmp_path)
    before = build(("rows.cu",), cache_dir=tmp_path / "cache", kernel_dir=kernels)["rows.cu"]
    (kernels / "rows.cu").write_text((kernels / "rows.cu").read_text() + "\n// edited\n")
    after = build(("rows.cu",), cache_dir=tmp_path / "cache", kernel_dir=kernels)["rows.cu"]
    assert before != after and before.exists() and after.exists()


def test_host_compile_errors_name_the_cu_file_and_line(tmp_path):
    kernels = copy_kernels(tmp_path)
    text = (kernels / "rows.cu").read_text().replace("dst[c] = src[c]", "dst[c] = sorce[c]", 1)
    (kernels / "rows.cu").write_text(text)
    line = next(i for i, source_line in enumerate(text.splitlines(), 1) if "sorce" in source_line)
    with pytest.raises(HostBuildError) as err:
        build(("rows.cu",), cache_dir=tmp_path / "cache", kernel_dir=kernels)
    assert f"{kernels / 'rows.cu'}:{line}:" in str(err.value)


def test_host_build_refuses_barriers_with_a_message(tmp_path):
    kernels = copy_kernels(tmp_path)
    text = (kernels / "rows.cu").read_text().replace("float* dst", "__syncthreads();\n    float* dst", 1)
    (kernels / "rows.cu").write_text(text)
    with pytest.raises(HostBuildError, match="__syncthreads cannot run in the serial host build"):
        build(("rows.cu",), cache_dir=tmp_path / "cache", kernel_dir=kernels)


def test_no_compiler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    with pytest.raises(HostBuildError, match="no C\\+\\+ compiler"):
        build(cache_dir=tmp_path)


def test_engine_resolution(monkeypatch):
    assert resolve("twin", "cpu") is EngineKind.TWIN
    assert resolve("cupy", "cuda") is EngineKind.CUPY
    assert resolve("auto", "cuda:0") is EngineKind.CUPY
    with pytest.raises(ValueError, match="cannot serve device 'cpu'"):
        resolve("cupy", "cpu")
    with pytest.raises(ValueError, match="cannot serve device 'cuda'"):
        resolve("host", "cuda")
    with pytest.raises(ValueError):
        resolve("fastest", "cpu")
    monkeypatch.setattr(engine_module, "host_build_works", lambda: False)
    assert resolve("auto", "cpu") is EngineKind.TWIN
    monkeypatch.setattr(engine_module, "host_build_works", lambda: True)
    assert resolve("auto", "cpu") is EngineKind.HOST


def test_import_and_cpu_use_never_touch_cupy():
    code = (
        "import sys, numpy as np\n"
        "import scratchkit.kernels, scratchkit.kernels.scratchpad, scratchkit.kernels.cupy_loader\n"
        "pad = scratchkit.kernels.scratchpad.Scratchpad(100, 8, 4, engine='auto', device='cpu')\n"
        "pad.insert([3], [0]); assert pad.query([3]).tolist() == [0]\n"
        "assert 'cupy' not in sys.modules, 'cupy was imported'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(KERNEL_DIR.parents[1])},
    )
    assert proc.returncode == 0, proc.stderr


def test_only_backend_imports_cupy():
    """backend.py decides what is available; every other module asks it (get_cupy, get_nvrtc)."""
    package = KERNEL_DIR.parent
    pattern = re.compile(r"^\s*(import cupy|from cupy|.*import_module\([\"']cupy)", re.M)
    importers = sorted(str(p.relative_to(package)) for p in package.rglob("*.py") if pattern.search(p.read_text()))
    assert importers == ["backend.py"]
