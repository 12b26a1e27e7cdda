"""Exercises the learner writes in the notebooks, and `check`, which grades them with a hint.

    from scratchkit.course.exercises import check
    check(lru_hits)          # a function you wrote: pass, or the first input that failed and why
    check(gather_rows)       # a CUDA kernel's source (notebook 08): built for the CPU, traced, checked

Each notebook's exercises are in a module of their own (hybrid: 01, caches: 02, windows: 03,
pipeline: 04, costs: 05, own_data: 06, sharded: 07, kernels: 08, capstone: 09). The solutions the tests fill
in live outside the package, in `solutions/` at the repository's root.
"""

from __future__ import annotations

# each notebook's module, imported for what importing it does: it registers its exercises
from scratchkit.course.exercises import capstone, caches, costs, hybrid, own_data, pipeline, sharded, windows
from scratchkit.course.exercises.checking import EXERCISES, CheckResult, check_function


def check(answer, exercise: str | None = None) -> CheckResult:
    """Grade `answer`: a function you wrote for an exercise (found by its name), or, for a kernel
    puzzle, the CUDA source of your kernel (a string)."""
    if isinstance(answer, str):
        from scratchkit.course.exercises.kernels import check_kernel

        return check_kernel(answer)
    return check_function(answer, exercise)


__all__ = ["EXERCISES", "CheckResult", "check"]
