"""Every `.cu` file through the kit's own NVRTC loader, for every architecture CI targets.

Needs CuPy and libnvrtc (the kernels-ci extra), not a GPU. CI installs them, and conftest's
`require_nvrtc` fails instead of skipping under CI=true, so these checks always run there. A
target the NVRTC in use no longer builds (CUDA 13's has no sm_70) is skipped with the reason
(`require_target`), except in CI, whose NVRTC 12.x builds them all.
"""

from __future__ import annotations

import re
from functools import cache

import pytest

from conftest import require_nvrtc, require_target
from scratchkit.projection.machines import get_machine, machine_names
from scratchkit.kernels.compiled import (
    KernelSignatureError,
    check_compiled,
    cubin_functions,
    expected_params,
    float_instructions,
    ptx_entries,
)
from scratchkit.kernels.cupy_loader import (
    CI_TARGETS,
    GPU_ARCHITECTURES,
    KernelCompileError,
    compile_checked,
    cuda_binary,
    nvrtc_targets,
    target_for,
)
from scratchkit.kernels.signatures import KERNEL_DIR, KERNELS, SOURCES, Arg, Kernel, kernels_in

CU_FILES = sorted(p.name for p in KERNEL_DIR.glob("*.cu"))
CASES = [(source, target) for source in CU_FILES for target in CI_TARGETS]

# The floating-point instructions the kernels may compile to: each is IEEE-exact, so the GPU
# computes what the NumPy twin computes, bit for bit. A new instruction fails the test below
# until it is added here with its reason.
EXACT_FLOAT_OPS = {
    "add.rn.f32": "sums of rows and gradients, rounded to nearest even like NumPy's",
    "mul.rn.f32": "g * g in Adagrad (--fmad=false keeps it apart from the add)",
    "fma.rn.f32": "the row update, only where the source writes fmaf (counted below)",
    "div.rn.f32": "correctly rounded division (-prec-div=true): g / (sqrt(s) + eps), sum / dim",
    "sqrt.rn.f32": "correctly rounded square root (-prec-sqrt=true)",
    "neg.f32": "a sign flip (-lr): exact, and no .ftz",
    "mov.f32": "register moves and the constant 0.0",
    "cvt.rn.f32.s64": "dim as a float for the row-wise mean: exact for dim < 2^24",
}
# Never allowed: doubles (the twin is float32), flush-to-zero, approximate or "full-range"
# division, and the approximate transcendental units (-use_fast_math would bring all of these).
FORBIDDEN = (".f64", "%fd", ".ftz", ".approx", "div.full", "rcp.", "rsqrt.", "ex2.", "lg2.")


@cache
def compiled(source: str, target: str):
    require_target(target)
    return compile_checked(source, target)


def test_ci_targets_cover_the_gpu_profiles():
    assert {"sm_80", "sm_90"} <= set(CI_TARGETS)
    for name in machine_names():
        machine = get_machine(name)
        if machine.device_is_host:
            continue
        gpus = [gpu for gpu in GPU_ARCHITECTURES if gpu in machine.description]
        assert gpus, f"profile {name}: name its GPU in GPU_ARCHITECTURES (cupy_loader.py): {machine.description}"
        assert all(f"sm_{GPU_ARCHITECTURES[g]}" in CI_TARGETS for g in gpus)


def test_the_targets_asked_for_are_those_this_nvrtc_builds(nvrtc):
    targets, skipped = nvrtc_targets(nvrtc)
    assert set(targets) | set(skipped) == set(CI_TARGETS) and not set(targets) & set(skipped)
    for target in targets:
        assert int(target[3:]) in nvrtc.getSupportedArchs()
        assert target_for(int(target[3:])) == target
    for target, why in skipped.items():
        assert int(target[3:]) not in nvrtc.getSupportedArchs() and target in why


class FakeNvrtc:
    """NVRTC's version, and its list of architectures only if `archs` is given (old bindings)."""

    def __init__(self, version, archs=None):
        self.version = version
        if archs is not None:
            self.getSupportedArchs = lambda: tuple(archs)

    def getVersion(self):
        return self.version


CUDA_13_ARCHS = (75, 80, 86, 89, 90, 100, 120)  # what CUDA 13 dropped: everything below sm_75


@pytest.mark.parametrize(
    "fake,skipped,why",
    [
        (FakeNvrtc((13, 0), CUDA_13_ARCHS), ["sm_70"], "NVRTC 13.0's getSupportedArchs has no sm_70"),
        (FakeNvrtc((12, 9), (50, 60, 70, 75, 80, 86, 89, 90)), [], ""),
        (FakeNvrtc((13, 0)), ["sm_70"], "lack getSupportedArchs: assumed sm_75 and newer) has no sm_70"),
        (FakeNvrtc((12, 4)), [], ""),
    ],
)
def test_a_target_nvrtc_dropped_is_left_out_with_the_reason(fake, skipped, why):
    """CUDA 13's NVRTC no longer builds sm_70: the checks ask for the rest and say so; bindings
    without NVRTC's list fall back on its major version."""
    targets, left_out = nvrtc_targets(fake)
    assert list(left_out) == skipped and set(targets) == set(CI_TARGETS) - set(skipped)
    assert all(why in reason for reason in left_out.values())


@pytest.mark.parametrize("source,target", CASES)
def test_the_loader_finds_every_kernel_by_name_and_signature(source, target, tmp_path):
    require_target(target)
    path = cuda_binary(source, target, cache_dir=tmp_path)  # the loader's own cache path
    cubin = path.read_bytes()
    assert cubin[:4] == b"\x7fELF" and path.suffix == ".cubin"
    names = {k.name for k in kernels_in(source)}
    assert names and names <= cubin_functions(cubin)  # what get_function looks up
    entries = ptx_entries(compiled(source, target).ptx)
    assert set(entries) == names
    for kernel in kernels_in(source):  # one PTX param per argument,
        assert len(entries[kernel.name]) == len(kernel.args)  # 8 bytes, or 4 for a float
        assert entries[kernel.name] == expected_params(kernel)
        assert [p == "f32" for p in entries[kernel.name]] == [a is Arg.F32 for a in kernel.args]


@pytest.mark.parametrize("source,target", CASES)
def test_ptx_arithmetic_is_ieee_exact(source, target):
    """No doubles and no fast math: the arithmetic the bitwise twin comparison relies on."""
    ptx = compiled(source, target).ptx
    ops = float_instructions(ptx)
    unexpected = set(ops) - set(EXACT_FLOAT_OPS)
    assert not unexpected, f"{source} for {target}: not known to be IEEE-exact: {sorted(unexpected)}"
    assert ops["fma.rn.f32"] == (KERNEL_DIR / source).read_text().count("fmaf(")
    for marker in FORBIDDEN:
        assert marker not in ptx, f"{source} for {target}: PTX contains {marker!r}"


def test_the_float_check_sees_fast_math(nvrtc, tmp_path):
    """The check above can fail: the same kernel with fast math has approximate instructions."""
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    text = (KERNEL_DIR / "embedding_bag.cu").read_text()
    fast = text.replace("g / denom", "__fdividef(g, denom)").replace("(float)dim", "(double)dim")
    assert fast.count("__fdividef") == 1 and "(double)dim" in fast
    (kernels / "embedding_bag.cu").write_text(fast)
    ptx = compile_checked("embedding_bag.cu", "sm_90", kernel_dir=kernels).ptx
    assert "div.approx.f32" in set(float_instructions(ptx)) - set(EXACT_FLOAT_OPS)
    assert ".f64" in ptx


def break_first_kernel(text: str) -> tuple[str, int]:
    """The text with an undefined name on the line after the first kernel's `{`; that line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('extern "C" __global__'))
    brace = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith("{"))
    lines.insert(brace + 1, "    sk_undefined_name_for_the_test = 1;")
    return "\n".join(lines) + "\n", brace + 2


@pytest.mark.parametrize("source,target", CASES)
def test_compile_errors_name_the_cu_file_and_line(source, target, tmp_path):
    require_target(target)
    text, line = break_first_kernel((KERNEL_DIR / source).read_text())
    (tmp_path / source).write_text(text)
    with pytest.raises(KernelCompileError) as err:
        compile_checked(source, target, kernel_dir=tmp_path)
    message = str(err.value)
    assert f"{tmp_path / source}({line}): error" in message
    assert "sk_undefined_name_for_the_test" in message


def edited_table(name: str, args: tuple[Arg, ...] | None = None, rename: str | None = None):
    """KERNELS with one kernel's launch signature changed, or the kernel renamed."""
    kernel = KERNELS[name]
    changed = Kernel(rename or name, kernel.source, args if args is not None else kernel.args)
    return {k: v for k, v in KERNELS.items() if k != name} | {changed.name: changed}


@pytest.mark.parametrize(
    "change,message",
    [
        (
            dict(args=KERNELS["gather_rows"].args[:-1]),
            r"gather_rows takes \(u64, u64, u64, u64, u64\) in "
            r"PTX, but the launchers pass \(u64, u64, u64, u64\)",
        ),
        (dict(args=(Arg.F32_ARRAY, Arg.F32, Arg.I64_ARRAY, Arg.I64, Arg.F32_ARRAY)), r"gather_rows takes"),
        (dict(rename="gather_row"), r"'gather_row' is in the signature table but not in the compiled"),
    ],
)
def test_a_launch_signature_that_disagrees_with_the_source_fails(change, message):
    ptx = compiled("rows.cu", "sm_90").ptx
    check_compiled("rows.cu", ptx, kernels=KERNELS)  # the real table agrees
    with pytest.raises(KernelSignatureError, match=message):
        check_compiled("rows.cu", ptx, kernels=edited_table("gather_rows", **change))


def test_a_source_that_disagrees_with_the_launch_signature_fails_to_load(nvrtc, tmp_path):
    text = (KERNEL_DIR / "rows.cu").read_text()
    narrowed = re.sub(r"(gather_rows\(.*?)long long n", r"\1int n", text, count=1, flags=re.S)
    assert narrowed != text
    (tmp_path / "rows.cu").write_text(narrowed)
    with pytest.raises(KernelSignatureError, match=r"gather_rows takes \(u64, u64, u64, u32, u64\)"):
        compile_checked("rows.cu", "sm_90", kernel_dir=tmp_path)
    (tmp_path / "rows.cu").write_text(text + '\nextern "C" __global__ void stray(float* x) { x[0] = 1.0f; }\n')
    with pytest.raises(KernelSignatureError, match="has kernel 'stray', which the signature table does not list"):
        compile_checked("rows.cu", "sm_90", kernel_dir=tmp_path)


def test_a_cubin_without_the_kernel_fails():
    rows = compiled("rows.cu", "sm_90")
    other = compiled("hashmap.cu", "sm_90").cubin
    with pytest.raises(KernelSignatureError, match="the cubin exports no function 'gather_rows'"):
        check_compiled("rows.cu", rows.ptx, other)


def test_cuda_binaries_are_cached_by_content(nvrtc, tmp_path):
    first = cuda_binary("rows.cu", "sm_90", cache_dir=tmp_path)
    assert first.read_bytes()[:4] == b"\x7fELF" and first.parent == tmp_path
    stamp = first.stat().st_mtime_ns
    assert cuda_binary("rows.cu", "sm_90", cache_dir=tmp_path) == first
    assert first.stat().st_mtime_ns == stamp
    assert cuda_binary("rows.cu", "compute_80", cache_dir=tmp_path).suffix == ".ptx"
    assert target_for(90) == "sm_90" and target_for(10_000).startswith("compute_")


def test_cupy_launcher_loads_each_module_once_and_finds_kernels_by_name(tmp_path, monkeypatch):
    """CupyLauncher's own lines, with a stand-in for the GPU: it picks the cubin for the device's
    architecture, loads each `.cu` once, and a name the cubin lacks fails as it would on a GPU."""
    import numpy as np

    from conftest import cupy_stand_in_engine

    monkeypatch.setenv("SCRATCHKIT_CACHE_DIR", str(tmp_path))
    engine = cupy_stand_in_engine(compute_capability=80)
    cp = engine.launcher.cp
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = engine.gather_rows(table, np.array([2, 0]))
    np.testing.assert_array_equal(out, table[[2, 0]])
    engine.gather_rows(table, np.array([1]))
    assert [m.path.rsplit(".", 2)[-2:] for m in cp.modules] == [["sm_80", "cubin"]]
    assert cp.launches[0][0] == "gather_rows" and len(cp.launches) == 2
    with pytest.raises(RuntimeError, match="named symbol not found: 'no_such_kernel'"):
        cp.modules[0].get_function("no_such_kernel")
    assert set(SOURCES) >= {m.path.rsplit("/", 1)[-1].split("-")[0] + ".cu" for m in cp.modules}


def test_ci_refuses_to_skip_the_nvrtc_checks(monkeypatch):
    """Without NVRTC a developer's run skips these tests; CI's (CI=true) fails instead."""
    from scratchkit import backend

    def missing():
        raise backend.NvrtcUnavailable("CuPy is not installed (a test)")

    monkeypatch.setattr(backend, "get_nvrtc", missing)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the NVRTC checks"):
        require_nvrtc()
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match="NVRTC not available here"):
        require_nvrtc()


def test_ci_refuses_to_skip_a_target(monkeypatch):
    """An NVRTC without sm_70 skips its checks on a GPU machine, but fails them in CI."""
    from scratchkit import backend

    monkeypatch.setattr(backend, "get_nvrtc", lambda: FakeNvrtc((13, 0), CUDA_13_ARCHS))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must compile for every CI target, but: NVRTC 13.0"):
        require_target("sm_70")
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match="cannot compile for sm_70 here: NVRTC 13.0's"):
        require_target("sm_70")
    assert require_target("sm_90").getVersion() == (13, 0)


def test_get_nvrtc_explains_what_is_missing(monkeypatch):
    from types import SimpleNamespace

    from scratchkit import backend

    def no_cupy(name):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(backend, "importlib", SimpleNamespace(import_module=no_cupy))
    with pytest.raises(backend.NvrtcUnavailable, match=r"pip install -e '\.\[kernels-ci\]'"):
        backend.get_nvrtc()
