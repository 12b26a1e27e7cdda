"""The host-process driver: every host stage in one forked process, so Train has the trainer's alone.

Threads in one CPython process take turns holding one lock (the GIL). With the scratchpad in host
memory (a CPU run) Train is Python too, and the host stages' threads slow it down: Train's
steps take longer beside them than alone. So on a CPU run one forked process
does every host stage of every batch, in order, and the trainer's process only trains:

    trainer process                              host process (forked when train() starts)
                                                 Plan(b); Collect(b)
       ---- "Train(k) finished", each k ---->    wait for Train(b-D-1)            (rule 3)
                                                 Write-back(b); Transfer(b); Insert(b)
       <--- Plan(b)'s decisions, stage times --  (forked.py: the ring and the pipe)
    Train(b)

The host tables and the row stores are in shared memory (made before the fork), so both
processes work on the same rows. Running each batch's stages in order keeps rule 2 by itself: a
Collect always comes after every earlier Write-back (so the hazard lab's switch for it needs the
threads driver). Write-back before Insert means a SIGKILL here loses no row (host_stages.py): the
trainer's flush after the death finds every dirty row in its slot.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scratchkit.scratchpipe.events import Stage
from scratchkit.scratchpipe.forked import ChildSide, ForkedStages, acquire_unless
from scratchkit.scratchpipe.host_stages import HostStages, InFlight
from scratchkit.scratchpipe.plan_ahead import PlanAhead, Planned
from scratchkit.scratchpipe.schedule import EVICTING_STAGES, PipelineError, Schedule


class HostProcess:
    """The trainer's side of one `train()` call whose host stages run in a forked process."""

    def __init__(
        self, stages: HostStages, schedule: Schedule, plan_ahead: PlanAhead, start: int, stop: int, clock, hook=None
    ):
        self.stages, self.schedule, self.clock, self.hook, self.stop_index = stages, schedule, clock, hook, stop
        body = stages_in_order(stages, schedule, plan_ahead, what_train_reads(clock.log.enabled))
        # the child maps the row stores in before its first stage: a fork leaves their pages to
        # fault in one by one (HostStages.map_in)
        self.forked = ForkedStages(
            "host",
            body,
            start,
            stop,
            plan_ahead.plan_bytes(start),
            slots=schedule.depth + 2,
            hook=hook,
            setup=stages.map_in,
        )

    def wait_inserted(self, b: int, cancelled=lambda: False) -> InFlight:
        """Batch b, planned, collected and inserted by the host process: ready to train."""
        if self.hook is not None:  # on the trainer's side, as Plan(b) arrives (tests use it)
            try:
                self.hook(Stage.PLAN, b)
            except Exception as error:
                raise PipelineError(Stage.PLAN, b, error) from error
        planned, times = self.forked.receive(b, cancelled)
        for entry in times:
            self.clock.record(*entry)
        self.clock.plans(planned.tables)
        return InFlight(b, planned.batch, planned.tables, inserted=True)

    def trained(self, b: int) -> None:
        if self.schedule.train_sent_for(b, self.stop_index):  # else no Insert of this call waits
            self.forked.trained(b)

    def exclusive(self):
        """A batch boundary of the host process, for a flush between steps: it holds the row
        stores' lock through each batch's Write-back, Transfer and Insert."""
        return _LockOrDead(self.stages.lock, self.forked.alive)

    def alive(self) -> bool:
        return self.forked.alive()

    def stop(self, finished: bool) -> None:
        """Wait for the host process to end: after every batch, or as soon as its stage is done."""
        self.forked.close(finished)


def stages_in_order(stages: HostStages, schedule: Schedule, plan_ahead: PlanAhead, handed=lambda p: p):
    """The body that runs batch b's every host stage, in order, where `child` runs each one:
    the forked process here, the trainer's own thread in inline.py. `handed`: what of Plan(b)
    goes on to Train."""

    def body(b: int, child: ChildSide) -> Planned | None:
        planned = child.stage(Stage.PLAN, b, plan_ahead.plan, b)
        item = InFlight(b, planned.batch, planned.tables)
        child.stage(Stage.COLLECT, b, stages.collect, item, b - 1)  # every earlier Write-back landed
        if not child.reach_trained(schedule.evict_waits_for(b)) or not child.hold(stages.lock):
            return None  # the trainer stopped
        try:  # under the lock: a live flush sees the slots between batches only
            for stage in EVICTING_STAGES:
                child.stage(stage, b, stages.evicting(stage), item)
        finally:
            stages.lock.release()
        return handed(planned)

    return body


def what_train_reads(trace: bool):
    """Planned(b) without the arrays only the host stages read, nor, with the event trace off,
    those only the trace reads: less to copy into the ring and out of it, every step."""
    none = np.empty(0, dtype=np.int64)

    def strip(planned: Planned) -> Planned:
        for plan in planned.tables:  # the counts of fetched and written-back rows stay
            plan.miss_ids = plan.miss_slots = plan.victim_ids = plan.victim_slots = none
            if not trace:
                plan.decision = replace(plan.decision, hit=np.empty(0, dtype=bool), victim_ids=none, victim_slots=none)
        return planned

    return strip


class _LockOrDead:
    """`with`: the lock, or, if its holder died holding it, nothing (it can change nothing now)."""

    def __init__(self, lock, holder_alive):
        self.lock, self.holder_alive, self.held = lock, holder_alive, False

    def __enter__(self):
        self.held = acquire_unless(self.lock, lambda: not self.holder_alive())
        return self

    def __exit__(self, *exc):
        if self.held:
            self.lock.release()
            self.held = False
        return False
