"""ScratchPipe's host stages in a process of their own, so Train has the trainer's process alone.

Threads in one CPython process take turns holding one lock (the GIL). With the scratchpad in host
memory (a CPU run) Train is Python too, and the host stages' threads slow it down: measured on
2 cores, Train took 5.7 ms a step beside them and 4.5 ms alone. So on a CPU run the planner's
process does every host stage, and the trainer's process only trains:

    trainer process                              host process (forked when train() starts)
                                                 Plan(b); Collect(b)
       ---- "Train(k) finished", each k ---->    wait for Train(b-D-1)
                                                 Write-back(b); Transfer(b); Insert(b)
       <--- Planned(b) and the stages' times --  (the arrays through the plan ring)
    Train(b)

The host tables and the scratchpads (rows, optimizer state, slot ids, dirty bits) are in shared
memory (scratchkit/shared_memory.py), made before the fork, so both processes work on the same
rows. Insert(b) waits for Train(b-D-1), and Train(b) for Insert(b). One batch's host stages run in
order, so a Collect always comes after every earlier Write-back (invariant 3 holds by
construction; the hazard lab's switch for it needs the threads).

Nothing lost if this process dies, even by SIGKILL (no handler runs then). A dirty row's newest
value must always be in memory that outlives this process until it is in the host tables. So
Write-back(b) copies the victims' rows *from their slots* straight into the shared host tables,
and only then does Insert(b) touch those slots, in an order that a kill at any instruction leaves
safe: first the slots' dirty bits are cleared (their rows are home now), then the fetched rows
are written, then the slots are given their new ids. At every moment a slot marked dirty holds
its id's newest row, so the trainer's flush after a death writes exactly the rows that are not
home yet (a victim whose write-back was cut off halfway is still dirty in its slot: written
again, whole). The alternative, staging the victims in shared memory for the trainer to drain,
would copy every victim twice; this order costs nothing, since these stages run one after
another here anyway. A board in shared memory says which stage of which batch runs, so the
trainer's error names where the process died.

Live checkpoints: the trainer may flush (`checkpoint()`, `embedding_weights()`) between two steps
while this process runs ahead. Write-back and Insert hold a lock both processes share (a
semaphore made before the fork) for each batch; the flush takes it too, so it sees the slots
only at a batch boundary. Collect and Plan need no lock: a missed id is in no slot, so no flush
writes its row while Collect reads it.

Stopping early (an error in either process, Ctrl-C, leaving the loop): the trainer closes its
pipe; the host process finishes the stage it is in and exits; the trainer then flushes the dirty
rows. An error in the host process comes back as the exception, named with its stage and batch.
"""
from __future__ import annotations

import multiprocessing
import signal
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from scratchkit.events import Stage
from scratchkit.shared_memory import shared_array
from scratchkit.trainers.pipeline import POLL, InFlight, PipelineError
from scratchkit.trainers.plan_ahead import PlanAhead, Planned, _widen, how_it_ended
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
        self.board = StageBoard()
        self.process = context.Process(
            target=_serve, name="scratchpipe-host", daemon=True,
            args=(trainer, plan_ahead, start, stop, plans_out, trained_in, self._trained, self._ring,
                  self.board))
        self.process.start()
        plans_out.close()
        trained_in.close()

    @contextmanager
    def exclusive(self):
        """Pause at a batch boundary, for a flush between steps: the host process holds the
        trainer's `slots_lock` through each batch's Write-back and Insert. A host process that
        died holding it can change nothing any more: then we go on without it."""
        lock = self.trainer.slots_lock
        while not lock.acquire(timeout=POLL):
            if not self.process.is_alive():
                yield
                return
        try:
            yield
        finally:
            lock.release()

    def wait_inserted(self, b: int, cancelled=lambda: False) -> InFlight:
        """Batch b, planned, collected and inserted by the host process: ready to train.
        KeyboardInterrupt once `cancelled()` says so while waiting (nothing of b was taken)."""
        trainer = self.trainer
        try:
            trainer._hook(Stage.PLAN, b)   # tests: a failure or Ctrl-C "in" Plan, on the trainer's side
        except Exception as error:
            raise PipelineError(Stage.PLAN, b, error) from error
        while not self._plans.poll(POLL) and self.process.is_alive():
            if cancelled():
                raise KeyboardInterrupt
        try:
            message = self._plans.recv()
        except EOFError:   # the pipe closed with nothing in it: the process is gone
            self.process.join(timeout=1.0)
            stage, batch = self.board.read()
            gone = RuntimeError(f"the host process {how_it_ended(self.process.exitcode)} while the "
                                f"trainer waited for batch {b}")
            raise PipelineError(stage, batch, gone) from None
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
            trainer.flush()                # every dirty slot holds its id's newest row (docstring)
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
           plans_out, trained_in, trainer_end, ring: PlanRing, board: "StageBoard") -> None:
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
        stage = Stage.PLAN
        try:
            board.write(stage, b)
            planned = plan_ahead.plan(b)
            item = InFlight(b, planned.batch, planned.tables)
            stage = Stage.COLLECT
            board.write(stage, b)
            t0 = time.perf_counter()
            trainer.collect(item, lambda: b - 1)   # every earlier Write-back has landed
            trainer._add_stage(Stage.COLLECT, b, t0, time.perf_counter())
            # Plan(b) counted batch b-D-1 as trained: its slots may be this batch's victims
            if not trained.reach(b - trainer.depth - 1):
                return
            with trainer.slots_lock:   # a live flush sees the slots between batches only
                for stage, run_stage in ((Stage.WRITE_BACK, _write_back_from_slots),
                                         (Stage.TRANSFER, _transfer), (Stage.INSERT, _insert)):
                    board.write(stage, b)
                    trainer._hook(stage, b)
                    t0 = time.perf_counter()
                    run_stage(trainer, item)
                    trainer._add_stage(stage, b, t0, time.perf_counter())
            message = ring.pack((_what_train_reads(planned, trainer.events.enabled), stage_times[:]),
                                halted=trained.has_stopped)
            stage_times.clear()
            if message is None:
                return
            plans_out.send(("plan", b, message))
        except BaseException as error:  # noqa: BLE001 - reported to the trainer, which raises it
            _send_error(plans_out, stage, b, error)
            return
        if trained.has_stopped():   # no use planning batches nobody will train
            return
    plans_out.close()


def _write_back_from_slots(trainer: ScratchPipeTrainer, item: InFlight) -> None:
    """Write-back(b) before Insert(b): the dirty victims' rows go from their slots straight into
    the host tables (the module docstring says why this order)."""
    tables = trainer.tables
    for t, (pad, plan) in enumerate(zip(trainer.scratchpads, item.tables)):
        slots, index = torch.from_numpy(plan.victim_slots), torch.from_numpy(plan.victim_ids)
        tables.weights[t].index_copy_(0, index, pad.rows.index_select(0, slots))
        if pad.state is not None:
            tables.state[t].index_copy_(0, index, pad.state.index_select(0, slots))


def _transfer(trainer: ScratchPipeTrainer, item: InFlight) -> None:
    """Transfer(b): on a CPU the collected rows are already where Insert reads them."""


def _insert(trainer: ScratchPipeTrainer, item: InFlight) -> None:
    """Insert(b), once the victims are home (the order inside: `ScratchPipeTrainer.insert_rows`)."""
    trainer.insert_rows(item, item.staged)


class StageBoard:
    """Which stage of which batch the host process is in, in shared memory: after a kill, the
    trainer reads where it died. Two int64s (stage number, batch), -1 before the first stage."""

    def __init__(self):
        self._cells = shared_array((2,), np.int64)
        self._cells[:] = -1

    def write(self, stage: Stage, b: int) -> None:
        self._cells[:] = (list(Stage).index(stage), b)

    def read(self) -> tuple[Stage, int]:
        code, b = (int(x) for x in self._cells)
        return (list(Stage)[code], b) if code >= 0 else (Stage.PLAN, b)


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
