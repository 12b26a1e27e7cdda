"""ScratchPipe's Plan stage, run ahead of training: in a process of its own, or in a thread.
(On a CPU run that process does every host stage: scratchkit/trainers/host_process.py.)

Plan(b) depends only on the data and on the plans before it, never on how far Train has got:
it counts batches b-D..b-1 as in flight (their slots held) and b-D-1 and earlier as trained
(their slots dirty, and free to evict). The pipeline keeps that promise: Insert(b), the first
stage that touches a slot Plan(b) took, waits for Train(b-D-1). So the planner needs no message
from the trainer, and may run ahead in another process, on its own core and out of the trainer's
GIL, making exactly the plans it would make in a thread.

    trainer (rows, slot_ids, dirty)           planner (a host copy of the id -> slot map, the
                                              holds, the LRU clock, the batches ahead)
       ---- PlanSetup at the start of train() ---->
       <--- Planned(b), b = start .. stop-1, in order ----

The process is forked (Linux), so it starts in milliseconds and shares the data source without
copying it; it ignores Ctrl-C (the trainer handles that) and is stopped when `train()` returns.
Where fork is missing (Windows, macOS's default), or for a call too short to be worth a process,
the same `PlanAhead` runs in the trainer's planner thread.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

import numpy as np

from scratchkit.choices import parse_choice
from scratchkit.data.checks import check_batch
from scratchkit.planner import NextUses, TablePlan, TablePlanner, VictimPolicy, WorkingSets
from scratchkit.slot_map import SlotMap
from scratchkit.trainers.pipeline import POLL
from scratchkit.trainers.plan_ring import PlanRing

PIPE_BYTES = 4 << 20   # room for a few plans in the pipe; Linux caps it at fs/pipe-max-size
F_SETPIPE_SZ = 1031    # fcntl.F_SETPIPE_SZ, named in the fcntl module only from Python 3.10 on Linux

# A call of fewer steps than this plans in a thread: forking costs a few milliseconds, more than
# planning a handful of batches, and `train_step()` (one step per call) would pay it every step.
MIN_STEPS_FOR_PROCESS = 8


class PlanIn(str, Enum):
    """Where Plan runs, and with it the other host stages. AUTO: the fastest that fits (`resolve`)."""

    AUTO = "auto"
    HOST_PROCESS = "host-process"  # Plan, Collect, Transfer, Insert, Write-back: one forked process
    PROCESS = "process"            # Plan in a forked process; the rest on the trainer's threads
    THREAD = "thread"              # every host stage on the trainer's threads

    @classmethod
    def parse(cls, name: "PlanIn | str") -> "PlanIn":
        return parse_choice(cls, name, "planner place ")

    def resolve(self, steps: int, *, host_rows: bool, ordered: bool) -> "PlanIn":
        """The place for a call of `steps` steps. `host_rows`: the scratchpads and host tables are
        in shared host memory (a CPU run); `ordered`: the write-back-order hazard is off."""
        if self is PlanIn.HOST_PROCESS:
            if not host_rows:
                raise ValueError("planner='host-process' needs the scratchpad in host memory, made "
                                 "for it (a CPU device); on a GPU use 'process'")
            if not ordered:
                raise ValueError("planner='host-process' runs each batch's host stages in order, so "
                                 "the write-back-order hazard cannot happen there: use 'thread'")
        if self is not PlanIn.AUTO:
            return self
        forks = sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
        if not forks or steps < MIN_STEPS_FOR_PROCESS:
            return PlanIn.THREAD
        return PlanIn.HOST_PROCESS if host_rows and ordered else PlanIn.PROCESS


@dataclass(frozen=True)
class PlanSetup:
    """Everything the planner needs, taken from the trainer when `train()` starts."""

    table_sizes: tuple[int, ...]
    capacities: tuple[int, ...]
    depth: int
    policy: VictimPolicy
    holds: bool                        # the hazard lab's switch (invariant 4)
    horizon: int                       # how many batches ahead next uses are looked for
    record_events: bool                # False: leave out what only the event trace reads
    slot_ids: tuple[np.ndarray, ...]   # per table [capacity] id in each slot now, -1 free
    dirty: tuple[np.ndarray, ...]      # per table [capacity] bool, changed since filled
    last_trained: tuple[np.ndarray, ...]  # per table [capacity] batch that last trained it


class Seen(NamedTuple):
    """A batch the planner has read, with what Plan and the look-ahead need of it."""

    batch: object
    sets: list[tuple[np.ndarray, np.ndarray]]   # per table (unique ids, inverse)
    joined: np.ndarray                          # the working sets as NextUses ids


@dataclass
class Planned:
    """Plan(b): the batch, one TablePlan per table, and when the planning ran (perf_counter)."""

    index: int
    batch: object
    tables: list[TablePlan]
    start: float
    end: float


class PlanAhead:
    """Plans batches one after another on a host copy of the map (see the module docstring)."""

    def __init__(self, setup: PlanSetup, source):
        self.setup, self.source = setup, source
        self.planners = []
        for t, (n, capacity) in enumerate(zip(setup.table_sizes, setup.capacities)):
            slot_map = SlotMap(n, capacity)   # the map and its bookkeeping; the rows stay put
            resident = np.flatnonzero(setup.slot_ids[t] >= 0)
            slot_map.insert(setup.slot_ids[t][resident], resident)
            slot_map.mark_dirty(np.flatnonzero(setup.dirty[t]))
            planner = TablePlanner(t, slot_map, setup.policy, holds=setup.holds,
                                   record_held=setup.record_events)
            planner.last_trained[:] = setup.last_trained[t]
            self.planners.append(planner)
        self._in_flight: deque[tuple[int, list[np.ndarray]]] = deque()   # (b, slots per table)
        self._seen: dict[int, Seen] = {}   # batch index -> the batch and its working sets
        self._working_sets = [WorkingSets(n) for n in setup.table_sizes]
        self._next_uses = NextUses(setup.table_sizes)

    def _look(self, index: int) -> Seen:
        """Batch `index` and its working sets, made once: Plan(b) and the look-ahead share them."""
        if index not in self._seen:
            batch = self.source.batch(index)
            check_batch(batch, self.setup.table_sizes, index)   # an id out of range: never planned
            sets = [working_set(ids) for working_set, ids in zip(self._working_sets, batch.ids)]
            self._seen[index] = Seen(batch, sets, self._next_uses.joined([unique for unique, _ in sets]))
        return self._seen[index]

    def _retire(self, b: int, slots: list[np.ndarray]) -> None:
        """Train(b) has finished by the time the plan being made is used: its slots are dirty."""
        for planner, trained in zip(self.planners, slots):
            planner.slot_map.mark_dirty(trained)
            planner.trained(b, trained)
            if self.setup.holds:
                planner.slot_map.release(trained)

    def plan_bytes(self, b: int) -> int:
        """A generous bound on the bytes of arrays in Planned(b): the plan ring's slot size."""
        batch = self._look(b).batch
        # per lookup: the batch's id and lookup_slots, and at most ten arrays of the working set
        per_table = sum(12 * len(ids) + capacity + len(offsets) + 1 for ids, offsets, capacity in
                        zip(batch.ids, batch.offsets, self.setup.capacities))   # int64 elements
        return 2 * (8 * per_table + batch.dense.nbytes + batch.labels.nbytes)

    def plan(self, b: int) -> Planned:
        start = time.perf_counter()
        while self._in_flight and self._in_flight[0][0] < b - self.setup.depth:
            self._retire(*self._in_flight.popleft())          # b-D-1 and older: trained
        batch, sets, _ = self._look(b)
        for k in [k for k in self._seen if k < b]:
            del self._seen[k]
        stop = min(b + 1 + self.setup.horizon, len(self.source))
        urgencies: list[np.ndarray] = []

        def urgency(t: int) -> np.ndarray:
            """Table t's urgencies, from batches b+1 .. b+horizon: read (and made) only when some
            table must evict, so a filling scratchpad plans without looking ahead."""
            if not urgencies:
                urgencies.extend(self._next_uses([self._look(k).joined for k in range(b + 1, stop)]))
            return urgencies[t]

        furthest = self.setup.policy is VictimPolicy.FURTHEST
        tables = []
        for t, planner in enumerate(self.planners):
            unique, inverse = sets[t]
            tables.append(planner.plan(b, batch.ids[t], unique, inverse,
                                       (lambda t=t: urgency(t)) if furthest else None))
        self._in_flight.append((b, [p.decision.slots for p in tables]))
        return Planned(b, batch, tables, start, time.perf_counter())


class PlanFeed:
    """The trainer's end: `next(b)` gives Planned(b), from a forked process or made right here.

    `next` returns None once `halt` is set; an error in the planner process comes back as the
    exception it raised. `close()` stops the process (safe to call more than once).
    """

    def __init__(self, plan_ahead: PlanAhead, start: int, stop: int, where: PlanIn,
                 halt: threading.Event):
        self.plan_ahead, self.where, self.halt = plan_ahead, where, halt
        self.process = self._conn = self._ring = None
        if where is PlanIn.PROCESS:
            context = multiprocessing.get_context("fork")
            self._conn, child_end = context.Pipe(duplex=False)
            _widen(child_end)
            self._ring = PlanRing(context, plan_ahead.plan_bytes(start))
            self.process = context.Process(target=_serve, args=(plan_ahead, start, stop, child_end,
                                                                self._ring),
                                           name="scratchpipe-planner", daemon=True)
            self.process.start()
            child_end.close()

    def next(self, b: int) -> Planned | None:
        if self.process is None:
            return None if self.halt.is_set() else self.plan_ahead.plan(b)
        while not self._conn.poll(POLL):   # the pipeline's halt-flag period
            if self.halt.is_set():
                return None
        try:
            kind, index, payload = self._conn.recv()
        except EOFError:   # the pipe closed: the process is gone
            self.process.join(timeout=1.0)
            raise RuntimeError(f"the planner process {how_it_ended(self.process.exitcode)} "
                               f"before sending batch {b}") from None
        if kind == "error":
            raise payload
        if index != b:
            raise RuntimeError(f"the planner sent batch {index} where batch {b} was due")
        return self._ring.unpack(payload)

    def close(self) -> None:
        if self.process is not None:
            if self.process.is_alive():
                self.process.terminate()
            self.process.join()
            self._conn.close()
            self._ring.close()
            self.process = None


def how_it_ended(exitcode: int | None) -> str:
    """How a forked stage process ended: 'was killed by SIGKILL', 'exited with code 3', or
    'stopped answering' (still running)."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with code {exitcode}"


def _widen(conn) -> None:
    """Let a whole plan (hundreds of KB) sit in the pipe, so it crosses in one write and one read
    rather than in 64 KB turns of the two processes (Linux: F_SETPIPE_SZ; elsewhere nothing)."""
    try:
        import fcntl   # POSIX only; only a forked planner (Linux) gets here
        with open("/proc/sys/fs/pipe-max-size") as limit:
            size = min(int(limit.read()), PIPE_BYTES)
        fcntl.fcntl(conn.fileno(), F_SETPIPE_SZ, size)
    except (OSError, ValueError):
        pass


def _serve(plan_ahead: PlanAhead, start: int, stop: int, conn, ring: PlanRing) -> None:
    """The planner process: plan every batch in order and send it; the ring's free slots and the
    trainer's reading pace it. An error is sent back as the exception (or its text)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the trainer's to handle
    trainer = os.getppid()
    orphaned = lambda: os.getppid() != trainer   # the trainer died (SIGKILL): stop waiting for it
    for b in range(start, stop):
        try:
            packed = ring.pack(plan_ahead.plan(b), halted=orphaned)
            if packed is None:
                return
            message = ("plan", b, packed)
        except BaseException as error:  # noqa: BLE001 - reported to the trainer, which raises it
            message = ("error", b, error)
        try:
            conn.send(message)
        except (BrokenPipeError, OSError):
            return                                  # the trainer stopped listening
        except Exception as error:  # noqa: BLE001 - e.g. an exception that does not pickle
            failure = RuntimeError(f"{type(message[2]).__name__}: {message[2]} "
                                   f"(and it could not be sent: {error})")
            conn.send(("error", b, failure))
        if message[0] == "error":
            return
    conn.close()

