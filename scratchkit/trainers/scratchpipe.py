"""`scratchpipe`: a look-forward scratchpad filled by a pipeline, so Train always hits.

Per batch b the stages run in order; stages of different batches overlap (DESIGN.md section 3):

    Plan(b)       working set, hits/misses, victims, holds, ids -> slots (scratchkit/planner.py)
    Collect(b)    gather missed rows (+ optimizer state) from the host tables
    Transfer(b)   staging buffer -> device, victims' rows -> host (a side CUDA stream on a GPU)
    Insert(b)     fetched rows into their slots (the victims' rows are out by now)
    Write-back(b) victims' rows -> host tables
    Train(b)      forward/backward/update through slots only, in the caller's thread

Plan(b) counts batches b-D..b-1 as in flight (D = look-ahead depth) and never waits for Train, so
it runs ahead (scratchkit/trainers/plan_ahead.py); Insert(b), the first stage to touch the slots
Plan(b) took, waits for Train(b-D-1), so at most D+1 batches hold slots. Where the host stages run
(`planner=`, a `PlanIn`):

- "host-process", a CPU run's default: all five in one forked process, the host tables and the
  scratchpads in shared memory, so the trainer's process (and its GIL) only trains; there
  Write-back(b) runs before Insert(b), so a SIGKILL of that process loses no row
  (scratchkit/trainers/host_process.py);
- "process", a GPU run's default: Plan in a forked process; Collect, Transfer+Insert and
  Write-back on worker threads with bounded queues between them (scratchkit/trainers/pipeline.py);
- "thread": as "process", with Plan on a thread too (no fork; calls under 8 steps).

The planner keeps the id -> slot map; the trainer's scratchpads keep the rows, which id each slot
holds, and the dirty bits. An exception in any stage, a dead host process, a KeyboardInterrupt, or
leaving the `train()` loop early stops the stages, finishes the write-backs of the victims already
copied out, flushes the dirty rows, and leaves the host tables complete: equal to the baseline
trained on the batches whose Train finished. `checkpoint()`, `flush()` and `embedding_weights()`
are exact between the steps of a running loop too: they wait for a batch boundary of the stages.

The hazard lab (`Hazards`) can switch off the holds or the write-back ordering, to watch the result
diverge and see which invariant broke (`StepRecord.hits` < lookups: invariant 1; stale reads).
"""
from __future__ import annotations

import copy
import multiprocessing
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch

from scratchkit.data.checks import BadBatchError
from scratchkit.events import EventLog, Stage
from scratchkit.kernels.engine import EngineKind
from scratchkit.optim import apply_update, embedding_backward
from scratchkit.planner import VictimPolicy, check_capacities, minimum_capacities
from scratchkit.scratchpad import Scratchpad
from scratchkit.trainers.base import HostTablesTrainer, StepRecord, pooled_lookup
from scratchkit.trainers.host_process import HostProcessRun
from scratchkit.trainers.interrupt import InterruptFlag
from scratchkit.trainers.pipeline import InFlight, PipelineError, PipelineRun
from scratchkit.trainers.plan_ahead import PlanAhead, PlanFeed, PlanIn, PlanSetup

__all__ = ["Hazards", "PipelineError", "ScratchPipeTrainer"]

@dataclass(frozen=True)
class Hazards:
    """The hazard lab: each switch, when False, removes one safety rule. Both True = correct."""

    holds: bool = True             # invariant 4: never evict a slot a batch in flight still needs
    write_back_order: bool = True  # invariant 3: collect an evicted id only after its write-back


class ScratchPipeTrainer(HostTablesTrainer):
    name = "scratchpipe"

    def __init__(self, config, source=None, device=None, *, hazards: Hazards = Hazards(),
                 horizon: int | None = None, engine: str = "auto", record_events: bool = True,
                 stage_hook: Callable[[Stage, int], None] | None = None,
                 planner: PlanIn | str = PlanIn.AUTO):
        super().__init__(config, source, device)
        cache = config.cache
        self.depth = cache.depth
        self.policy = VictimPolicy.parse(cache.victim_policy)
        self.hazards = hazards
        # how far Plan looks for victims' next use: beyond D, since the dataset is all there
        self.horizon = horizon if horizon is not None else 4 * (self.depth + 1)
        self.engine = engine
        self.plan_in = PlanIn.parse(planner)      # where the host stages run (plan_ahead.PlanIn)
        # a CPU run may give its host stages a process: rows and tables in shared memory for it
        self.host_rows = not self.dev.is_cuda and self.plan_in in (PlanIn.AUTO, PlanIn.HOST_PROCESS)
        if self.host_rows:
            self.tables.share()
        self.stage_hook = stage_hook            # tests: raise or sleep at a given stage and batch
        self.events = EventLog(enabled=record_events)
        self.capacities = [cache.capacity_for(n) for n in config.data.table_sizes]
        self._times_lock = threading.Lock()     # the stage times, added from several threads
        self._stage_seconds: dict[str, float] = {}
        self._run: PipelineRun | HostProcessRun | None = None   # the train() call running now
        self._reset_scratchpads()

    # --- setup ----------------------------------------------------------------------------------
    def _reset_scratchpads(self) -> None:
        width = self.config.optimizer.state_width(self.config.model.dim)
        # All the trainer asks of its scratchpads' kernels is Insert's scatter (Train uses torch
        # ops through the slots). On a CPU the NumPy twin does that fastest: 38 us for 1,700 rows
        # of 16 floats against the host build's 160 us (each kernel launch checks its arguments).
        engine = EngineKind.TWIN.value if self.engine == "auto" and self.device.type == "cpu" else self.engine
        # the rows; the id -> slot map is the planner's (keeps_map=False)
        self.scratchpads = [Scratchpad(n, c, self.config.model.dim, state_width=width,
                                       engine=engine, device=str(self.device), keeps_map=False,
                                       shared=self.host_rows)
                            for n, c in zip(self.config.data.table_sizes, self.capacities)]
        # per table [capacity]: the batch that last trained each slot (the planner's LRU clock)
        self.last_trained = [np.full(c, -1, dtype=np.int64) for c in self.capacities]
        # Insert and Write-back hold it for a batch, a flush for its length: so a flush between
        # steps sees the slots at a batch boundary, in this process or the forked host process
        # (a semaphore made before the fork: a threading.Lock would not be shared). New with the
        # scratchpads: a process killed while holding the old one never releases it.
        self.slots_lock = multiprocessing.Lock()

    def plan_setup(self) -> PlanSetup:
        """What the planner starts from: the scratchpads as they are between `train()` calls."""
        return PlanSetup(
            table_sizes=tuple(self.config.data.table_sizes), capacities=tuple(self.capacities),
            depth=self.depth, policy=self.policy, holds=self.hazards.holds, horizon=self.horizon,
            record_events=self.events.enabled,
            slot_ids=tuple(pad.slot_ids.copy() for pad in self.scratchpads),
            dirty=tuple(pad.dirty_mask() for pad in self.scratchpads),
            last_trained=tuple(c.copy() for c in self.last_trained))

    def plan_feed(self, start: int, stop: int, halt: threading.Event, where: PlanIn) -> PlanFeed:
        """Plans for batches start..stop-1, made ahead by a planner process (or in a thread)."""
        plan_ahead = PlanAhead(self.plan_setup(), self.source)
        return PlanFeed(plan_ahead, start, stop, where, halt)

    def where_host_stages_run(self, steps: int) -> PlanIn:
        """THREAD, PROCESS or HOST_PROCESS for a call of `steps` steps (see PlanIn.resolve)."""
        return self.plan_in.resolve(steps, host_rows=self.host_rows,
                                    ordered=self.hazards.write_back_order)

    def minimum_capacities(self, start: int, stop: int) -> list[int]:
        """Per table, the fewest slots that batches start..stop-1 need at this depth."""
        return minimum_capacities(self.source, self.depth, start, stop)

    def check_capacity(self, start: int, stop: int) -> list[int]:
        """Refuse a scratchpad too small for batches start..stop-1 at this depth (invariant 5)."""
        minimums = self.minimum_capacities(start, stop)
        worst = (self.depth + 1) * self.config.data.batch_size * self.config.data.pooling
        check_capacities(minimums, self.capacities, self.depth, worst)
        return minimums

    # --- the pipeline ---------------------------------------------------------------------------
    def train(self, steps: int) -> Iterator[StepRecord]:
        """As every trainer's (`Trainer.train`): Ctrl-C lands between steps; the step it arrived
        in is yielded (or, if it was still waiting for Insert, not taken), then the next
        iteration raises KeyboardInterrupt. Any way out flushes, so nothing trained is lost."""
        batches = self._steps(steps)
        start, stop = batches.start, batches.stop
        if steps == 0:
            return
        self._refuse_while_running("train()")
        self.check_capacity(start, stop)
        where = self.where_host_stages_run(stop - start)
        run = (HostProcessRun(self, start, stop) if where is PlanIn.HOST_PROCESS
               else PipelineRun(self, start, stop, where))
        self._run = run
        interrupted = InterruptFlag()
        finished = False
        try:
            for b in range(start, stop):
                with interrupted:            # Ctrl-C lands between steps, never inside one
                    record = self._train_one(run, b, lambda: interrupted.raised)
                yield record
                if interrupted.raised:
                    raise KeyboardInterrupt
            finished = True
        except PipelineError as error:
            if isinstance(error.__cause__, BadBatchError):   # the same words as every trainer's
                raise error.__cause__ from None
            raise
        finally:
            try:
                run.stop(finished)
            finally:
                self._run = None

    def _refuse_while_running(self, what: str) -> None:
        if self._run is not None:
            raise RuntimeError(f"{what} inside a running `for record in trainer.train(n)` loop: "
                               "leave the loop (or let it finish) first")

    def _train_one(self, run: PipelineRun | HostProcessRun, b: int, cancelled) -> StepRecord:
        started = run.last_step_end
        item = run.wait_inserted(b, cancelled)
        t0 = time.perf_counter()
        self._hook(Stage.TRAIN, b)
        batch = item.batch
        hits = sum(self._hits(pad, plan, ids)
                   for pad, plan, ids in zip(self.scratchpads, item.tables, batch.ids))
        on_device = self._on_device
        slots = [on_device(p.lookup_slots) for p in item.tables]
        ids = [on_device(i) for i in batch.ids]
        offsets = [on_device(o) for o in batch.offsets]
        pooled = torch.stack([pooled_lookup(pad.rows, s, o) for pad, s, o in
                              zip(self.scratchpads, slots, offsets)], dim=1)     # [B, T, dim]
        loss, grad = self.dense_step(batch, pooled, b)
        for t, (pad, plan) in enumerate(zip(self.scratchpads, item.tables)):
            # coalesce on table ids, exactly as the reference does; then update by slot. The
            # coalesced ids are the sorted working set Plan(b) already mapped to slots.
            unique, grad_sum = embedding_backward(ids[t], offsets[t], grad[:, t], self.tables.table_sizes[t])
            if len(unique) != len(plan.decision.unique_ids):
                raise RuntimeError(f"table {t}: {len(unique)} distinct ids coalesced, but Plan({b}) "
                                   f"mapped {len(plan.decision.unique_ids)}")
            apply_update(pad.rows, pad.state, on_device(plan.decision.slots), grad_sum, self.config.optimizer)
        self.dev.synchronize_current_stream()   # the update done before its slots are freed
        # the slots of batch b are held: no other stage touches them (the holds are the planner's:
        # it counts Train(b) done by Plan(b+D+1))
        for pad, plan, clock in zip(self.scratchpads, item.tables, self.last_trained):
            trained = plan.decision.slots
            pad.mark_dirty(trained, assume_valid=True)   # the planner's slots
            clock[trained] = b
        run.trained(b)
        self._add_stage(Stage.TRAIN, b, t0, time.perf_counter())
        with self._times_lock:
            stage_seconds, self._stage_seconds = self._stage_seconds, {}
        run.last_step_end = time.perf_counter()
        fetched = sum(p.fetched_rows for p in item.tables)
        written = sum(p.written_back_rows for p in item.tables)
        self.next_batch = b + 1
        return StepRecord(step=b, loss=loss, samples=batch.batch_size,
                          seconds=run.last_step_end - started, stage_seconds=stage_seconds,
                          lookups=batch.lookups(), hits=hits, fetched_rows=fetched,
                          written_back_rows=written, stale_reads=item.stale_reads)

    @staticmethod
    def _hits(pad: Scratchpad, plan, ids: np.ndarray) -> int:
        """Invariant 1, checked: how many lookups find their own id in their slot. The working set
        is checked first (every lookup is one of its ids); each lookup only when some id failed."""
        decision = plan.decision
        slot_ids = pad.slot_ids
        if (slot_ids[decision.slots] == decision.unique_ids).all():   # both [u]
            return len(ids)
        return int(np.count_nonzero(slot_ids[plan.lookup_slots] == ids))

    def _on_device(self, array: np.ndarray) -> torch.Tensor:
        """A NumPy array as a tensor on the training device (no copy on a CPU)."""
        return self.dev.to_device(torch.from_numpy(array))

    def train_step(self) -> StepRecord:
        (record,) = self.train(1)   # run the generator to its end: an abandoned one aborts
        return record

    # --- the stages (called from the pipeline's threads) ----------------------------------------
    def _hook(self, stage: Stage, b: int) -> None:
        if self.stage_hook is not None:
            self.stage_hook(stage, b)

    def _add_stage(self, stage: Stage, b: int, start: float, end: float) -> None:
        self.events.stage(b, stage, start, end)
        with self._times_lock:
            self._stage_seconds[stage.value] = self._stage_seconds.get(stage.value, 0.0) + end - start

    def receive_plan(self, feed: PlanFeed, b: int) -> InFlight | None:
        """Plan(b), made by the planner (None once the run halts); its time is the planner's."""
        self._hook(Stage.PLAN, b)
        planned = feed.next(b)
        if planned is None:
            return None
        self._add_stage(Stage.PLAN, b, planned.start, planned.end)
        for p in planned.tables:
            self.events.plan(p.decision)
        return InFlight(b, planned.batch, planned.tables)

    def collect(self, item: InFlight, written_back_upto: Callable[[], int]) -> None:
        self._hook(Stage.COLLECT, item.index)
        for t, plan in enumerate(item.tables):
            if plan.wait_for_write_back >= 0 and written_back_upto() < plan.wait_for_write_back:
                item.stale_reads += len(plan.miss_ids)   # only reachable with the hazard on
            index = torch.from_numpy(plan.miss_ids)
            rows = self.tables.weights[t].index_select(0, index)
            state = self.tables.state[t].index_select(0, index) if self.tables.state[t] is not None else None
            item.staged.append((self.dev.pin(rows), self.dev.pin(state)))   # pinned: async Transfer

    def transfer_and_insert(self, item: InFlight, stream) -> None:
        """Transfer: fetched rows host -> device, victims' rows device -> host (a side stream on
        CUDA, so Train's kernels keep running). Insert: fetched rows into their slots.

        The victims' rows are copied out before Insert overwrites their slots. Insert uses the
        scratchpad's scatter kernel (CuPy's stream on a GPU), so both copies are finished first,
        and Insert is finished before Train(b) may start.
        """
        self._hook(Stage.TRANSFER, item.index)
        t0 = time.perf_counter()
        dev = self.dev   # on a CPU: no stream, and the copies are identities
        with dev.use_stream(stream):
            staged = [(dev.to_device(r, non_blocking=True), dev.to_device(s, non_blocking=True))
                      for r, s in item.staged]
            victims = []
            for pad, plan in zip(self.scratchpads, item.tables):
                slots = self._on_device(plan.victim_slots)
                out = [x.index_select(0, slots) if x is not None else None for x in (pad.rows, pad.state)]
                victims.append(tuple(dev.to_host(x, non_blocking=True) for x in out))
        dev.synchronize_stream(stream)
        item.victim_rows = victims   # from here on, Write-back (or an abort) returns them to the host
        t1 = time.perf_counter()
        self._add_stage(Stage.TRANSFER, item.index, t0, t1)
        self._hook(Stage.INSERT, item.index)
        with self.slots_lock:   # a flush in the other thread sees the slots between batches only
            self.insert_rows(item, staged)
            item.evicted = True   # the victims are out of the scratchpad: in flight to the host
        dev.synchronize_kernels()   # Insert's scatter (CuPy's stream) done before Train reads
        self._add_stage(Stage.INSERT, item.index, t1, time.perf_counter())

    def insert_rows(self, item: InFlight, staged: list) -> None:
        """Fetched rows into their slots, in an order that a failure (or a kill) between any two
        steps leaves safe: the slots' dirty bits are cleared first (the victims' newest rows are
        home or copied out by now), then the rows written, then the slots given their new ids. At
        every moment a slot marked dirty holds its id's newest row, which is all a flush needs."""
        for pad, plan, (rows, state) in zip(self.scratchpads, item.tables, staged):
            pad.clear_dirty(plan.miss_slots, assume_valid=True)
            pad.scatter(plan.miss_slots, rows, state, dirty=False, assume_valid=True)   # clean copies
            pad.place(plan.miss_slots, plan.miss_ids, assume_valid=True)   # the planner's decisions

    def write_back(self, item: InFlight) -> None:
        self._hook(Stage.WRITE_BACK, item.index)
        self.write_back_copied(item)

    def write_back_copied(self, item: InFlight) -> None:
        """Scatter the victims' rows that Insert copied out into the host tables."""
        for t, (plan, (rows, state)) in enumerate(zip(item.tables, item.victim_rows)):
            index = torch.from_numpy(plan.victim_ids)
            self.tables.weights[t].index_copy_(0, index, rows)
            if state is not None:
                self.tables.state[t].index_copy_(0, index, state)

    # --- flush, checkpoint ----------------------------------------------------------------------
    def _holding_slots(self):
        """A batch boundary of the running `train()` call (its `exclusive()`), else just the lock."""
        return self._run.exclusive() if self._run is not None else self.slots_lock

    def flush(self) -> int:
        """Write every dirty scratchpad row back to the host tables (invariant 6). Returns rows.
        Safe between the steps of a running `train()` loop: it waits for a batch boundary."""
        with self._holding_slots():
            return self._write_dirty_rows()

    def _write_dirty_rows(self) -> int:
        written = 0
        for t, pad in enumerate(self.scratchpads):
            dirty = pad.dirty_slots()
            if not len(dirty):
                continue
            slots = torch.from_numpy(dirty).to(self.device)
            index = torch.from_numpy(pad.slot_ids[dirty].copy())
            self.tables.weights[t].index_copy_(0, index, pad.rows.index_select(0, slots).cpu())
            if pad.state is not None:
                self.tables.state[t].index_copy_(0, index, pad.state.index_select(0, slots).cpu())
            pad.clear_dirty(dirty)
            written += len(dirty)
        return written

    def checkpoint(self) -> dict:
        """Flush, then everything needed to resume: host tables, dense model and optimizer,
        position. Also between the steps of a running `train()` loop (one batch boundary)."""
        with self._holding_slots():
            self._write_dirty_rows()
            return {"next_batch": self.next_batch,
                    "weights": [w.clone() for w in self.tables.weights],
                    "state": [s.clone() if s is not None else None for s in self.tables.state],
                    "model": {k: v.clone() for k, v in self.model.state_dict().items()},
                    # deep copies: the live state_dict tensors keep changing as training goes on
                    "dense_optimizer": copy.deepcopy(self.dense_optimizer.state_dict())}

    def load_checkpoint(self, checkpoint: dict) -> None:
        """Resume from `checkpoint()`: the scratchpads start empty and refill from the host."""
        self._refuse_while_running("load_checkpoint()")
        for w, saved in zip(self.tables.weights, checkpoint["weights"]):
            w.copy_(saved)
        for s, saved in zip(self.tables.state, checkpoint["state"]):
            if s is not None:
                s.copy_(saved)
        self.model.load_state_dict(checkpoint["model"])
        self.dense_optimizer.load_state_dict(checkpoint["dense_optimizer"])
        self.next_batch = checkpoint["next_batch"]
        self._reset_scratchpads()
