"""The co-run slowdown: ScratchPipe's two sides on a CPU run slower together than each alone.

On a machine without a GPU, ScratchPipe runs its host stages (Plan, Collect, Write-back, Transfer,
Insert) in a forked process and Train in the trainer's, each on a core of its own (costmodel.py).
The rest of the calibration times every call alone on an idle machine, so it prices each side
as if the other were not there. But the two share the last-level cache and the memory bus, and
on a virtual machine whatever the hypervisor does with two busy vCPUs: on a 2-core VM Plan
took about twice as long a step inside the trainer as the calibration priced it alone.

So the calibration measures it where it arises: the same ScratchPipe run (the `small` profile,
the same batches) with its host stages forked beside Train (PlanIn.HOST_PROCESS, a CPU run's
default) and with every stage inline in the trainer's thread, one after another
(PlanIn.INLINE: nothing runs beside anything), in alternating rounds:

    host   (the host stages' seconds a step, forked) / (the same, inline)
    train  (Train's seconds a step, forked) / (the same, inline)

each the median over the rounds. Inline, Plan still follows a Train that evicted its maps from
the caches, as it does forked: what the ratio leaves is the running at once. With one core the
two sides take turns instead (the model's "shared cores"), so nothing is measured: 1.0.

The figure is the machine's and its neighbours': on a 2-core VM one round's ratio moves from
one second to the next, so the median over the rounds is what is kept (docs/costmodel.md has the
runs). Stage by stage it differs more (docs/costmodel.md, "ScratchPipe's two sides beside each
other"); one factor for every host stage does not carry that.
"""
from __future__ import annotations

import os
from typing import Callable

import numpy as np

from scratchkit.scratchpipe.events import Stage
from scratchkit.scratchpipe.schedule import HOST_STAGES

# the stages a CPU run's forked host process runs: Plan and the host stages after it
HOST_PROCESS_STAGES = tuple(stage.value for stage in (Stage.PLAN, *HOST_STAGES))
ROUNDS = (2, 5)           # alternating rounds, inline then forked (quick, full)
STEPS = (16, 48)          # timed steps a run, after WARMUP
WARMUP = 8
PROFILE = "small"

Run = Callable[[bool], tuple[float, float]]    # forked? -> (host stages' seconds, Train's) a step


def co_run_slowdowns(quick: bool) -> tuple[float, float, str]:
    """-> (the host stages' factor, Train's factor, the source line), as the module note says."""
    if (os.cpu_count() or 1) < 2:
        return 1.0, 1.0, "one core: the two sides take turns, nothing runs beside another"
    rounds, steps = ROUNDS[not quick], STEPS[not quick]
    host, train = slowdowns(scratchpipe_run(steps), rounds)
    source = (f"ScratchPipe on the {PROFILE!r} profile, {steps} steps after {WARMUP}, its host stages forked "
              f"beside Train against every stage inline: median of {rounds} alternating rounds of "
              f"(seconds a step forked) / (inline)")
    return host, train, source


def slowdowns(run: Run, rounds: int) -> tuple[float, float]:
    """Medians over `rounds` of forked / inline, each round inline first: (host, train), at least 1."""
    ratios = []
    for _ in range(rounds):
        (host_inline, train_inline), (host_forked, train_forked) = run(False), run(True)
        ratios.append((host_forked / host_inline, train_forked / train_inline))
    host, train = np.median(ratios, axis=0)
    # below 1 is the machine's noise (one round's ratio went 0.7-1.85 here): nothing runs faster
    # for a busy neighbour, and a factor under 1 would price ScratchPipe faster than alone
    return max(float(host), 1.0), max(float(train), 1.0)


def scratchpipe_run(steps: int) -> Run:
    """One ScratchPipe run of `steps` (after the warm-up) on the same batches each time, on the
    CPU (where a GPU is: the factor is a CPU run's, the only one it prices)."""
    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.profiles import get_profile
    from scratchkit.scratchpipe.drivers import PlanIn
    from scratchkit.trainers.scratchpipe import ScratchPipeTrainer

    config = get_profile(PROFILE)
    source = SyntheticSource(config.data)

    def run(forked: bool) -> tuple[float, float]:
        planner = PlanIn.HOST_PROCESS if forked else PlanIn.INLINE
        with ScratchPipeTrainer(config, source=source, device="cpu", planner=planner,
                                record_events=False) as trainer:
            records = list(trainer.train(WARMUP + steps))[WARMUP:]
        per_step = lambda stage: sum(r.stage_seconds.get(stage, 0.0) for r in records) / steps
        return sum(per_step(s) for s in HOST_PROCESS_STAGES), per_step("train")
    return run
