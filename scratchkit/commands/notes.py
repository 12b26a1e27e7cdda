"""What a command says beside its output, a line each on stderr (so that --json stays JSON):
data shorter than the steps asked for, lines skipped and rows dropped while loading, and figures
timed too briefly to leave start-up costs behind.

A command on data shorter than asked runs on the batches there are and says so, rather than
refusing: a first file of a few hundred rows holds a few batches, and the README's commands must
run on it as written.
"""

from __future__ import annotations

import sys

# Timed steps after a warm-up below which a bench's figures still carry start-up costs (first
# allocations, caches filling, the pipeline starting): --quick times this many.
STEADY_STEPS = 10


def note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr)


def batches_held(source) -> str:
    return f"the data has {len(source)} batches of {source.batch_size}"


def fit_steps(source, wanted: int, command: str) -> int:
    """`wanted` steps, or as many as `source` has batches (said in a note) when it has fewer."""
    if wanted <= len(source):
        return wanted
    note(f"{batches_held(source)}, fewer than --steps {wanted}: {command} runs on those {len(source)}")
    return len(source)


def fit_bench(source, steps: int, warmup: int) -> tuple[int, int]:
    """(timed steps, warm-up steps) that fit `source` (`bench_length`), said in a note when
    anything shrank."""
    kept_steps, kept_warmup = bench_length(len(source), steps, warmup)
    if (kept_steps, kept_warmup) != (steps, warmup):
        note(
            f"{batches_held(source)}, fewer than the {warmup} warm-up and {steps} timed steps "
            f"asked for: bench runs {kept_warmup} warm-up and {kept_steps} timed steps"
        )
    return kept_steps, kept_warmup


def bench_length(have: int, steps: int, warmup: int) -> tuple[int, int]:
    """(timed steps, warm-up steps) that fit `have` batches: the warm-up shrinks first, but one
    warm-up step stays where there are two batches or more (the first step carries most of the
    start-up cost), then the timed steps take the rest."""
    if steps + warmup <= have:
        return steps, warmup
    kept_warmup = min(warmup, max(have - steps, 1 if have > 1 else 0))
    return min(steps, have - kept_warmup), kept_warmup


def startup_note(steps: int, warmup: int) -> None:
    """Say that the figures include start-up costs when the timed steps are few or come first."""
    if warmup > 0 and steps >= STEADY_STEPS:
        return
    what = f"{steps} timed step{'s' * (steps != 1)}" + (" and no warm-up" if warmup == 0 else "")
    note(
        f"{what}: the figures include start-up costs (first allocations, caches filling); "
        f"{STEADY_STEPS} or more timed steps after a warm-up give steady-state figures"
    )


def load_note(report, skipping: bool) -> None:
    """What loading left out: the lines skipped (always said under --bad-lines skip) and the
    rows of the incomplete last batch (said when there are any)."""
    parts = []
    if skipping:
        lines = report.rows_skipped
        parts.append(f"{lines:,} malformed line{'s' * (lines != 1)} skipped (--bad-lines skip)")
    if report.rows_dropped:
        parts.append(f"{report.rows_dropped:,} rows of the incomplete last batch left out")
    if parts:
        note(f"{report.source}: {', '.join(parts)}; {report.rows_in_batches:,} rows in batches of {report.batch_size}")
