"""ScratchPipe's host stages in a process of their own, so Train has the trainer's process alone.

Threads in one CPython process take turns holding one lock (the GIL). With the scratchpad in host
memory (a CPU run) Train is Python too, and the host stages' threads slow it down: measured on
2 cores, Train took 5.7 ms a step beside them and 4.5 ms alone. So on a CPU run the planner's
process does every host stage, and the trainer's process only trains:

    trainer process                              host process (forked when train() starts)
                                                 Plan(b); Collect(b)
       ---- "Train(k) finished", each k ---->    wait for Train(b-D-1)
                                                 Transfer(b); Insert(b); Write-back(b)
       <--- Planned(b) and the stages' times --  (the arrays through the plan ring)
    Train(b)

The host tables and the scratchpads (rows, optimizer state, slot ids, dirty bits) are in shared
memory (scratchkit/shared_memory.py), made before the fork, so both processes work on the same
rows. The order is the threaded pipeline's (scratchkit/trainers/pipeline.py): Insert(b) waits for
Train(b-D-1), and Train(b) for Insert(b). One batch's host stages run in order, so a Collect
always comes after every earlier Write-back (invariant 3 holds by construction; the hazard lab's
switch for it needs the threads). Stage times travel back with the plan, into the trainer's trace.

Stopping early (an error in either process, Ctrl-C, leaving the loop): the trainer closes its
pipe; the host process finishes the stage it is in, puts back any victims it copied out, and
exits; the trainer then flushes the dirty rows. An error in the host process comes back as the
exception, named with its stage and batch.
"""
from __future__ import annotations

import multiprocessing
import signal
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from scratchkit.events import Stage
from scratchkit.trainers.pipeline import POLL, InFlight, PipelineError
from scratchkit.trainers.plan_ahead import PlanAhead, Planned, _widen
from scratchkit.trainers.plan_ring import PlanRing

if TYPE_CHECKING:   # the trainer imports this module; annotations only
    from scratchkit.trainers.scratchpipe import ScratchPipeTrainer

STOP_SECONDS = 30.0   # how long a stopping host process may take to finish its stage


class HostProcessRun:
    """The trainer's side of one `train()` call whose host stages run in a forked process."""

    def __init__(self, trainer: ScratchPipeTrainer, start: int, stop: int):
        self.trainer, self.start_index, self.stop_index = trainer, start, stop
        self.last_step_end = time.perf_counter()
        plan_ahead = PlanAhead(trainer.plan_setup(), trainer.source)
        context = multiprocessing.get_context("fork")
        self._plans, plans_out = context.Pipe(duplex=False)       # host process -> trainer
        trained_in, self._trained = context.Pipe(duplex=False)    # trainer -> host process
        _widen(plans_out)
        self._ring = PlanRing(context, plan_ahead.plan_bytes(start), slots=trainer.depth + 2, poll=POLL)
        self.process = context.Process(
            target=_serve, name="scratchpipe-host", daemon=True,
            args=(trainer, plan_ahead, start, stop, plans_out, trained_in, self._trained, self._ring))
        self.process.start()
        plans_out.close()
        trained_in.close()

    def wait_inserted(self, b: int) -> InFlight:
        """Batch b, planned, collected and inserted by the host process: ready to train."""
        trainer = self.trainer
        try:
            trainer._hook(Stage.PLAN, b)   # tests: a failure or Ctrl-C "in" Plan, on the trainer's side
        except Exception as error:
            raise PipelineError(Stage.PLAN, b, error) from error
        while not self._plans.poll(POLL) and self.process.is_alive():
            pass
        try:
            message = self._plans.recv()
        except EOFError:   # the pipe closed with nothing in it: the process is gone
            self.process.join(timeout=1.0)
            gone = RuntimeError(f"the host process exited (code {self.process.exitcode}) "
                                f"before sending batch {b}")
            raise PipelineError(Stage.PLAN, b, gone) from None
        if message[0] == "error":
            _, stage, batch, error = message
            raise PipelineError(stage, batch, error) from error
        _, index, packed = message
        if index != b:
            raise RuntimeError(f"the host process sent batch {index} where batch {b} was due")
        planned, stage_times = self._ring.unpack(packed)
        trainer._add_stage(Stage.PLAN, b, planned.start, planned.end)
        for plan in planned.tables:
            trainer.events.plan(plan.decision)
        for stage, start, end in stage_times:
            trainer._add_stage(stage, b, start, end)
        return InFlight(b, planned.batch, planned.tables)

    def trained(self, b: int) -> None:
        if b + self.trainer.depth + 1 >= self.stop_index:
            return   # no Insert of this call waits for Train(b)
        try:
            self._trained.send(b)
        except (BrokenPipeError, OSError):
            pass     # the host process is gone: waiting for the next batch says why

    def stop(self, finished: bool) -> None:
        """Wait for the host process; on an abort, let it finish its stage, then flush."""
        if not finished:
            self._trained.close()   # the host process sees the pipe close and stops
        self.process.join(timeout=None if finished else STOP_SECONDS)
        if self.process.is_alive():   # pragma: no cover - a stage stuck for STOP_SECONDS
            self.process.terminate()
            self.process.join()
        self._plans.close()
        self._ring.close()
        if not self._trained.closed:
            self._trained.close()
        if not finished:
            trainer = self.trainer
            trainer.flush()
            trainer._reset_scratchpads()   # planned-but-untrained state is dropped; refill on resume


class _TrainedSoFar:
    """The host process's view of how far Train has got: the trainer sends each finished batch."""

    def __init__(self, conn, upto: int):
        self.conn, self.upto, self.stopped = conn, upto, False

    def reach(self, b: int) -> bool:
        """Wait until Train(b) has finished; False if the trainer stopped first."""
        while self.upto < b and not self.stopped:
            try:
                self.upto = self.conn.recv()
            except EOFError:
                self.stopped = True
        return not self.stopped

    def has_stopped(self) -> bool:
        """Take in what has arrived without waiting; True once the trainer closed its end."""
        try:
            while not self.stopped and self.conn.poll(0):
                self.upto = self.conn.recv()
        except EOFError:
            self.stopped = True
        return self.stopped


def _serve(trainer: ScratchPipeTrainer, plan_ahead: PlanAhead, start: int, stop: int,
           plans_out, trained_in, trainer_end, ring: PlanRing) -> None:
    """The host process: every host stage of batches start..stop-1, in order."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the trainer's to handle
    trainer_end.close()   # our copy of the trainer's end, or we would never see it close
    # one thread, as in torch's DataLoader workers: OpenMP's pool does not survive a fork, and
    # this process is the second core's anyway
    torch.set_num_threads(1)
    stage_times: list[tuple[Stage, float, float]] = []
    # here the trainer's stage timer collects the times, which travel back with each plan
    trainer._add_stage = lambda stage, b, t0, t1: stage_times.append((stage, t0, t1))
    trained = _TrainedSoFar(trained_in, start - 1)
    for b in range(start, stop):
        stage, item = Stage.PLAN, None
        try:
            planned = plan_ahead.plan(b)
            item = InFlight(b, planned.batch, planned.tables)
            stage = Stage.COLLECT
            t0 = time.perf_counter()
            trainer.collect(item, lambda: b - 1)   # every earlier Write-back has landed
            trainer._add_stage(Stage.COLLECT, b, t0, time.perf_counter())
            stage = Stage.INSERT
            # Plan(b) counted batch b-D-1 as trained: its slots may be Insert(b)'s victims
            if not trained.reach(b - trainer.depth - 1):
                return
            trainer.transfer_and_insert(item, None)
            stage = Stage.WRITE_BACK
            t0 = time.perf_counter()
            trainer.write_back(item)
            trainer._add_stage(Stage.WRITE_BACK, b, t0, time.perf_counter())
            message = ring.pack((_what_train_reads(planned, trainer.events.enabled), stage_times[:]),
                                halted=trained.has_stopped)
            stage_times.clear()
            if message is None:
                return
            plans_out.send(("plan", b, message))
        except BaseException as error:  # noqa: BLE001 - reported to the trainer, which raises it
            if item is not None and item.victim_rows is not None:
                trainer.write_back_copied(item)   # victims copied out must reach the host tables
            _send_error(plans_out, stage, b, error)
            return
        if trained.has_stopped():   # no use planning batches nobody will train
            return
    plans_out.close()


def _what_train_reads(planned: Planned, trace: bool) -> Planned:
    """Planned(b) without the arrays only the host stages read, nor, with the event trace off,
    those only the trace reads: less to copy into the ring and out of it, every step."""
    none = np.empty(0, dtype=np.int64)
    for plan in planned.tables:   # the counts of fetched and written-back rows stay
        plan.miss_ids = plan.miss_slots = plan.victim_ids = plan.victim_slots = none
        if not trace:
            plan.decision = replace(plan.decision, hit=np.empty(0, dtype=bool), victim_ids=none,
                                    victim_slots=none)
    return planned


def _send_error(conn, stage: Stage, b: int, error: BaseException) -> None:
    try:
        conn.send(("error", stage, b, error))
    except (BrokenPipeError, OSError):
        pass                                      # the trainer stopped listening
    except Exception as failure:  # noqa: BLE001 - e.g. an exception that does not pickle
        conn.send(("error", stage, b, RuntimeError(f"{type(error).__name__}: {error} "
                                                   f"(and it could not be sent: {failure})")))
