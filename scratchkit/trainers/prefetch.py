"""`prefetch-lru`: an LRU cache that fetches the next batch's rows while this batch trains.

This is what production recommenders do today: FBGEMM's table-batched embedding with an LRU cache
and TorchRec's prefetch pipeline (`PrefetchTrainPipelineSparseDist`) look one batch ahead. While
batch b trains, batch b+1's working set is looked up in the cache and its misses are fetched (on
a GPU, on a side stream: the copies overlap Train); the rows of both batches are *locked*, so
neither batch's rows can be a victim, and victims are the least recently used of the rest. When
Train(b+1) starts, every one of its rows is in the cache: no demand stall.

Against ScratchPipe (trainers/scratchpipe.py) it is the same idea at look-ahead depth 1, with a
cache's bookkeeping instead of a planner: it cannot see further than the next batch, so it
cannot keep a row that batch b+2 will need when b+1 needs the space, and its victims are chosen
by the past (LRU), not by the future. The cache must hold two consecutive batches' working sets.

On this CPU-only machine the prefetch runs after Train(b) in the same thread (there is no second
stream to overlap with); the stage is timed as `prefetch`, and the cost model overlaps it with
Train on a GPU. The hits of a step count the lookups of its batch whose rows were cached before
its prefetch (as `lru` counts them before its demand fill).

Two rules keep a step all or nothing. The prefetch looks no further than the running `train()`
call's last batch: a call never fails on a batch it does not train, and the minimum a too-small
cache's error names is the minimum for the batches of that call. And what was read ahead is
taken once: a step takes batch b with its prefetched rows and leaves nothing behind, so a step
that fails, or a batch the door refuses, is read again from the source when training goes on.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from scratchkit.config import VictimPolicy
from scratchkit.data.checks import BadBatchError, check_batch
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.trainers.base import StepRecord
from scratchkit.trainers.cached import DemandFilledTrainer, Served

PREFETCH_STAGES = ("prefetch", "prefetch_write_back")


def batch_is_good(batch, table_sizes, index: int) -> bool:
    """Whether `batch` would pass the door (data/checks.py); the prefetch leaves a bad one alone."""
    try:
        check_batch(batch, table_sizes, index)
    except BadBatchError:
        return False
    return True


@dataclass(frozen=True)
class Ahead:
    """A batch read and served one step early: its index, the batch, its rows in the cache."""

    index: int
    batch: object
    served: Served


class PrefetchLRUTrainer(DemandFilledTrainer):
    """LRU cache filled one batch ahead; the batch in flight's rows are locked."""

    name = "prefetch-lru"
    policy = VictimPolicy.LRU

    def __init__(self, config, source=None, device=None):
        super().__init__(config, source, device)
        self._ahead: Ahead | None = None   # batch next_batch, if the last step prefetched it

    def train_step(self) -> StepRecord:
        started = time.perf_counter()
        b, ahead = self.next_batch, self._take_ahead()
        with self.timer.stage("data"):   # batch b (read last step, to prefetch its rows) and b+1
            batch, ids, offsets = self.load_batch(ahead.batch if ahead else None)
            nxt = self.source.batch(b + 1) if b + 1 < self.call_end else None
        served = ahead.served if ahead else self.serve(batch, b)   # the first step: a demand fill
        if nxt is not None and batch_is_good(nxt, self.config.data.table_sizes, b + 1):
            locked = [slot_u for _, _, _, slot_u in served.tables]   # while b "trains": fetch b+1
            self._ahead = Ahead(b + 1, nxt, self.serve(nxt, b + 1, locked=locked, stages=PREFETCH_STAGES))
        return self.train_served(batch, ids, offsets, served, started)

    def _take_ahead(self) -> Ahead | None:
        """Batch next_batch as the last step read and served it, if it did; taken once. (A bad
        batch never is: its step refuses it at the door, as every trainer's does.)"""
        ahead, self._ahead = self._ahead, None
        return ahead if ahead is not None and ahead.index == self.next_batch else None

    def check_victims(self, t: int, needed: int, candidates: int) -> None:
        if needed > candidates:
            capacity = self.caches[t].capacity
            start = min(self.next_batch, self.call_end - 1)
            fits = max(minimum_capacities(self.source, 1, start, self.call_end))
            raise ValueError(
                f"{self.name} cache too small: table {t} needs {needed} victims to prefetch batch "
                f"{self.next_batch + 1} while batch {self.next_batch} holds its rows, but only "
                f"{candidates} of its {capacity} rows may go. It holds two consecutive batches' "
                f"working sets: at least {fits} rows for batches {start}..{self.call_end - 1}")
