"""The cores a CPU run gets at once: how far ScratchPipe's two processes can overlap on this machine.

On a machine without a GPU, ScratchPipe runs its host stages (Plan, Collect, Write-back, Transfer,
Insert) in a forked process and Train in the trainer's (designs/scratchpipe.py). The rest of the calibration
prices each call in the calling thread's CPU time, what a core does whatever else runs; whether
the two processes get a core each at the same moments is another question, and a machine shared
with other work (a VM's other vCPUs, other users' processes, a scheduler that gives each session
a share rather than each process) may answer it with less than its `os.cpu_count()`.

On a shared VM, Train beside the host process can take far longer than inline while its CPU
time barely moves: the two sides have not slowed each other down, they have taken turns on the
cores. So the calibration measures the turns, with nothing of the kit's in it: one busy process
alone, then one on every core at once (forked, as the host process is), in alternating rounds,

    cores = n x (one's seconds alone) / (the mean of the n's seconds at once),  n = the cores

the median over the rounds, between 1 and n: n where each gets a core of its own, 1 where they
all take turns on one. The cost model gives ScratchPipe's two sides min(cores, 2) and a CPU run's
host threads (hybrid's loops) no more than `cores`. A worker is an interpreter loop touching no
memory: what the processes contend for beyond the cores (caches, the memory bus) is not in it,
nor a parallel loop's wait for its slowest thread. The figure is the machine's in the minutes it
was measured, and its neighbours' (docs/costmodel.md has the runs).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import Callable

import numpy as np

ROUNDS = (3, 7)  # alternating rounds, one alone then two at once (quick, full)
LOOP = 1_500_000  # iterations of a worker's loop: ~0.1 s of one core here

Run = Callable[[int], float]  # processes at once -> the mean of their seconds


def co_run_cores(quick: bool) -> tuple[float, str]:
    """-> (the cores a run's processes get at once, the source line), as the module note says."""
    cores = os.cpu_count() or 1
    if cores < 2:
        return 1.0, "one core: the processes take turns, nothing runs beside another"
    rounds = ROUNDS[not quick]
    with multiprocessing.get_context("fork").Pool(cores) as pool:
        got = cores_at_once(lambda n: float(np.mean(pool.map(busy, [LOOP] * n))), rounds, cores)
    source = (
        f"an interpreter loop of {LOOP:,} steps in a forked process alone against {cores} at "
        f"once: median of {rounds} alternating rounds of {cores} x (seconds alone) / (seconds "
        f"at once), within 1..{cores}"
    )
    return got, source


def cores_at_once(run: Run, rounds: int, cores: int) -> float:
    """Median over `rounds` of cores x run(1) / run(cores), each round alone first, within 1..cores."""
    ratios = []
    for _ in range(rounds):
        alone = run(1)
        ratios.append(cores * alone / run(cores))
    # outside 1..cores is the machine's noise: processes never get less than one's turn, nor more
    # cores than there are
    return min(max(float(np.median(ratios)), 1.0), float(cores))


def busy(steps: int) -> float:
    """A worker: `steps` of an interpreter loop, its wall seconds."""
    start, total = time.perf_counter(), 0
    for i in range(steps):
        total += i * i
    return time.perf_counter() - start
