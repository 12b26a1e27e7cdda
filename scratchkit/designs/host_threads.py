"""Hybrid's host embedding work on many threads: spread over the cores, capped by host memory.

The hybrid trainer's embedding stages run on the host (trainers/hybrid.py), in the table-batched
C++ loops (embedding/table_batched.cpp) on `TrainConfig.threads` threads: whole tables per thread,
and where there are more threads than tables each table cut into runs too (`runs_per_table`, the
loops' own rule: about RUNS_A_THREAD runs a thread), the forward's bags in runs of at least
`MIN_BAGS`, the update's rows of at least `MIN_ROWS`, and the backward of a table of
`SORTED_STABLY_FROM` lookups or more (sorted by the loop's radix sort, in runs) of at least
`MIN_LOOKUPS`; a shorter table's backward (introsort's order) stays one thread's. The threads take
a stage's pieces in rounds, so p pieces on t threads keep p / ceil(p / t) of them busy (16 runs on
14 threads: two rounds, no faster than 8 threads). So a stage priced for one core
(`Work.host_seconds`) takes, on `threads` threads,

    its calls' fixed costs + max(the rest of one core's seconds / min(cores, busy threads),
                                 its DRAM lines / the line rate)

(the fixed costs are the calling thread's, whatever the threads: Amdahl's serial part).

`threads`: on a GPU server, its `host_cores` (one GPU's share of the server's cores, as production
hybrids use them; `servers.HostShare` says which share); on this CPU (`device_is_host`), the run's
threads (`StepWork.host_threads`), running on at most the cores the run gets at once
(`co_run_cores`, calibration/co_run.py; else its cores). The second term is the cap: however many
cores, the host's memory system serves
only so many random 64 B lines a second (`Hardware.host_memory_line_rate`: a server's
figure is its channels per GPU x a channel's random-line rate, servers.py; None where not
known, as for a calibrated CPU: no cap). A step's DRAM lines, per table (`memory_lines`):

    embedding_forward    each distinct row read once (a repeat within the batch is in a cache)
    update               each distinct row, and its optimizer state, read and written back
    embedding_backward   none: it reads the pooled gradients, [B, T, dim], and writes the sums

The rest of a stage (the link, the device) is not the host's and is left as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scratchkit.designs.step import StepWork
from scratchkit.designs.work import FLOAT_BYTES, Work

HOST_EMBEDDING_STAGES = ("embedding_forward", "embedding_backward", "update")
LINE_BYTES = 64  # a cache line: what DRAM serves per random access
# the C++ loops' constants (table_batched.cpp, thread_pool.h; tests/test_backward_runs.py holds
# `runs_per_table` to the loops' own)
RUNS_A_THREAD = 4  # runs a thread a loop cuts its tables into, where there are more threads than tables
MIN_BAGS = 64  # fewest bags a thread's run of the forward takes
MIN_ROWS = 256  # fewest rows a thread's run of the SGD update takes
MIN_LOOKUPS = 8192  # fewest lookups a thread's run of the backward takes
SORTED_STABLY_FROM = 32768  # lookups from which torch sorts a table stably, so the loop may cut it
# (tbe_native.RADIX_MIN); a shorter table's order is introsort's, one thread's
HOST_MEMORY = "host memory"  # the name of the cap when it binds


def host_threads(w: StepWork, machine) -> float:
    """The cores the host's embedding work runs on at once (see the module note): on this CPU no
    more than its run's threads, nor than it gets at once where the machine's neighbours leave
    fewer cores than it has."""
    if machine.device_is_host:
        return max(1.0, min(loop_threads(w, machine), machine.host_cores, machine.co_run_cores or machine.host_cores))
    return machine.host_cores


def loop_threads(w: StepWork, machine) -> int:
    """The threads the loops are given: a GPU server's host cores, a CPU run's own threads."""
    return (w.host_threads or 1) if machine.device_is_host else machine.host_cores


def runs_per_table(threads: int, tables: int, size: float, least: int) -> int:
    """How many runs a loop cuts each of `tables` tables into on `threads` threads, a run at least
    `least` of a table's `size` (thread_pool.h's rule): 1 where the tables keep the threads busy."""
    if tables <= 0 or threads <= tables:
        return 1
    return max(1, min(-(-RUNS_A_THREAD * threads // tables), int(size) // least))


def pieces(stage: str, w: StepWork, threads: int) -> int:
    """How many pieces a stage's C++ loop makes for `threads` threads: its tables, each cut into
    runs (the forward's bags, the update's rows, the backward of a table sorted stably)."""
    T = w.num_tables
    if stage == "embedding_forward":
        return T * runs_per_table(threads, T, w.batch_size, MIN_BAGS)
    if stage == "update":
        return T * runs_per_table(threads, T, max(t.unique for t in w.tables), MIN_ROWS)
    return sum(
        runs_per_table(threads, T, t.lookups, MIN_LOOKUPS) if t.lookups >= SORTED_STABLY_FROM else 1 for t in w.tables
    )


def busy_threads(stage: str, w: StepWork, machine) -> float:
    """How many of the cores a stage keeps busy: its pieces taken by the loop's threads in rounds
    (p pieces on t threads: p / ceil(p / t) busy), on no more than the cores it runs on."""
    threads = loop_threads(w, machine)
    p = pieces(stage, w, threads)
    return min(host_threads(w, machine), p / math.ceil(p / threads))


def _lines(row_bytes: float) -> int:
    return math.ceil(row_bytes / LINE_BYTES) if row_bytes else 0


def memory_lines(stage: str, w: StepWork) -> float:
    """Random DRAM lines one step's `stage` moves (see the module note)."""
    u = sum(t.unique for t in w.tables)
    if stage == "embedding_forward":
        return u * _lines(w.row_bytes)
    if stage == "update":
        return 2 * u * (_lines(w.row_bytes) + _lines(w.state_width * FLOAT_BYTES))
    return 0.0


@dataclass(frozen=True)
class HostSpread:
    """One host stage on the threads: its seconds, and which limit set them."""

    cores_seconds: float  # its calls' fixed costs + the rest of one core's seconds over the threads
    memory_seconds: float  # its calls' fixed costs + its DRAM lines at the host's line rate

    @property
    def seconds(self) -> float:
        return max(self.cores_seconds, self.memory_seconds)

    @property
    def memory_bound(self) -> bool:
        return self.memory_seconds > self.cores_seconds


def calls_seconds(part: Work, machine) -> float:
    """Of `part`'s host seconds, its calls' fixed costs: the caller's, on one thread whatever the
    threads (the dispatch, the arguments' checks, waking the pool)."""
    return sum(count * machine.call(False, name) for name, count in part.host_calls)


def spread(stage: str, part: Work, w: StepWork, machine) -> HostSpread:
    """The host share of `part` (stage `stage` of hybrid) on `host_threads` threads, capped: the
    calls' fixed costs stay the caller's, the rest spreads."""
    threads = busy_threads(stage, w, machine)
    rate = machine.host_memory_line_rate
    memory = memory_lines(stage, w) / rate if rate else 0.0
    calls = calls_seconds(part, machine)
    return HostSpread(calls + (part.host_seconds(machine) - calls) / threads, calls + memory)


def hybrid_stage_seconds(
    parts: dict[str, Work], w: StepWork, machine
) -> tuple[dict[str, float], dict[str, HostSpread]]:
    """Hybrid's stages in seconds, its host embedding stages spread and capped; and each of those
    stages' HostSpread (which limit binds it)."""
    spreads = {s: spread(s, parts[s], w, machine) for s in HOST_EMBEDDING_STAGES if s in parts}
    seconds = {
        s: (
            part.seconds(machine) - part.host_seconds(machine) + spreads[s].seconds
            if s in spreads
            else part.seconds(machine)
        )
        for s, part in parts.items()
    }
    return seconds, spreads
