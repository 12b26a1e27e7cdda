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
"""
from __future__ import annotations

import time

from scratchkit.config import VictimPolicy
from scratchkit.data.checks import BadBatchError, check_batch
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


class PrefetchLRUTrainer(DemandFilledTrainer):
    """LRU cache filled one batch ahead; the batch in flight's rows are locked."""

    name = "prefetch-lru"
    policy = VictimPolicy.LRU

    def __init__(self, config, source=None, device=None):
        super().__init__(config, source, device)
        self._ahead: tuple[int, Served] | None = None   # (batch index, its rows served) if prefetched
        self._read_ahead: tuple[int, object] | None = None   # (batch index, the batch) read to prefetch

    def train_step(self) -> StepRecord:
        started = time.perf_counter()
        b = self.next_batch
        with self.timer.stage("data"):   # batch b (read last step, to prefetch its rows) and b+1
            read = self._read_ahead
            batch, ids, offsets = self.load_batch(read[1] if read is not None and read[0] == b else None)
            nxt = self.source.batch(b + 1) if b + 1 < len(self.source) else None
            self._read_ahead = (b + 1, nxt)
        served = self._take_ahead(b) or self.serve(batch, b)   # the first step: a demand fill
        if nxt is not None and batch_is_good(nxt, self.config.data.table_sizes, b + 1):
            locked = [slot_u for _, _, _, slot_u in served.tables]   # while b "trains": fetch b+1
            self._ahead = (b + 1, self.serve(nxt, b + 1, locked=locked, stages=PREFETCH_STAGES))
        return self.train_served(batch, ids, offsets, served, started)

    def _take_ahead(self, b: int) -> Served | None:
        """Batch b's rows, if they were prefetched (a bad batch is not: its step refuses it at the
        door, as every trainer's does, after batch b-1 has trained)."""
        ahead, self._ahead = self._ahead, None
        return ahead[1] if ahead is not None and ahead[0] == b else None

    def check_victims(self, t: int, needed: int, candidates: int) -> None:
        if needed > candidates:
            capacity = self.caches[t].capacity
            raise ValueError(
                f"{self.name} cache too small: table {t} needs {needed} victims to prefetch batch "
                f"{self.next_batch + 1} while batch {self.next_batch} holds its rows, but only "
                f"{candidates} of its {capacity} rows may go. It must hold two consecutive batches' "
                "working sets (scratchkit.scratchpipe.capacity.minimum_capacities(source, 1, 0, steps))")
