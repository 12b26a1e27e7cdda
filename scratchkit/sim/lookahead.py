"""Look-forward caching (ScratchPipe's idea): the future ids are in the dataset, so fetch them
before their batch trains.

The trace is cut into batches of `batch_size` lookups (the last may be shorter). When batch `k` is
*planned*, batches `k-depth .. k` are in flight: planned, not yet trained. Every id they use is
*held*: resident and never a victim. Planning batch `k`:

1. its unique ids that are resident are reused (no copy); the rest are misses, fetched ahead of
   use (`fetched_rows`; they arrive `depth` batches before their batch trains);
2. if the misses do not fit in the free slots, victims are taken among resident ids that are not
   held. Since the planner can read the trace beyond the window, it evicts first the rows whose
   next use it cannot see within `horizon` batches after `k` (least recently used first among
   them), then the row whose next use is furthest (ties: least recently used, then smaller id).
   `horizon=None` sees the whole trace (Belady among unheld rows; only rows never used again
   tie, and go by LRU); `horizon=0` sees nothing past the window: plain LRU among unheld rows;
3. training updates every row it reads, so each victim (it was used by some batch) is dirty and
   written back (`written_back_rows`); resident rows at the end are left to the final flush.

After planning batch `k`, batch `k-depth` trains: every lookup is checked against the resident
set *at that moment*, and counted as a hit or a miss at use time. With the holds, all hit (100%)
as long as the capacity covers the union of the working sets of the `depth+1` batches in flight;
a smaller capacity is refused with a ValueError that names the minimum (see `min_capacity`).
Victims are taken out before the fills land (their slots are reused at once); a real scratchpad
that keeps victims in a transit buffer needs that buffer on top (docs/design.md).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from scratchkit.sim.checks import as_capacity, as_count, as_trace
from scratchkit.sim.record import SimResult
from scratchkit.sim.reuse import group_by_id, sort_by_id
from scratchkit.sim.window import sizes_from_pairs

NEVER = np.iinfo(np.int64).max  # next use of an id that is not used again


@dataclass(frozen=True)
class Batches:
    """The trace cut into batches, with the unique ids of each and when each comes back."""

    dense: np.ndarray  # [n] each lookup's id renumbered 0 .. rows-1
    rows: int  # distinct ids in the trace
    bounds: np.ndarray  # [num_batches+1] batch b's unique ids are pair[bounds[b]:bounds[b+1]]
    pair_id: np.ndarray  # [pairs] dense id of each (batch, id) pair, batch-major
    pair_next: np.ndarray  # [pairs] next batch using the same id, NEVER if none
    pair_prev: np.ndarray  # [pairs] previous batch using the same id, -1 if none
    batch_size: int

    @property
    def num_batches(self) -> int:
        return self.bounds.size - 1

    def unique(self, b: int) -> slice:
        return slice(int(self.bounds[b]), int(self.bounds[b + 1]))

    def lookups(self, b: int) -> np.ndarray:
        return self.dense[b * self.batch_size : (b + 1) * self.batch_size]


def cut_into_batches(trace, batch_size: int) -> Batches:
    """Renumber ids densely and list each batch's unique ids with their previous and next batch.

    One stable radix sort by id (see `reuse.py`) lines up every id's positions in time order, so
    its batches come out in order too: the distinct (id, batch) pairs and, for each, the id's
    previous and next batch are neighbours there. A second stable sort, by batch, lists them batch
    by batch (ids ascending inside a batch).
    """
    trace = as_trace(trace)
    batch_size = as_count(batch_size, "batch_size")
    n = trace.size
    num_batches = math.ceil(n / batch_size)
    order, ids = sort_by_id(trace)  # positions grouped by id
    new_row = np.ones(n, dtype=bool)
    new_row[1:] = ids[1:] != ids[:-1]
    dense_sorted = np.cumsum(new_row) - 1  # dense id, in id-major order
    dense = np.empty(n, dtype=np.int64)
    dense[order] = dense_sorted
    batch = order // batch_size  # nondecreasing inside each id
    new_pair = new_row.copy()
    new_pair[1:] |= batch[1:] != batch[:-1]
    pid, pbatch = dense_sorted[new_pair], batch[new_pair]  # distinct (id, batch), id-major
    same = pid[1:] == pid[:-1]
    nxt = np.full(pid.size, NEVER, dtype=np.int64)
    prv = np.full(pid.size, -1, dtype=np.int64)
    nxt[:-1] = np.where(same, pbatch[1:], NEVER)
    prv[1:] = np.where(same, pbatch[:-1], -1)
    by_batch = group_by_id(pbatch)  # batch-major, ids ascending inside
    bounds = np.searchsorted(pbatch[by_batch], np.arange(num_batches + 1))
    return Batches(
        dense=dense,
        rows=int(dense_sorted[-1]) + 1 if n else 0,
        bounds=bounds,
        pair_id=pid[by_batch],
        pair_next=nxt[by_batch],
        pair_prev=prv[by_batch],
        batch_size=batch_size,
    )


def window_working_sets(batches: Batches, depth: int) -> np.ndarray:
    """Distinct ids held while planning batch k: the union over batches k-depth .. k. [num_batches]
    (scratchkit/sim/window.py counts them, from each (id, batch) pair's previous use.)"""
    depth = as_count(depth, "depth", minimum=0)
    nb = batches.num_batches
    pair_batch = np.repeat(np.arange(nb), np.diff(batches.bounds))
    return sizes_from_pairs(pair_batch, batches.pair_prev, nb, depth)


def min_capacity(trace, batch_size: int, depth: int) -> int:
    """The fewest rows with which every lookup hits at use time: the largest window working set."""
    sets = window_working_sets(cut_into_batches(trace, batch_size), depth)
    return int(sets.max()) if sets.size else 0


def simulate_lookahead(trace, capacity: int, batch_size: int, depth: int, horizon: int | None = None) -> SimResult:
    trace = as_trace(trace)
    capacity = as_capacity(capacity)
    depth = as_count(depth, "depth", minimum=0)
    if horizon is not None:
        horizon = as_count(horizon, "horizon", minimum=0)
    batches = cut_into_batches(trace, batch_size)
    sets = window_working_sets(batches, depth)
    need = int(sets.max()) if sets.size else 0
    if capacity < need:
        k = int(np.argmax(sets))
        raise ValueError(
            f"capacity {capacity} is too small for look-ahead depth {depth} with batches of "
            f"{batches.batch_size} lookups (batch_size counts lookups, not samples): while batch {k} "
            f"is planned, batches {max(k - depth, 0)}..{k} "
            f"are in flight and hold {need} distinct ids; the minimum capacity is {need} rows"
        )
    nb = batches.num_batches
    hits, misses, fetched, written = (np.zeros(nb, dtype=np.int64) for _ in range(4))
    planner = _Victims(batches.rows, horizon)
    reused = 0
    for k in range(nb + depth):
        if k < nb:
            fetched[k], written[k], reused_k = planner.plan(batches, k, depth, capacity)
            reused += reused_k
        t = k - depth  # the batch that trains now
        if t >= 0:
            use = batches.lookups(t)
            hits[t] = np.count_nonzero(planner.resident[use])
            misses[t] = use.size - hits[t]
    return SimResult(
        policy="lookahead",
        capacity=capacity,
        lookups=int(trace.size),
        hits=int(hits.sum()),
        misses=int(misses.sum()),
        fetched_rows=int(fetched.sum()),
        written_back_rows=int(written.sum()),
        flushed_rows=planner.count,
        extra={
            "batch_size": batches.batch_size,
            "depth": depth,
            "horizon": horizon,
            "min_capacity": need,
            "reused_rows": reused,
        },
        batch_hits=hits,
        batch_misses=misses,
        batch_fetched=fetched,
        batch_written_back=written,
    )


class _Victims:
    """The scratchpad's resident set and the planner's choice of victims among unheld rows.

    Two heaps of unheld rows, entries pushed when a row's last batch leaves the window:
    `unseen`, keyed by last use (LRU), holds rows whose next use lies beyond the horizon;
    `seen`, keyed by furthest next use, the others. As plans advance, rows in `unseen` may come
    into view; they move to `seen` when they surface. An entry is stale (skipped) once its row
    was evicted or used again, which the stored last use tells.
    """

    def __init__(self, rows: int, horizon: int | None):
        self.resident = np.zeros(rows, dtype=bool)
        self.last_use = np.full(rows, -1, dtype=np.int64)
        self.count = 0
        self.horizon = horizon
        self.unseen: list[tuple[int, int, int]] = []  # (last use, row, next use)
        self.seen: list[tuple[int, int, int]] = []  # (-next use, last use, row)

    def _visible(self, next_use: int, k: int) -> bool:
        if next_use == NEVER:
            return False
        return self.horizon is None or next_use <= k + self.horizon

    def _release(self, batches: Batches, j: int, k: int) -> None:
        """Batch j's rows leave the window; those not used since become possible victims."""
        span = batches.unique(j)
        rows, nexts = batches.pair_id[span], batches.pair_next[span]
        free = self.last_use[rows] == j
        for row, nxt in zip(rows[free].tolist(), nexts[free].tolist()):
            if self._visible(nxt, k):
                heapq.heappush(self.seen, (-nxt, j, row))
            else:
                heapq.heappush(self.unseen, (j, row, nxt))

    def _current(self, row: int, last: int) -> bool:
        return bool(self.resident[row]) and int(self.last_use[row]) == last

    def _pop(self, k: int) -> int:
        while self.unseen:
            last, row, nxt = heapq.heappop(self.unseen)
            if not self._current(row, last):
                continue
            if self._visible(nxt, k):  # came into view: rank by next use
                heapq.heappush(self.seen, (-nxt, last, row))
                continue
            return row
        while self.seen:
            _, last, row = heapq.heappop(self.seen)
            if self._current(row, last):
                return row
        raise RuntimeError("no unheld row to evict; the capacity check should have prevented this")

    def plan(self, batches: Batches, k: int, depth: int, capacity: int) -> tuple[int, int, int]:
        """Plan batch k: (rows fetched, rows written back, rows reused)."""
        rows = batches.pair_id[batches.unique(k)]
        missing = rows[~self.resident[rows]]
        self.last_use[rows] = k  # hold: batch k's rows are in the window
        if k - depth - 1 >= 0:
            self._release(batches, k - depth - 1, k)
        evict = max(0, self.count + missing.size - capacity)
        for _ in range(evict):
            self.resident[self._pop(k)] = False
        self.resident[missing] = True
        self.count += missing.size - evict
        return int(missing.size), evict, int(rows.size - missing.size)
