"""Where ScratchPipe's host stages run for a `train()` call: the choice, and the driver for it.

    PlanIn.HOST_PROCESS  every host stage in one forked process (host_process.py): a CPU run's
                         default, so Train has the trainer's process (and its GIL) alone
    PlanIn.PROCESS       Plan in a forked process, the other host stages on threads (threads.py):
                         where the rows live on a device but fork is safe (the hazard lab's runs)
    PlanIn.THREAD        every host stage on threads: where fork is missing (Windows, macOS) or
                         unsafe (a machine with a CUDA device: `fork_is_safe`), and for calls too
                         short to be worth a process
    PlanIn.DEVICE        Plan and the row moves on the device (device_plan.py, device_moves.py),
                         issued from the threads driver's threads: the host keeps only the order
                         of the batches (`scratchpipe-device`). Where the device is the host's
                         CPU, it resolves to INLINE
    PlanIn.INLINE        every stage of a batch in the trainer's thread, just before its Train
                         (inline.py): nothing overlaps, nothing contends for the GIL
    PlanIn.STEP          the same, as the step's own work: on the trainer's stream, counted on
                         Train's path (`lru-device`, a cache filled on demand: a miss stalls the
                         step, device_moves.OnDemandStages)

Whichever runs them, the stages are the same (host_stages.py), ordered by the same rules
(schedule.py), and the plans are the same: Plan(b) depends on the data alone.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from enum import Enum

import torch

from scratchkit.choices import parse_choice
from scratchkit.scratchpipe.events import Stage
from scratchkit.scratchpipe.forked import ForkedStages
from scratchkit.scratchpipe.host_process import HostProcess
from scratchkit.scratchpipe.inline import InlineStages
from scratchkit.scratchpipe.plan_ahead import PlanAhead, Planned
from scratchkit.scratchpipe.threads import ThreadStages

# A call of fewer steps than this plans in a thread: forking costs a few milliseconds, more than
# planning a handful of batches, and `train_step()` (one step per call) would pay it every step.
MIN_STEPS_FOR_PROCESS = 8


class PlanIn(str, Enum):
    """Where Plan runs, and with it the other host stages. AUTO: the fastest that fits (`resolve`)."""

    AUTO = "auto"
    HOST_PROCESS = "host-process"  # Plan, Collect, Write-back, Transfer, Insert: one forked process
    PROCESS = "process"  # Plan in a forked process; the rest on the trainer's threads
    THREAD = "thread"  # every host stage on the trainer's threads
    DEVICE = "device"  # Plan and the row moves on the device, from the trainer's threads
    INLINE = "inline"  # every stage in the trainer's thread, one batch after another
    STEP = "step"  # the same, on the step's path: its stream, its counts (a cache filled on demand)

    @classmethod
    def parse(cls, name: "PlanIn | str") -> "PlanIn":
        return parse_choice(cls, name, "place ")

    def resolve(
        self, steps: int, *, host_rows: bool, ordered: bool, on_gpu: bool = False, fork_safe: bool | None = None
    ) -> "PlanIn":
        """The place for a call of `steps` steps. `host_rows`: the row stores and host tables are
        in shared host memory (a CPU run); `ordered`: the write-back-order hazard is off;
        `on_gpu`: the trainer's device is a GPU; `fork_safe`: a forked process may run the host
        stages here (None: `fork_is_safe()`)."""
        fork_safe = fork_is_safe() if fork_safe is None else fork_safe
        if self in (PlanIn.PROCESS, PlanIn.HOST_PROCESS) and not fork_safe:
            raise ValueError(
                f"where={self.value!r} forks a process for the host stages, and on a machine with "
                "a CUDA device a process forked once CUDA has started may hang (docs/gpu.md): "
                "use where='thread'"
            )
        if self is PlanIn.DEVICE and not on_gpu and ordered:
            return PlanIn.INLINE  # NumPy calls on threads only take turns with Train (inline.py)
        if self is PlanIn.INLINE and not ordered:
            raise ValueError(
                "where='inline' runs each batch's stages in order, so the "
                "write-back-order hazard cannot happen there: use 'thread'"
            )
        if self is PlanIn.STEP and not ordered:
            raise ValueError(
                "a cache filled on demand runs each batch's stages in order inside its step, so the "
                "write-back-order hazard cannot happen there: use the trainer 'scratchpipe'"
            )
        if self is PlanIn.HOST_PROCESS:
            if not host_rows:
                raise ValueError(
                    "where='host-process' needs the scratchpad in host memory, made "
                    "for it (a CPU device); on a GPU use 'process'"
                )
            if not ordered:
                raise ValueError(
                    "where='host-process' runs each batch's host stages in order, so "
                    "the write-back-order hazard cannot happen there: use 'thread'"
                )
        if self is not PlanIn.AUTO:
            return self
        if not fork_safe or steps < MIN_STEPS_FOR_PROCESS:
            return PlanIn.THREAD
        return PlanIn.HOST_PROCESS if host_rows and ordered else PlanIn.PROCESS


def fork_is_safe() -> bool:
    """Whether a forked process may run the host stages here: Linux's fork, and no CUDA device. A
    process forked once CUDA has started in its parent inherits the driver's state and whatever
    locks the parent's CUDA and loader threads held at the fork, and may hang in its first stage;
    so where torch sees a CUDA device every stage runs on threads (`PlanIn.THREAD`)."""
    forks = sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
    return forks and not torch.cuda.is_available()


def place_for(where: "PlanIn | str", *, own_planner: bool, plans_on_device: bool) -> PlanIn:
    """Where a trainer's Plan and host stages run, from its two choices (trainers/scratchpipe.py):
    `where`, a place, and `own_planner`, whether a plan function of your own replaces the kit's
    planner. `plans_on_device`: the trainer plans on the device (scratchpipe-device). A pair that
    cannot run together is refused, saying why."""
    where = PlanIn.parse(where)
    if where is PlanIn.STEP:
        raise ValueError(
            "where='step' runs every stage inside the step, a cache filled on demand: that is the "
            "trainer 'lru-device', not a place for ScratchPipe's pipeline"
        )
    if plans_on_device:
        if own_planner:
            raise ValueError(
                "own_planner replaces the host planner; scratchpipe-device plans on the device "
                "with the kit's: give your planner to the trainer 'scratchpipe'"
            )
        if where not in (PlanIn.AUTO, PlanIn.DEVICE):
            raise ValueError(
                f"where={where.value!r} plans on the host; scratchpipe-device plans on the device "
                "(where='device', from the trainer's threads, or inline where the device is the CPU): "
                "for a host place use the trainer 'scratchpipe'"
            )
        return PlanIn.DEVICE
    if where is PlanIn.DEVICE:
        raise ValueError(
            "where='device' plans on the device: that is the trainer 'scratchpipe-device' "
            "(make_trainer('scratchpipe-device', config)), not a place for 'scratchpipe'"
        )
    if own_planner:
        if where in (PlanIn.HOST_PROCESS, PlanIn.PROCESS):
            raise ValueError(
                f"own_planner runs in the trainer's process, where it was written (its prints, "
                f"its state and its mistakes stay in your notebook), so not where={where.value!r}: "
                "use where='thread' (the default with own_planner) or 'inline'"
            )
        return PlanIn.THREAD if where is PlanIn.AUTO else where
    return where


def start_driver(where: PlanIn, stages, schedule, plan_ahead: PlanAhead, start: int, stop: int, clock, hook=None):
    """The driver of batches start..stop-1, its stages started (`where`: resolved)."""
    if where is PlanIn.HOST_PROCESS:
        return HostProcess(stages, schedule, plan_ahead, start, stop, clock, hook)
    if where in (PlanIn.INLINE, PlanIn.STEP):
        return InlineStages(stages, schedule, plan_ahead, start, stop, clock, hook, on_step=where is PlanIn.STEP)
    plans = ForkedPlans(plan_ahead, start, stop, clock) if where is PlanIn.PROCESS else LocalPlans(plan_ahead, clock)
    return ThreadStages(stages, schedule, plans, start, stop, clock, hook)


class LocalPlans:
    """Plans made right here, on the threads driver's plan thread."""

    def __init__(self, plan_ahead: PlanAhead, clock):
        self.plan_ahead, self.clock = plan_ahead, clock

    def next(self, b: int, halted) -> Planned | None:
        if halted():
            return None
        start = time.perf_counter()
        planned = self.plan_ahead.plan(b)
        self.clock.record(Stage.PLAN, b, start, time.perf_counter(), planned.read_seconds, planned.work)
        return planned

    def close(self) -> None:
        pass


class ForkedPlans:
    """Plans made ahead by a forked planner process (forked.py), received in batch order."""

    def __init__(self, plan_ahead: PlanAhead, start: int, stop: int, clock):
        self.clock = clock
        body = lambda b, child: child.stage(Stage.PLAN, b, plan_ahead.plan, b)
        self.forked = ForkedStages("planner", body, start, stop, plan_ahead.plan_bytes(start), slots=4)

    def next(self, b: int, halted) -> Planned | None:
        try:
            planned, times = self.forked.receive(b, cancelled=halted)
        except KeyboardInterrupt:  # `halted`: the run is stopping
            return None
        for entry in times:
            self.clock.record(*entry)
        return planned

    def close(self) -> None:
        self.forked.close(finished=False)


__all__ = ["MIN_STEPS_FOR_PROCESS", "PlanIn", "place_for", "start_driver"]
