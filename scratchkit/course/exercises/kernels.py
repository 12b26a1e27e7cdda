"""Check a kernel puzzle: build the learner's CUDA source for the CPU, run it traced, explain.

    check_kernel(source)    source: the kernel as CUDA C text, as typed in notebook 08

The kernel is built with g++ through the kit's host build (`scratchkit.kernels.traced`), run on
each case of its puzzle (`kernel_cases.PUZZLES`) with every thread's writes recorded, and the first
problem found is said in words, in this order: the build failed (the compiler's lines); the kernel
crashed or never ended (in which thread); a thread wrote past either end of an array, or wrote an
input; two threads wrote one element without an atomic (a race); an output element differs from
the NumPy twin (which element, its value and the twin's, and which thread wrote it). Where a GPU
is present the kernel also runs there, through CuPy, and its outputs are held to the twin too.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

import numpy as np

from scratchkit.course.exercises.checking import CheckResult, not_written, short
from scratchkit.course.exercises.kernel_cases import BLOCK, PUZZLES, KernelCase, Puzzle
from scratchkit.kernels.cupy_loader import CupyLauncher, compile_checked
from scratchkit.kernels.host_build import default_cache_dir
from scratchkit.kernels.signatures import KERNELS, Kernel
from scratchkit.kernels.traced import (
    FLOAT_GUARD,
    INT_GUARD,
    KernelBuildError,
    TracedLauncher,
    TracedRun,
    kernel_names,
    library_for,
    run_traced,
)

PLACEHOLDER = "YOUR CODE HERE"
TIMEOUT = 2.0  # seconds a launch of a few hundred threads may take (it takes ms)
RACE = (
    "On a GPU the two threads run at the same time, so which value lands (or whether an "
    "addition is lost) changes from run to run: give each element one writer, or use "
    "atomicAdd. The CPU build runs the threads one after the other and records which thread "
    "changed each element, so it sees the race every time."
)


def thread_words(t: int) -> str:
    return f"thread {t} (blockIdx.x {t // BLOCK}, threadIdx.x {t % BLOCK})"


def element_words(name: str, shape: tuple, flat: int) -> str:
    """`out[3, 7]` for flat index 3 * width + 7; flat may lie before 0 or past the end."""
    size = int(np.prod(shape))
    index = f"{name}[{flat // shape[1]}, {flat % shape[1]}]" if len(shape) == 2 else f"{name}[{flat}]"
    if flat < 0:
        return f"{index}, before the start of {name}"
    if flat >= size:
        rows = f"{shape[0]} rows" if len(shape) == 2 else f"{size} elements"
        return f"{index}, past the end of {name} ({rows})"
    return index


def check_kernel(source: str, cupy: Callable | None = None, cache_dir: Path | None = None) -> CheckResult:
    """Grade a puzzle kernel. `cupy(host_launcher)` gives the cupy module to run it on a GPU as
    well (default: CuPy where a GPU is present; tests pass tests/stand_ins.py's)."""
    names = [n for n in kernel_names(source) if n in PUZZLES]
    if not names:
        found = ", ".join(kernel_names(source)) or "no __global__ function"
        raise ValueError(f"the source defines {found}; a puzzle kernel is one of {', '.join(PUZZLES)}")
    puzzle = PUZZLES[names[0]]
    if PLACEHOLDER in source:
        raise not_written(
            NotImplementedError(f"{puzzle.name}: write the kernel's body where the source says {PLACEHOLDER}"),
            f"{puzzle.name} is not written yet: write the "
            f"kernel's body in this cell where its source says {PLACEHOLDER}, then run the cell again",
        )
    kernel = KERNELS[puzzle.name]
    try:
        library = library_for(source, puzzle.name, cache_dir)
    except KernelBuildError as error:
        return CheckResult(
            puzzle.name,
            False,
            "the kernel did not compile",
            "fix the first error; line numbers count from the first line of your source string",
            details=str(error).splitlines(),
        )
    cases = puzzle.cases()
    for number, case in enumerate(cases, start=1):
        run = run_traced(
            library,
            kernel,
            -(-case.threads // BLOCK),
            BLOCK,
            case.args,
            list(puzzle.names),
            set(puzzle.outputs),
            guard_for(case),
            TIMEOUT,
        )
        problem = diagnose(puzzle, case, run)
        if problem is not None:
            message, hint = problem
            return CheckResult(
                puzzle.name, False, f"case {number} of {len(cases)} ({case.about}): {message}", hint, number
            )
    where = "on the CPU (host build, every thread traced)"
    device = _device(cupy)
    if device is not None:
        failed = _on_device(puzzle, kernel, source, device(TracedLauncher(library, kernel)), cases, cache_dir)
        if failed is not None:
            return failed
        where += " and on the GPU (CuPy)"
    return CheckResult(puzzle.name, True, f"all {len(cases)} cases pass {where}", cases=len(cases))


def guard_for(case: KernelCase) -> int:
    """Guard elements each side: more than a partial block of threads or two rows can overrun."""
    widths = [a.shape[1] for a in case.args if isinstance(a, np.ndarray) and a.ndim == 2]
    return max(64, BLOCK, 2 * max(widths, default=1))


def diagnose(puzzle: Puzzle, case: KernelCase, run: TracedRun) -> tuple[str, str] | None:
    """The first problem of one traced launch, as (message, hint); None when it is right."""
    if run.status == "crashed":
        return (
            f"the kernel crashed ({run.signal_name}) in {thread_words(run.thread)}: it read or wrote "
            "far outside an array",
            "look at the indices that thread computes; " + puzzle.hint,
        )
    if run.status == "timed out":
        return (
            f"{thread_words(run.thread)} had not finished after {TIMEOUT:.0f} s: a loop that never ends?",
            puzzle.timeout_hint or puzzle.hint,
        )
    shapes = {p: a.shape for p, a in enumerate(case.args) if isinstance(a, np.ndarray)}
    for position, watched in run.arrays.items():
        body = np.zeros(watched.writer.size, dtype=bool)
        body[watched.guard : watched.guard + watched.data.size] = True
        outside = np.flatnonzero((watched.writer >= 0) & ~body)
        if outside.size:
            flat = int(outside[0]) - watched.guard
            return (
                f"{thread_words(int(watched.writer[outside[0]]))} wrote "
                f"{element_words(watched.name, shapes[position], flat)}",
                "a thread whose index is past the work must return before it writes "
                "(if (i >= n) return;), and every index must stay inside its array",
            )
        if position not in puzzle.outputs and (watched.writer >= 0).any():
            flat = int(np.flatnonzero(watched.writer >= 0)[0]) - watched.guard
            outputs = ", ".join(puzzle.names[p] for p in sorted(puzzle.outputs))
            return (
                f"{thread_words(int(watched.writer[flat + watched.guard]))} changed "
                f"{element_words(watched.name, shapes[position], flat)}, an input",
                f"only {outputs} may change; read the inputs, never write them",
            )
    for position in sorted(puzzle.outputs):
        watched = run.arrays[position]
        raced = np.flatnonzero((watched.other >= 0) & watched.plain)
        if raced.size:
            at = int(raced[0])
            return (
                f"race on {element_words(watched.name, shapes[position], at - watched.guard)}: "
                f"{thread_words(int(watched.other[at]))} and {thread_words(int(watched.writer[at]))} "
                "both wrote it, not through an atomic",
                past_the_work(int(watched.writer[at]), case) or RACE,
            )
    for position, expected in puzzle.twin(case.args).items():
        wrong = first_wrong(run.arrays[position].data, expected.reshape(-1), puzzle.tolerance)
        if wrong is not None:
            watched = run.arrays[position]
            got, want = watched.data[wrong], expected.reshape(-1)[wrong]
            writer = int(watched.writer[wrong + watched.guard])
            who = (
                f"{thread_words(writer)} wrote it"
                if writer >= 0
                else "no thread wrote it"
                + (
                    " (the kernel finds outputs uninitialised: every element must be written)"
                    if np.isnan(np.float64(got)) or got == INT_GUARD
                    else ""
                )
            )
            return (
                f"{element_words(watched.name, shapes[position], wrong)} = {value_words(got)}, but the "
                f"NumPy twin gives {value_words(want)}; {who}",
                past_the_work(writer, case) or case.hint or puzzle.hint,
            )
    return None


def past_the_work(thread: int, case: KernelCase) -> str:
    """A hint when `thread` has no work in this case: it should have returned before writing."""
    if thread < case.threads:
        return ""
    return (
        f"thread {thread} has no work here (this case needs threads 0..{case.threads - 1}; the last "
        "block has more): it must return before it writes (if (i >= n) return;)"
    )


def first_wrong(got: np.ndarray, expected: np.ndarray, tolerance: tuple[float, float]) -> int | None:
    if np.issubdtype(expected.dtype, np.floating):
        rtol, atol = tolerance
        same = np.isclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)
        same |= (got.view(np.uint32) == expected.view(np.uint32)) if got.dtype == np.float32 else False
    else:
        same = got == expected
    wrong = np.flatnonzero(~same)
    return int(wrong[0]) if wrong.size else None


def value_words(value) -> str:
    if isinstance(value, (float, np.floating)) and np.isnan(value):
        return "NaN" + (
            " (the marker of a guard zone)"
            if np.float32(value).view(np.uint32) == FLOAT_GUARD.view(np.uint32)
            else " (never written)"
        )
    return short(value)


# ------------------------------------------------------------------------------ on a GPU
def _device(cupy: Callable | None) -> Callable | None:
    if cupy is not None:
        return cupy
    from scratchkit.backend import detect, get_cupy

    return (lambda host: get_cupy()) if detect().cupy_gpu else None


def _on_device(
    puzzle: Puzzle, kernel: Kernel, source: str, cp, cases: list[KernelCase], cache_dir: Path | None
) -> CheckResult | None:
    """Run every case through CuPy's launcher and hold the outputs to the twin."""
    launcher = device_launcher(cp, kernel, source, cache_dir)
    for number, case in enumerate(cases, start=1):
        args = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in case.args]
        launcher.launch(puzzle.name, -(-case.threads // BLOCK), BLOCK, tuple(args))
        for position, expected in puzzle.twin(case.args).items():
            got = cp.asnumpy(args[position]).reshape(-1)
            wrong = first_wrong(got, expected.reshape(-1), puzzle.tolerance)
            if wrong is not None:
                shape = case.args[position].shape
                return CheckResult(
                    puzzle.name,
                    False,
                    f"case {number} of {len(cases)} ({case.about}), on the "
                    f"GPU: {element_words(puzzle.names[position], shape, wrong)} = "
                    f"{value_words(got[wrong])}, but the NumPy twin gives "
                    f"{value_words(expected.reshape(-1)[wrong])}",
                    "the CPU build passed, so look for threads that depend on each other's "
                    "writes: on a GPU they run at the same time",
                    number,
                )
    return None


def device_launcher(cp, kernel: Kernel, source: str, cache_dir: Path | None = None) -> CupyLauncher:
    """CuPy's launcher for a kernel given as source: the source is written to a folder of its own
    (named by its hash) and compiled there by NVRTC, checked against the kernel's signature, as
    the kit's own .cu files are (scratchkit/kernels/cupy_loader.py)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    folder = (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / "puzzles" / f"{kernel.name}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{kernel.name}.cu").write_text(source)
    table = {kernel.name: Kernel(kernel.name, f"{kernel.name}.cu", kernel.args)}

    def binary(name: str, target: str) -> Path:
        path = folder / f"{kernel.name}.{target}.bin"
        if not path.exists():
            path.write_bytes(compile_checked(name, target, kernel_dir=folder, kernels=table).binary)
        return path

    return CupyLauncher(cp=cp, kernels=table, binary=binary)
