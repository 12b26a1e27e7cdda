"""Host stages in a forked process: the one way the kit forks one, hears from it, and sees it die.

Both process drivers use it: the "process" mode forks a planner (Plan only), the "host-process"
mode forks every host stage (host_process.py). The child runs `body(b, child)` for each batch in
order; `body` returns what the trainer needs of batch b (None: stop), and the trainer's side
takes it with `receive(b)`:

    trainer                                         forked process
                                                    body(b): its stages, each timed and named
       ---- "Train(k) finished" (if it listens) -->     on the board (child.stage)
       <--- batch b's result, the stages' times ---     the arrays through the plan ring

The result's arrays cross through a ring of shared memory (ring.py), the rest through a pipe. The
process is forked, so it starts in milliseconds and shares the data source without copying it;
it ignores Ctrl-C (the trainer's to handle) and stops when the trainer closes its end (or dies:
a SIGKILLed trainer closes every pipe, and an orphan's parent changes).

Errors: an exception in `body` comes back as a PipelineError naming the stage on the board and
the batch. A death (a crash by signal, a SIGKILL) shows as the pipe closing with nothing in it;
the board, in shared memory, still says which stage of which batch the process was in.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Callable

import numpy as np
import torch

from scratchkit.embedding.shared_memory import shared_array
from scratchkit.scratchpipe.events import Stage
from scratchkit.scratchpipe.ring import PlanRing, widen_pipe
from scratchkit.scratchpipe.schedule import PipelineError

POLL = 0.05  # seconds a wait sleeps between looks at whether to give up
STOP_SECONDS = 30.0  # how long a stopping process may take to finish the stage it is in


class StageBoard:
    """Which stage of which batch the forked process is in, in shared memory: after a kill, the
    trainer reads where it died. Two int64s (stage number, batch); -1 before the first stage."""

    def __init__(self):
        self._cells = shared_array((2,), np.int64)
        self._cells[:] = -1

    def write(self, stage: Stage, b: int) -> None:
        self._cells[:] = (list(Stage).index(stage), b)

    def read(self) -> tuple[Stage, int]:
        code, b = (int(x) for x in self._cells)
        return (list(Stage)[code], b) if code >= 0 else (Stage.PLAN, b)


class ChildSide:
    """What `body` gets in the forked process: a way to run a stage, and to wait for Train."""

    def __init__(self, board: StageBoard, trained_conn, hook, start: int):
        self.board, self.hook, self._conn = board, hook, trained_conn
        self.trained_upto, self.stopped = start - 1, False
        self.times: list[tuple[Stage, int, float, float]] = []  # travel back with the result

    def stage(self, stage: Stage, b: int, run: Callable, *args):
        """Run one stage of batch b: on the board, the test hook (Plan's runs where Plan(b)
        arrives, on the trainer's side), timed."""
        self.board.write(stage, b)
        if self.hook is not None and stage is not Stage.PLAN:
            self.hook(stage, b)
        t0 = time.perf_counter()
        result = run(*args)
        reading = getattr(result, "read_seconds", 0.0)  # Plan's: the wait for its batches
        self.times.append((stage, b, t0, time.perf_counter(), reading))
        return result

    def reach_trained(self, b: int) -> bool:
        """Wait until Train(b) has finished; False if the trainer stopped first."""
        while self.trained_upto < b and not self.stopped:
            try:
                self.trained_upto = self._conn.recv()
            except EOFError:
                self.stopped = True
        return not self.stopped

    def hold(self, lock) -> bool:
        """Take `lock`, the row stores' (the trainer takes it too, for a live checkpoint's flush);
        False, not holding it, if the trainer stopped first."""
        return acquire_unless(lock, self.has_stopped)

    def has_stopped(self) -> bool:
        """Take in what has arrived without waiting; True once the trainer is gone."""
        try:
            while not self.stopped and self._conn.poll(0):
                self.trained_upto = self._conn.recv()
        except EOFError:
            self.stopped = True
        return self.stopped


class ForkedStages:
    """The trainer's end of a forked process that runs `body` for batches start..stop-1."""

    def __init__(
        self,
        name: str,
        body: Callable[[int, ChildSide], object],
        start: int,
        stop: int,
        slot_bytes: int,
        slots: int,
        hook=None,
        setup: Callable[[], object] | None = None,
    ):
        """`setup`: run once in the forked process before its first batch, on no stage's clock."""
        self.name = name
        context = multiprocessing.get_context("fork")
        self._results, results_out = context.Pipe(duplex=False)  # child -> trainer
        trained_in, self._trained = context.Pipe(duplex=False)  # trainer -> child
        widen_pipe(results_out)
        self.ring = PlanRing(context, slot_bytes, slots=slots, poll=POLL)
        self.board = StageBoard()
        self.process = context.Process(
            target=_serve,
            name=f"scratchpipe-{name}",
            daemon=True,
            args=(body, start, stop, results_out, trained_in, self._trained, self.ring, self.board, hook, setup),
        )
        self.process.start()
        results_out.close()
        trained_in.close()

    def receive(self, b: int, cancelled: Callable[[], bool] = lambda: False):
        """(batch b's result, its stage times). PipelineError for an error or death there;
        KeyboardInterrupt once `cancelled()` while waiting."""
        while not self._results.poll(POLL):
            if cancelled():
                raise KeyboardInterrupt
            if not self.process.is_alive() and not self._results.poll(0):
                break
        try:
            message = self._results.recv()
        except EOFError:  # the pipe closed with nothing in it: the process is gone
            self.process.join(timeout=1.0)
            stage, batch = self.board.read()
            gone = RuntimeError(
                f"the {self.name} process {how_it_ended(self.process.exitcode)} while the trainer waited for batch {b}"
            )
            raise PipelineError(stage, batch, gone) from None
        if message[0] == "error":
            _, stage, batch, error = message
            raise PipelineError(stage, batch, error) from error
        _, index, packed = message
        if index != b:
            raise RuntimeError(f"the {self.name} process sent batch {index} where batch {b} was due")
        return self.ring.unpack(packed)

    def trained(self, b: int) -> None:
        """Tell the process Train(b) has finished (it may be waiting for it)."""
        try:
            self._trained.send(b)
        except (BrokenPipeError, OSError):
            pass  # the process is gone: the next receive says why

    def alive(self) -> bool:
        return self.process.is_alive()

    def close(self, finished: bool) -> None:
        """Let the process finish the stage it is in and exit (at once if `finished`)."""
        if not self._trained.closed:
            self._trained.close()  # the process sees the pipe close and stops
        self.process.join(timeout=None if finished else STOP_SECONDS)
        if self.process.is_alive():  # pragma: no cover - a stage stuck for STOP_SECONDS
            self.process.terminate()
            self.process.join()
        self._results.close()
        self.ring.close()


def acquire_unless(lock, gone: Callable[[], bool]) -> bool:
    """Take `lock`, shared by the trainer and its forked process; False, not holding it, once
    `gone()`: the other side may have died holding it, and a plain acquire would wait for ever."""
    while not lock.acquire(timeout=POLL):
        if gone():
            return False
    return True


def how_it_ended(exitcode: int | None) -> str:
    """'was killed by SIGKILL', 'exited with code 3', or 'stopped answering' (still running)."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with code {exitcode}"


def _serve(
    body, start: int, stop: int, results_out, trained_in, trainer_end, ring: PlanRing, board: StageBoard, hook, setup
) -> None:
    """The forked process: `body` for each batch in order, each result sent as it is ready."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle
    trainer_end.close()  # our copy of the trainer's end, or we would never see it close
    # one thread, as in torch's DataLoader workers: OpenMP's pool does not survive a fork, and
    # this process is the second core's anyway
    torch.set_num_threads(1)
    parent = os.getppid()
    child = ChildSide(board, trained_in, hook, start)
    orphaned = lambda: child.has_stopped() or os.getppid() != parent  # the trainer stopped or died
    for b in range(start, stop):
        try:
            if setup is not None and b == start:
                setup()
            result = body(b, child)
            if result is None:
                return
            packed = ring.pack((result, child.times[:]), halted=orphaned)
            child.times.clear()
            if packed is None:
                return
            results_out.send(("result", b, packed))
        except BaseException as error:  # noqa: BLE001 - reported to the trainer, which raises it
            _send_error(results_out, *board.read(), error)
            return
        if child.has_stopped():  # no use going on with batches nobody will train
            return
    results_out.close()


def _send_error(conn, stage: Stage, b: int, error: BaseException) -> None:
    try:
        conn.send(("error", stage, b, error))
    except (BrokenPipeError, OSError):
        pass  # the trainer stopped listening
    except Exception as failure:  # noqa: BLE001 - e.g. an exception that does not pickle
        conn.send(
            ("error", stage, b, RuntimeError(f"{type(error).__name__}: {error} (and it could not be sent: {failure})"))
        )
