"""`scratchpipe`: a look-forward scratchpad filled by a pipeline, so Train always hits.

The trainer composes the parts of scratchkit/scratchpipe/, one file per part of the pipeline:

    capacity.py     invariant 5: refuse a scratchpad too small for the batches in flight
    plan_ahead.py   Plan(b) for every table (plan.py, lookahead.py, slot_map.py), ahead of Train
    host_stages.py  Collect, Write-back, Transfer, Insert, flush: rows between host and scratchpad
    rows.py         the scratchpad's row store: what the slots hold, dirty bits, the LRU clock
    train.py        Train(b): forward, backward and update through slots only
    schedule.py     every rule that orders the stages; the hazard lab's switches
    drivers.py      where the host stages run: threads (threads.py) or a forked process
                    (host_process.py, forked.py); the same schedule either way
    device_plan.py  `scratchpipe-device` (DeviceScratchPipeTrainer, below): Plan on the device
    device_moves.py (device_map.py), and the rows moved by the device's kernels

and trains batch after batch in the caller's thread. An exception in any stage, a dead host
process, a KeyboardInterrupt, or leaving the `train()` loop early stops the stages, flushes the
dirty rows, and leaves the host tables complete: equal to the baseline trained on the batches whose
Train finished. `checkpoint()`, `flush()` and `embedding_weights()` are exact between the steps of
a running loop too: they wait for a batch boundary of the host stages. docs/design.md follows one
batch through the files.
"""

from __future__ import annotations

import copy
import os
import time
from typing import Callable, Iterator


from scratchkit.data.checks import BadBatchError
from scratchkit.device_work import Path, snapshot
from scratchkit.embedding.device_tbe import DeviceTBE
from scratchkit.embedding.tbe_native import set_host_threads
from scratchkit.kernels.engine import EngineKind
from scratchkit.scratchpipe.capacity import check_capacities, minimum_capacities
from scratchkit.scratchpipe.device_moves import DeviceStages
from scratchkit.scratchpipe.drivers import PlanIn, place_for, start_driver
from scratchkit.scratchpipe.events import EventLog, Stage, StageClock
from scratchkit.scratchpipe.host_stages import HostStages
from scratchkit.scratchpipe.own_planner import PlanMistake, Planner
from scratchkit.scratchpipe.plan_ahead import PlanAhead, PlanSetup
from scratchkit.scratchpipe.rows import ScratchpadRows
from scratchkit.scratchpipe.schedule import Hazards, PipelineError, Schedule
from scratchkit.scratchpipe.train import count_hits, train_on_device, train_through_slots
from scratchkit.trainers.base import HostTablesTrainer, StepRecord, StepTornError
from scratchkit.trainers.interrupt import InterruptFlag
from scratchkit.designs.prefetch import PREFETCH_LRU_DEVICE
from scratchkit.designs.scratchpipe import SCRATCHPIPE
from scratchkit.designs.scratchpipe_device import SCRATCHPIPE_DEVICE

__all__ = [
    "DeviceScratchPipeTrainer",
    "Hazards",
    "PipelineError",
    "PlanMistake",
    "PrefetchLRUDeviceTrainer",
    "ScratchPipeTrainer",
]


class ScratchPipeTrainer(HostTablesTrainer):
    name = SCRATCHPIPE.name
    plans_on_device = False  # Plan and the row moves on the host (DeviceScratchPipeTrainer: the device)
    row_stages = HostStages  # the stages that move rows between the host tables and the scratchpad
    look_ahead: int | None = None  # batches planned ahead of Train; None: the config's depth

    def __init__(
        self,
        config,
        source=None,
        device=None,
        *,
        hazards: Hazards = Hazards(),
        horizon: int | None = None,
        engine: str = "auto",
        record_events: bool = True,
        stage_hook: Callable[[Stage, int], None] | None = None,
        where: PlanIn | str = PlanIn.AUTO,
        own_planner: Planner | None = None,
        planner_threads: int | None = None,
        native_planner: bool | None = None,
    ):
        super().__init__(config, source, device)
        self.depth = config.cache.depth if self.look_ahead is None else self.look_ahead
        self.policy = config.cache.victim_policy
        self.schedule = Schedule(self.depth, hazards)
        # how far Plan looks for victims' next use: beyond D, since the dataset is all there
        self.horizon = horizon if horizon is not None else 4 * (self.depth + 1)
        # `where`: where Plan and the host stages run (drivers.py); `own_planner`: a plan function of
        # your own in place of the kit's planner (own_planner.py), run in the trainer's process,
        # where it was written. A pair that cannot run together is refused (drivers.place_for)
        if own_planner is not None and not callable(own_planner):
            raise ValueError(f"own_planner must be a plan function (own_planner.py), got {own_planner!r}")
        self.own_planner = own_planner
        self.plan_in = place_for(where, own_planner=own_planner is not None, plans_on_device=self.plans_on_device)
        # tables planned at once (None: one on a CPU run, where Train needs the other core; else
        # one per table, up to the cores); the C++ planner where it builds, else the NumPy twin
        self.planner_threads, self.native_planner = planner_threads, native_planner
        # planners per table, each owning the ids id % plan_stripes and its share of the slots
        # (scratchpipe/stripes.py): more cores for Plan, at a slightly larger minimum capacity
        self.plan_stripes = config.cache.plan_stripes
        # a CPU run may give its host stages a process: rows and tables in shared memory for it
        self.host_rows = not self.dev.is_cuda and self.plan_in in (PlanIn.AUTO, PlanIn.HOST_PROCESS)
        if self.host_rows:
            self.tables.share()
        # Insert's scatter is the one kernel the trainer runs: CuPy on a GPU; on a CPU the NumPy
        # twin is fastest (38 us for 1,700 rows of 16 floats, the host build's launch checks 160 us)
        self.engine = (
            EngineKind.CUPY
            if self.device.type == "cuda"
            else EngineKind(EngineKind.TWIN if engine == "auto" else engine)
        )
        self.stage_hook = stage_hook  # tests: raise or sleep at a given stage and batch
        self.clock = StageClock(EventLog(enabled=record_events))
        self.capacities = [config.cache.capacity_for(n) for n in config.data.table_sizes]
        # Train's kernels on a GPU (train.py's train_on_device); on a CPU the C++ loops
        self.tbe = DeviceTBE(self.dev, config.data.table_sizes) if self.dev.is_cuda else None
        self._driver = None  # the running `train()` call's, else None
        self._reset()

    @property
    def hazards(self) -> Hazards:
        return self.schedule.hazards

    @property
    def events(self) -> EventLog:
        return self.clock.log

    def _reset(self) -> None:
        """Empty scratchpads: at the start, and after a call that stopped early (planned but
        untrained state is dropped; the scratchpads refill from the host tables on resume)."""
        width = self.config.optimizer.state_width(self.config.model.dim)
        pads = [
            ScratchpadRows(
                n,
                c,
                self.config.model.dim,
                width,
                self.engine,
                shared=self.host_rows,
                bookkeeping_on_device=self.plans_on_device and self.dev.is_cuda,
            )
            for n, c in zip(self.config.data.table_sizes, self.capacities)
        ]
        self.stages = self.row_stages(self.tables, pads, self.dev)

    def plan_setup(self, threads: int = 1) -> PlanSetup:
        """What the planner starts from: the row stores as they are between `train()` calls."""
        return PlanSetup.from_rows(
            self.stages.pads,
            self.config.data.table_sizes,
            self.depth,
            self.policy,
            self.hazards.holds,
            self.horizon,
            self.events.enabled,
            threads,
            self.native_planner,
            self.plan_stripes,
            str(self.device) if self.plans_on_device else None,
            self.own_planner,
        )

    def _planner_threads(self, where: PlanIn) -> int:
        if self.planner_threads is not None:
            return self.planner_threads
        if where is PlanIn.HOST_PROCESS:
            return 1
        return max(1, min(len(self.capacities) * self.plan_stripes, (os.cpu_count() or 1) - 1))

    def where_host_stages_run(self, steps: int) -> PlanIn:
        """Where this call's stages run, resolved for a call of `steps` steps (PlanIn.resolve)."""
        return self.plan_in.resolve(
            steps, host_rows=self.host_rows, ordered=self.hazards.write_back_order, on_gpu=self.dev.is_cuda
        )

    def minimum_capacities(self, start: int, stop: int) -> list[int]:
        """Per table, the fewest slots that batches start..stop-1 need at this depth."""
        return minimum_capacities(self.source, self.depth, start, stop, self.plan_stripes)

    def check_capacity(self, start: int, stop: int) -> list[int]:
        """Refuse a scratchpad too small for batches start..stop-1 at this depth (invariant 5)."""
        minimums = self.minimum_capacities(start, stop)
        worst = (self.depth + 1) * self.config.data.batch_size * self.config.data.pooling
        check_capacities(minimums, self.capacities, self.depth, worst, self.plan_stripes)
        return minimums

    # --- training ---------------------------------------------------------------------------------
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
        self.clock.clear()
        plan_ahead = self.plan_ahead(where, start, stop)
        self._driver = driver = start_driver(
            where, self.stages, self.schedule, plan_ahead, start, stop, self.clock, self.stage_hook
        )
        interrupted, finished, last_end = InterruptFlag(), False, time.perf_counter()
        try:
            for b in range(start, stop):
                with interrupted:  # Ctrl-C lands between steps, never inside one
                    record = self._train_one(driver, b, last_end, lambda: interrupted.raised)
                yield record
                last_end = time.perf_counter()  # from here: the caller's time between steps is no step's
                if interrupted.raised:
                    raise KeyboardInterrupt
            finished = True
        except PipelineError as error:
            if isinstance(error.__cause__, BadBatchError):  # the same words as every trainer's
                raise error.__cause__ from None
            if isinstance(error.__cause__, PlanMistake):  # your planner's: the rule and the batch
                raise error.__cause__ from None
            raise
        finally:
            try:
                self._end(driver, finished)
            finally:
                plan_ahead.close()

    def plan_ahead(self, where: PlanIn, start: int, stop: int) -> PlanAhead:
        """The call's Plan, its batches made ahead by a loader where it runs (`batches_ahead`),
        pinned on a GPU unless Plan runs in a forked process (no CUDA call may run in one). A call
        of one step makes its batches as Plan reads them."""
        ahead = self.config.batches_ahead if stop - start > 1 else 0
        forked = where in (PlanIn.PROCESS, PlanIn.HOST_PROCESS)
        pin = self.dev.pin if self.dev.is_cuda and not forked else None
        setup, workers = self.plan_setup(self._planner_threads(where)), self.config.loader_threads
        return PlanAhead(setup, self.source, start, ahead, pin, workers)

    def reserved_cores(self) -> int:
        """A CPU run's host stages take a core of their own (a forked process, or threads)."""
        return 0 if self.dev.is_cuda else 1

    def _train_one(self, driver, b: int, started: float, cancelled) -> StepRecord:
        set_host_threads(self.host_threads)  # process-wide: another trainer may have run between
        work = snapshot(Path.TRAIN)  # with the stages a step runs on its own path (PlanIn.STEP)
        item = driver.wait_inserted(b, cancelled)
        t0 = time.perf_counter()
        if self.stage_hook is not None:
            self.stage_hook(Stage.TRAIN, b)
        pads = self.stages.pads
        if self.tbe is not None:  # on a GPU: tbe.cu's kernels, one wait (the loss, the hits with it)
            loss, hits = train_on_device(
                item, pads, self.dev, self.tbe, self.dense_step, self.update_weights, self.config.optimizer
            )
            self.stages.trained(b, self.dev.record_event())  # what the evicting stages wait for
            hits = hits if isinstance(hits, int) else int(hits.value)
        else:
            hits = count_hits(item, pads)
            loss = train_through_slots(
                item,
                pads,
                self.dev,
                self.dense_step,
                self.embedding_backward,
                self.update_weights,
                self.config.optimizer,
            )  # next_batch: b + 1
        work = snapshot(Path.TRAIN) - work
        driver.trained(b)
        end = time.perf_counter()
        self.clock.record(Stage.TRAIN, b, t0, end)
        plan = self.clock.take_work(b)
        record = StepRecord(
            step=b,
            loss=loss,
            samples=item.batch.batch_size,
            seconds=end - started,
            stage_seconds=self.clock.take(b),
            lookups=item.batch.lookups(),
            hits=hits,
            fetched_rows=sum(p.fetched_rows for p in item.tables),
            written_back_rows=sum(p.written_back_rows for p in item.tables),
            evicting_tables=sum(p.victims > 0 for p in item.tables),
            stale_reads=item.stale_reads,
            plan_syncs=plan.host_syncs,
            plan_launches=plan.kernel_launches,
        )
        record.count_work(work)  # Train's path: the stages ahead of it count on their own
        return record

    def _end(self, driver, finished: bool) -> None:
        """Stop the driver; after an early stop, flush (every dirty row is in its slot, even if a
        stage died: host_stages.py) and start the next call with empty scratchpads."""
        try:
            driver.stop(finished)
        except BaseException:
            finished = False
            raise
        finally:
            if not finished:
                with driver.exclusive():  # a stage that died holding the lock is passed over
                    self.stages.flush()
                self._reset()
            self._driver = None

    def _refuse_while_running(self, what: str) -> None:
        if self._driver is not None:
            raise RuntimeError(
                f"{what} inside a running `for record in trainer.train(n)` loop: "
                "leave the loop (or let it finish) first"
            )

    def train_step(self) -> StepRecord:
        (record,) = self.train(1)  # run the generator to its end: an abandoned one aborts
        return record

    # --- flush, checkpoint ------------------------------------------------------------------------
    def _at_batch_boundary(self):
        """The running call's batch boundary (its driver's `exclusive()`), or just the lock."""
        return self._driver.exclusive() if self._driver is not None else self.stages.lock

    def flush(self) -> int:
        """Write every dirty scratchpad row back to the host tables (invariant 6). Returns rows.
        Safe between the steps of a running `train()` loop: it waits for a batch boundary."""
        with self._at_batch_boundary():
            return self.stages.flush()

    def checkpoint(self) -> dict:
        """Flush, then everything needed to resume: host tables, dense model and optimizer,
        position. Also between the steps of a running `train()` loop (one batch boundary)."""
        if self.torn is not None:  # a checkpoint now would keep half a step for good
            raise StepTornError(self.torn)
        with self._at_batch_boundary():
            self.stages.flush()
            return {
                "next_batch": self.next_batch,
                "weights": [w.clone() for w in self.tables.weights],
                "state": [s.clone() if s is not None else None for s in self.tables.state],
                "model": {k: v.clone() for k, v in self.model.state_dict().items()},
                # deep copies: the live state_dict tensors keep changing as training goes on
                "dense_optimizer": copy.deepcopy(self.dense_optimizer.state_dict()),
            }

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
        self.torn = None  # a torn step's half is overwritten: training may go on
        self._reset()


class DeviceScratchPipeTrainer(ScratchPipeTrainer):
    """`scratchpipe-device`: ScratchPipe with Plan and the row moves on the device
    (scratchpipe/device_plan.py, device_moves.py), issued by the threads driver under the same
    schedule: the host keeps only the order of the batches. Its plans are the host planner's,
    array for array; what changes is where they are made and where rows move."""

    name = SCRATCHPIPE_DEVICE.name
    plans_on_device = True
    row_stages = DeviceStages


class PrefetchLRUDeviceTrainer(DeviceScratchPipeTrainer):
    """`prefetch-lru-device`, the production peer: an LRU cache filled one batch ahead whose
    lookup, victim choice and fill are device kernels, as FBGEMM's TBE cache runs under TorchRec's
    prefetch pipeline. It is scratchpipe-device at look-ahead depth 1 with LRU victims (the batch
    in flight's rows held), whatever the config's depth and victim policy: its design
    fixes those two (`Design.fixed_cache`), which the projection's counters read too."""

    name = PREFETCH_LRU_DEVICE.name

    def __init__(self, config, source=None, device=None, **options):
        super().__init__(PREFETCH_LRU_DEVICE.config_for(config), source, device, **options)
