"""ScratchPipe's event trace: when each stage of each batch ran, and what Plan decided.

The pipeline visualizer replays this: which batch is in which stage at a moment, and the
scratchpad's slots (free, held by batch b, victim, just inserted). Recording is cheap (a few small
arrays per batch and table) and can be switched off for benchmarks (`EventLog(enabled=False)`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from scratchkit.device_work import DeviceWork


class Stage(str, Enum):
    """The stages of one batch, in pipeline order (scratchkit/scratchpipe/schedule.py)."""

    PLAN = "plan"  # host: unique ids, hits/misses, victims, holds, remap to slots
    COLLECT = "collect"  # host: gather missed rows (+ optimizer state) into a staging buffer
    WRITE_BACK = "write_back"  # host / copy: the dirty victims' rows from their slots into the host tables
    TRANSFER = "transfer"  # host -> device copy of the staging buffer
    INSERT = "insert"  # device: write the fetched rows into their slots
    TRAIN = "train"  # device: forward, backward, optimizer, all through slots; release holds


@dataclass(frozen=True)
class StageEvent:
    batch: int
    stage: Stage
    start: float  # seconds since the log's origin
    end: float


@dataclass(frozen=True)
class PlanDecision:
    """What Plan(b) decided for one table. Arrays are int64 NumPy, ids are table row ids."""

    batch: int
    table: int
    unique_ids: np.ndarray  # [u] the working set U_b, sorted
    slots: np.ndarray  # [u] slot of each unique id after planning
    hit: np.ndarray  # [u] bool: already resident when planned
    victim_ids: np.ndarray  # [v] ids evicted to make room (their rows get written back)
    victim_slots: np.ndarray  # [v] the slots they left (now given to misses of this batch)
    held_before: np.ndarray  # [h] slots held by batches in flight when Plan(b) ran

    @property
    def hits(self) -> int:
        return int(self.hit.sum())

    @property
    def misses(self) -> int:
        return int((~self.hit).sum())


@dataclass
class EventLog:
    """Thread-safe append-only log of stage events and plan decisions."""

    enabled: bool = True
    origin: float = field(default_factory=time.perf_counter)
    stages: list[StageEvent] = field(default_factory=list)
    plans: list[PlanDecision] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def stage(self, batch: int, stage: Stage, start: float, end: float) -> None:
        if self.enabled:
            with self._lock:
                self.stages.append(StageEvent(batch, stage, start - self.origin, end - self.origin))

    def plan(self, decision: PlanDecision) -> None:
        if self.enabled:
            with self._lock:
                self.plans.append(decision)

    def stages_of(self, batch: int) -> list[StageEvent]:
        return [e for e in self.stages if e.batch == batch]


class StageClock:
    """Where every stage's time goes: the event trace, and each batch's seconds per stage (the
    StepRecord of Train(b) gets batch b's: `take(b)`). Per batch, not per step: the pipeline runs
    later batches' Plan and Collect while Train(b) runs, and a short timed run would otherwise
    charge them to whichever step they ran beside, or to none. Thread-safe: the drivers' threads
    record into it."""

    def __init__(self, log: EventLog):
        self.log = log
        self._seconds: dict[int, dict[str, float]] = {}  # batch -> stage -> seconds
        self._work: dict[int, DeviceWork] = {}  # batch -> Plan's device work (device_work.py)
        self._lock = threading.Lock()

    def record(
        self, stage: Stage, batch: int, start: float, end: float, reading: float = 0.0, work: DeviceWork | None = None
    ) -> None:
        """`reading`: seconds of the stage spent taking batches from the batch loader (Plan takes
        them; the wait for one not made yet): the step's `data`, as every trainer counts it, not
        the stage's own time. `work`: the device work the stage counted (Plan's: its waits and
        launches)."""
        self.log.stage(batch, stage, start, end)
        with self._lock:
            if work is not None:
                self._work[batch] = work
            seconds = self._seconds.setdefault(batch, {})
            seconds[stage.value] = seconds.get(stage.value, 0.0) + end - start - reading
            if reading:
                seconds["data"] = seconds.get("data", 0.0) + reading

    def plans(self, tables) -> None:
        """Plan(b)'s decisions (one TablePlan per table) into the trace."""
        for plan in tables:
            self.log.plan(plan.decision)

    def take(self, batch: int) -> dict[str, float]:
        """Batch `batch`'s seconds per stage, every stage of it that ran (and forget them)."""
        with self._lock:
            return self._seconds.pop(batch, {})

    def take_work(self, batch: int) -> DeviceWork:
        """Plan(batch)'s device work (nothing counted: an empty one), and forget it."""
        with self._lock:
            return self._work.pop(batch, None) or DeviceWork()

    def clear(self) -> None:
        """Forget every batch's seconds (a call that stopped early leaves its planned batches)."""
        with self._lock:
            self._seconds.clear()
            self._work.clear()
