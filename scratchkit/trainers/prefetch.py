"""`prefetch-lru`: an LRU cache that fetches the next batch's rows while this batch trains.

This is what production recommenders do today: FBGEMM's table-batched embedding with an LRU cache
and TorchRec's prefetch pipeline (`PrefetchTrainPipelineSparseDist`) look one batch ahead. While
batch b trains, batch b+1's working set is looked up in the cache and its misses are read in by
the device's row kernels from the host tables mapped into the device (embedding/device_cache.py),
beside Train (on a GPU on a thread and a stream of their own); the rows of batch b are
*locked* (never a victim while b trains), and victims are the least recently used of the rest.
When Train(b+1) starts, every one of its rows is in the cache: no demand stall.

Against ScratchPipe (trainers/scratchpipe.py) it is the same idea at look-ahead depth 1, with a
cache's bookkeeping instead of a planner: it cannot see further than the next batch, so it
cannot keep a row that batch b+2 will need when b+1 needs the space, and its victims are chosen
by the past (LRU), not by the future. The cache must hold two consecutive batches' working sets.

The step, as TorchRec's pipeline runs it (`PrefetchIn.THREAD`, the default where the device is a GPU):

    main thread     data(b, b+1) | Train(b): transfer, forward, mlp, backward | join | update(b)
    prefetch thread               | serve(b+1): look up, choose victims, write back, read in

Where the device is the CPU the prefetch runs inline (`PrefetchIn.INLINE`: serve(b+1) in the
trainer's thread before Train(b), the same steps in the same order): there its NumPy calls and
Train's Python only take turns for the interpreter lock, and a thread makes the step slower
(docs/trainers.md), as `scratchpipe-device`'s stages run inline on a CPU for the same reason.

What the two share, and why it is safe: the prefetch touches only slots batch b does not use
(b's are locked), and its bookkeeping (the map, the LRU clock, dirty bits) is not read by Train
until the join; the update, which marks b's slots dirty, runs after the join. The join comes
*before* the update, so a prefetch that fails (a cache too small for two batches' working sets)
fails step b before it changes any weight, threaded or inline: the step is all or nothing, and
no thread outlives its step, whether the step returns or raises. The prefetch keeps a timer of
its own; its stages (`prefetch`, `prefetch_write_back`) are added to the step's record, and on a
thread they overlap the step's other stages, so the stages do not add up to the step's seconds. The hits of
a step count the lookups of its batch whose rows were cached before its prefetch (as `lru` counts
them before its demand fill).

Two rules keep a step all or nothing. The prefetch looks no further than the running `train()`
call's last batch: a call never fails on a batch it does not train, and the minimum a too-small
cache's error names is the minimum for the batches of that call. And what was read ahead is
taken once: a step takes batch b with its prefetched rows and leaves nothing behind, so a step
that fails, or a batch the door refuses, is read again from the source when training goes on.
Both batches come from the trainer's loader (data/loader.py), made ahead and checked at the door
on its thread: step b's `data` takes batch b+1 from it, already made.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from enum import Enum

from scratchkit.config import VictimPolicy
from scratchkit.data.checks import BadBatchError
from scratchkit.device_work import Path, current_path, on_path
from scratchkit.kernels.engine import OwnStream
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.scratchpipe.drivers import PlanIn
from scratchkit.trainers.base import StepRecord
from scratchkit.trainers.cached import DemandFilledTrainer, Served, ServeStages
from scratchkit.designs.prefetch import PREFETCH_LRU, PREFETCH_STAGES
from scratchkit.trainers.timing import StageTimer


class PrefetchIn(str, Enum):
    """Where the prefetch of batch b+1 runs while batch b trains: three of the places ScratchPipe's
    Plan may run (`PlanIn`), named as there, since they mean the same."""

    AUTO = PlanIn.AUTO.value  # THREAD where the device is a GPU (its kernels on a stream), else INLINE
    THREAD = PlanIn.THREAD.value  # a thread of its own beside Train, joined before the update
    INLINE = PlanIn.INLINE.value  # in the trainer's thread, before Train: the same steps, nothing overlaps

    def resolve(self, on_gpu: bool) -> "PrefetchIn":
        if self is PrefetchIn.AUTO:
            return PrefetchIn.THREAD if on_gpu else PrefetchIn.INLINE
        return self


@dataclass(frozen=True)
class Ahead:
    """A batch read and served one step early: its index, the batch, its rows in the cache."""

    index: int
    batch: object
    served: Served


class PrefetchLRUTrainer(DemandFilledTrainer):
    """LRU cache filled one batch ahead; the batch in flight's rows are locked."""

    name = PREFETCH_LRU.name
    policy = VictimPolicy.LRU

    def __init__(self, config, source=None, device=None, prefetch_in: PrefetchIn | str = PrefetchIn.AUTO):
        super().__init__(config, source, device)
        self.prefetch_in = PrefetchIn(prefetch_in).resolve(self.dev.is_cuda)
        self._ahead: Ahead | None = None  # batch next_batch, if the last step prefetched it
        self._prefetch: Prefetch | None = None  # the prefetch running beside this step's Train
        self.stream = OwnStream(self.engine.xp)  # the prefetch's kernels, beside Train's on a GPU

    def train_step(self) -> StepRecord:
        started = time.perf_counter()
        b, ahead = self.next_batch, self._take_ahead()
        with self.timer.stage("data"):  # batch b (taken last step, to prefetch its rows) and b+1
            batch, ids, offsets = self.load_batch(ahead.batch if ahead else None)
            nxt = self._take_next(b + 1)
        served = ahead.served if ahead else self.serve(batch, b)  # the first step: a demand fill
        if nxt is not None:
            locked = [slot_u for _, _, _, slot_u in served.tables]  # while b trains: fetch b+1
            self.dev.synchronize_current_stream()  # victims' rows as the last update left them
            self._prefetch = Prefetch(
                lambda stages: Ahead(b + 1, nxt, self.serve(nxt, b + 1, locked=locked, stages=stages)),
                self.stream,
                threaded=self.prefetch_in is PrefetchIn.THREAD,
            )
        try:
            record = self.train_served(batch, ids, offsets, served, started)
        finally:
            self._join_prefetch()  # a step that raised: the prefetch is waited for, and dropped
        return record

    def update_weights(self, update_tables) -> None:
        """The prefetch joins here, before any weight changes: a prefetch that failed fails the
        step with nothing applied (the module note)."""
        prefetch = self._join_prefetch()
        if prefetch is not None:
            self._ahead = prefetch.result()  # raises what the prefetch raised
            for name, seconds in prefetch.timer.take().items():
                self.timer.seconds[name] += seconds
        super().update_weights(update_tables)

    def _join_prefetch(self) -> "Prefetch | None":
        """Wait for the running prefetch, if any, and hand it over once."""
        prefetch, self._prefetch = self._prefetch, None
        if prefetch is not None:
            prefetch.join()
        return prefetch

    def close(self) -> None:
        self._join_prefetch()
        super().close()

    def _take_next(self, index: int):
        """Batch `index` from the loader, to prefetch its rows; None past the call's end, or if the
        door refuses it: the prefetch leaves a bad batch alone, and its own step refuses it."""
        if index >= self.call_end:
            return None
        try:
            return self.loader.take(index)
        except BadBatchError:
            return None

    def _take_ahead(self) -> Ahead | None:
        """Batch next_batch as the last step read and served it, if it did; taken once. (A bad
        batch never is: its step refuses it at the door, as every trainer's does.)"""
        ahead, self._ahead = self._ahead, None
        return ahead if ahead is not None and ahead.index == self.next_batch else None

    def check_victims(self, t: int, needed: int, candidates: int) -> None:
        # (on the prefetch thread: the error reaches the step at the join, before its update)
        if needed > candidates:
            capacity = self.caches[t].capacity
            start = min(self.next_batch, self.call_end - 1)
            fits = max(minimum_capacities(self.source, 1, start, self.call_end))
            raise ValueError(
                f"{self.name} cache too small: table {t} needs {needed} victims to prefetch batch "
                f"{self.next_batch + 1} while batch {self.next_batch} holds its rows, but only "
                f"{candidates} of its {capacity} rows may go. It holds two consecutive batches' "
                f"working sets: at least {fits} rows for batches {start}..{self.call_end - 1}"
            )


class Prefetch:
    """`serve(stages)` run on a thread of its own (`threaded`; else at once, in the caller's), its
    kernels on `stream`, its time on a timer of its own (`timer`): started at once; `join()`
    waits, `result()` returns what it served or raises what it raised."""

    def __init__(self, serve, stream: OwnStream, threaded: bool = True):
        self.timer = StageTimer()
        self._serve, self._stream = serve, stream
        self._value = self._error = None
        self._thread = threading.Thread(target=self._run, name="prefetch-lru", daemon=True) if threaded else None
        if self._thread is not None:
            self._thread.start()
        else:
            self._run()

    def _run(self) -> None:
        try:
            # on its own thread its waits and launches are not Train's (device_work.py)
            with self._stream, on_path(Path.PLAN if self._thread is not None else current_path()):
                self._value = self._serve(ServeStages(self.timer, PREFETCH_STAGES))
            self._stream.finish()  # its rows are in place before Train reads them
        except BaseException as error:  # handed to the step at the join
            self._error = error

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def result(self) -> Ahead:
        if self._error is not None:
            raise self._error
        return self._value
