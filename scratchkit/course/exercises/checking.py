"""How an exercise is checked: cases, a reference, and a hint for the first case that fails.

An `Exercise` is a function the learner writes in a notebook cell. `check_function(answer)` finds
the exercise by the function's name, calls the learner's function on each `Case` (on copies of
its arguments, so a function that changes its input cannot change the reference's), compares with
the reference's answer and stops at the first difference, saying which input failed, what came
back, what was expected, and a hint written for that case. A stub that still raises
`NotImplementedError` is not caught: the cell stops there, as a test of an unwritten function would,
but IPython shows it as one line saying what to write and where (`not_written`), not as a traceback
through this module.

The references are the kit's own code wherever it has one (the simulators, `torch`'s embedding
bag, the cost model, the window count), never the solutions the tests fill in
(`solutions/` at the repository's root), so a check holds the learner to the kit, not to a copy.
"""

from __future__ import annotations

import copy
import html
import math
import reprlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

PASS, FAIL = "\u2714", "\u2718"  # check mark, cross


@dataclass(frozen=True)
class Case:
    """One input to try: positional arguments, what it is about, and the hint if it fails."""

    args: tuple
    about: str  # "an empty bag", "capacity 1: only an immediate repeat hits"
    hint: str = ""  # said when this case fails (else the exercise's hint)
    shown: str | None = None  # how to print the arguments (default: a short repr of each)


@dataclass(frozen=True)
class Exercise:
    """A function to write: its name, cases, the reference and how answers are compared."""

    name: str
    signature: str  # "lru_hits(trace, capacity)": how the learner calls it
    cases: Callable[[], list[Case]]  # built on demand (some need a trace or a config)
    reference: Callable[..., Any]
    hint: str  # the general hint, for a case without its own
    compare: Callable[[Any, Any], str | None] = None  # None: `same_answer`

    def difference(self, got, expected) -> str | None:
        return (self.compare or same_answer)(got, expected)


@dataclass
class CheckResult:
    """What `check` found; shows itself in a notebook as one green or red block."""

    exercise: str
    passed: bool
    message: str
    hint: str = ""
    cases: int = 0
    details: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.passed

    def text(self) -> str:
        lines = [f"{PASS if self.passed else FAIL} {self.exercise}: {self.message}"]
        lines += self.details
        if self.hint and not self.passed:
            lines.append(f"Hint: {self.hint}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        colour, background = ("#1a7f37", "#e6f4ea") if self.passed else ("#b42318", "#fdecea")
        body = "<br>".join(html.escape(line) for line in self.text().splitlines())
        return (
            f'<div style="border-left:4px solid {colour};background:{background};padding:6px 10px;'
            f'font-family:monospace;font-size:12px;max-width:980px;white-space:pre-wrap">{body}</div>'
        )


EXERCISES: dict[str, Exercise] = {}


def register(*exercises: Exercise) -> None:
    for exercise in exercises:
        if exercise.name in EXERCISES:
            raise ValueError(f"two exercises are called {exercise.name!r}")
        EXERCISES[exercise.name] = exercise


def check_function(answer: Callable, exercise: str | None = None) -> CheckResult:
    """Run the learner's `answer` on every case of its exercise (found by the function's name, or
    `exercise`), stopping at the first that differs from the reference."""
    name = exercise or getattr(answer, "__name__", None)
    if name not in EXERCISES:
        known = ", ".join(sorted(EXERCISES))
        raise ValueError(
            f"no exercise called {name!r}: keep the function's name from the notebook "
            f"(exercises: {known}), or pass exercise='name'"
        )
    if not callable(answer):
        raise TypeError(f"check({name}) needs the function you wrote, got {type(answer).__name__}")
    ex = EXERCISES[name]
    cases = ex.cases()
    for number, case in enumerate(cases, start=1):
        failed = _try_case(ex, answer, case, f"case {number} of {len(cases)} ({case.about})")
        if failed is not None:
            failed.cases = number
            return failed
    return CheckResult(ex.name, True, f"all {len(cases)} cases pass", cases=len(cases))


def _try_case(ex: Exercise, answer: Callable, case: Case, where: str) -> CheckResult | None:
    """None when the learner's answer to `case` agrees with the reference's, else the failure.
    A reference that refuses the input (ValueError) expects the learner's function to refuse it too."""
    call = [f"call:     {ex.name}({case.shown or shown_args(case.args)})"]
    hint = case.hint or ex.hint
    try:
        expected, refused = ex.reference(*copy.deepcopy(case.args)), None
    except ValueError as error:
        expected, refused = None, error
    try:
        got = answer(*copy.deepcopy(case.args))
    except NotImplementedError as error:  # a stub: the cell stops, as the notebook says
        raise not_written(
            error,
            f"{ex.signature} is not written yet: write its body in this cell, "
            "in place of its `raise NotImplementedError`, then run the cell again",
        )
    except Exception as error:  # noqa: BLE001 - the learner's bug, reported as a hint
        if refused is not None and isinstance(error, ValueError):
            return None
        wanted = f"ValueError ({refused})" if refused is not None else short(expected)
        return CheckResult(
            ex.name,
            False,
            f"{where} raised {type(error).__name__}: {error}",
            hint,
            details=call + [f"expected: {wanted}"],
        )
    if refused is not None:
        return CheckResult(
            ex.name,
            False,
            f"{where}: returned {short(got)} instead of refusing the input",
            hint,
            details=call + [f"expected: ValueError ({refused})"],
        )
    problem = ex.difference(got, expected)
    if problem is None:
        return None
    return CheckResult(
        ex.name,
        False,
        f"{where}: {problem}",
        hint,
        details=call + [f"returned: {short(got)}", f"expected: {short(expected)}"],
    )


def not_written(error: NotImplementedError, advice: str) -> NotImplementedError:
    """The stub's own error, which IPython shows as one line, `advice` (IPython draws an exception
    that has a `_render_traceback_` with what that returns, in place of the traceback); anywhere
    else it is the same NotImplementedError, traceback and all."""
    line = f"{FAIL} {advice}"
    error._render_traceback_ = lambda: [line]
    return error


# ------------------------------------------------------------------------------ comparing
def same_answer(got, expected) -> str | None:
    """None when `got` is the expected answer: equal integers, arrays, booleans; floats within
    a relative 1e-9 (or absolute 1e-12); else what differs, in words."""
    if expected is None or isinstance(expected, (bool, np.bool_)):
        return None if got is expected or got == expected else f"returned {short(got)}, expected {short(expected)}"
    if isinstance(expected, (int, np.integer)):
        if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, np.integer)):
            if isinstance(got, (float, np.floating)) and float(got).is_integer() and int(got) == expected:
                return None
            return f"returned {short(got)} ({type(got).__name__}), expected the whole number {expected}"
        return None if int(got) == int(expected) else f"returned {got}, expected {expected}"
    if isinstance(expected, (float, np.floating)):
        if not isinstance(got, (int, float, np.integer, np.floating)) or isinstance(got, bool):
            return f"returned {short(got)} ({type(got).__name__}), expected a number near {expected:.6g}"
        return (
            None
            if math.isclose(float(got), float(expected), rel_tol=1e-9, abs_tol=1e-12)
            else f"returned {float(got):.6g}, expected {float(expected):.6g}"
        )
    return same_array(got, expected)


def same_array(got, expected, rtol: float = 0.0, atol: float = 0.0) -> str | None:
    """None when `got` has the expected shape and values (within rtol/atol); else the first
    element that differs, by its index."""
    expected = np.asarray(expected)
    try:
        got = np.asarray(got)
    except Exception:  # noqa: BLE001
        return f"returned {short(got)}, which is not an array"
    if got.shape != expected.shape:
        return f"returned an array of shape {got.shape}, expected shape {expected.shape}"
    if expected.size == 0:
        return None
    if np.issubdtype(expected.dtype, np.floating):
        close = np.isclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)
    else:
        close = got == expected
    if close.all():
        return None
    first = tuple(int(i) for i in np.argwhere(~close)[0])
    index = ", ".join(str(i) for i in first)
    return f"element [{index}] is {short(got[first])}, expected {short(expected[first])}"


def close_arrays(rtol: float, atol: float) -> Callable[[Any, Any], str | None]:
    """A `compare` for float arrays summed in an order the learner may choose."""
    return lambda got, expected: same_array(got, expected, rtol, atol)


# ------------------------------------------------------------------------------ showing
_SHORT = reprlib.Repr()
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 8
_SHORT.maxstring = 60
_SHORT.maxother = 60


def short(value) -> str:
    """A value in at most a line: arrays show their first few elements and their shape."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return short(value.item())
        flat = value.reshape(-1)
        head = ", ".join(short(v.item()) for v in flat[:8]) + (", ..." if flat.size > 8 else "")
        return f"array([{head}], shape {value.shape})" if value.ndim > 1 or flat.size > 8 else f"[{head}]"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    if isinstance(value, (np.integer, np.bool_)):
        return repr(value.item())
    return _SHORT.repr(value)


def shown_args(args: tuple) -> str:
    return ", ".join(short(a) for a in args)
