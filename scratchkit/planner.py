"""ScratchPipe's Plan stage for one table: decide which ids live in which slots, ahead of Train.

For batch b the planner takes the working set U_b (unique ids), finds the hits in the scratchpad's
map, gives each miss a free slot or evicts a *victim*, holds every slot of U_b until Train(b) has
finished, and remaps the batch's ids to slots. Two rules keep it correct (DESIGN.md section 3):

- a victim is never a held slot (invariant 4): a batch in flight still needs it;
- a missed id that an earlier batch evicted must be read from the host only after that eviction's
  write-back has landed (invariant 3). We *order*, rather than forward: each plan names the batch
  whose write-back its Collect must wait for (`wait_for_write_back`).

Victims: ScratchPipe can see the future, so it evicts the slots whose ids are needed furthest in
the future within the batches it can see (`horizon`, counted by `NextUses`), falling back to least
recently trained.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable

import numpy as np

from scratchkit.choices import parse_choice
from scratchkit.data.checks import check_batch
from scratchkit.events import PlanDecision
from scratchkit.slot_map import SlotMap


class VictimPolicy(str, Enum):
    FURTHEST = "furthest"   # furthest next use within the horizon (Belady over what is visible), then LRU
    LRU = "lru"             # least recently trained slot first, ignoring the future

    @classmethod
    def parse(cls, name: str) -> "VictimPolicy":
        return parse_choice(cls, name, "victim policy ")


@dataclass
class TablePlan:
    """Plan(b) for one table: what the later stages of batch b need."""

    decision: PlanDecision
    lookup_slots: np.ndarray       # [n] slot of every lookup of the batch, in lookup order
    miss_ids: np.ndarray           # [m] ids to collect from the host table
    miss_slots: np.ndarray         # [m] where Insert writes them
    victim_ids: np.ndarray         # [v] dirty victims whose rows Write-back returns to the host
    victim_slots: np.ndarray       # [v]
    wait_for_write_back: int       # Collect waits until this batch's write-back landed (-1: none)
    # the step record's counts: they stay when the arrays are dropped after the host stages
    fetched_rows: int = field(init=False)
    written_back_rows: int = field(init=False)

    def __post_init__(self):
        self.fetched_rows, self.written_back_rows = len(self.miss_ids), len(self.victim_ids)


class WorkingSets:
    """`np.unique(ids, return_inverse=True)` for one table's batches, made faster where it can.

    When the table is small next to a batch (at most BITMAP_ROWS_PER_LOOKUP rows per lookup), ids
    are marked in a [num_rows] bitmap and read back in order, ~4x faster than sorting 2k ids; the
    result is the same arrays. Larger tables sort, as np.unique does.
    """

    BITMAP_ROWS_PER_LOOKUP = 64   # measured: the bitmap wins up to ~200 rows per lookup

    def __init__(self, num_rows: int):
        self.num_rows = num_rows
        self._mark = self._position = None   # [num_rows] scratch, made on first use

    def __call__(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(unique [u] sorted, inverse [n]) with unique[inverse] == ids."""
        if self.num_rows > self.BITMAP_ROWS_PER_LOOKUP * len(ids):
            return np.unique(ids, return_inverse=True)
        if self._mark is None:
            self._mark = np.zeros(self.num_rows, dtype=bool)
            self._position = np.empty(self.num_rows, dtype=np.int64)
        self._mark[ids] = True
        unique = np.flatnonzero(self._mark)
        self._mark[unique] = False                               # clean for the next batch
        self._position[unique] = np.arange(len(unique))
        return unique, self._position[ids]


class NextUses:
    """How soon each id is needed again, for every table at once: its *urgency*, 0 when no future
    batch the planner sees uses it, else H+1-k for its next use in batch b+k (H batches seen), so
    the sooner the higher. Victims are taken least urgent first.

    The tables share one array, each table's ids offset by the rows of the tables before it: one
    fill and one scatter per future batch, not one per table (26 tables: 26x fewer NumPy calls).
    The array is reused by the next call (a fresh one per batch cost more in page faults than the
    filling), so read the views before calling again.
    """

    def __init__(self, table_sizes):
        self.offsets = np.concatenate([[0], np.cumsum(table_sizes, dtype=np.int64)])  # [T+1]
        self._urgency = np.empty(int(self.offsets[-1]), dtype=np.int64)

    def joined(self, working_sets: list[np.ndarray]) -> np.ndarray:
        """One batch's working sets (one per table) as one array of offset ids."""
        return np.concatenate([ws + offset for ws, offset in zip(working_sets, self.offsets)])

    def __call__(self, future: list[np.ndarray]) -> list[np.ndarray]:
        """`future[k-1]`: batch b+k's `joined` working sets -> per table [num_rows] urgencies."""
        urgency, seen = self._urgency, len(future)
        urgency.fill(0)
        for k in range(seen, 0, -1):               # nearest last, so it wins
            urgency[future[k - 1]] = seen + 1 - k
        return [urgency[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]


class TablePlanner:
    """Plans one table's batches against its scratchpad's map. Not thread-safe: one caller."""

    def __init__(self, table: int, slot_map: SlotMap, policy: VictimPolicy, holds: bool = True,
                 record_held: bool = True):
        self.table, self.slot_map, self.policy, self.holds = table, slot_map, policy, holds
        self.record_held = record_held   # PlanDecision.held_before: for the event trace only
        self.last_trained = np.full(slot_map.capacity, -1, dtype=np.int64)  # LRU clock per slot
        # per id: the batch whose write-back returns its evicted row, -1 when none is pending
        self._evicted_by = np.full(slot_map.num_rows, -1, dtype=np.int64)

    def plan(self, batch_index: int, ids: np.ndarray, unique: np.ndarray, inverse: np.ndarray,
             urgency: Callable[[], np.ndarray] | None) -> TablePlan:
        """Plan batch b: `ids` [n], its working set `unique` [u] with `unique[inverse] == ids`, and
        `urgency()`: the [num_rows] urgencies from `NextUses`, asked for only when this batch must
        evict (None for the LRU policy)."""
        pad = self.slot_map
        slots = pad.query(unique)
        hit = slots >= 0
        miss = ~hit
        held_before = np.flatnonzero(pad.held_mask()) if self.record_held else np.empty(0, np.int64)
        miss_ids = unique[miss]
        free = pad.free_slots()
        shortfall = len(miss_ids) - len(free)
        victim_ids = victim_slots = np.empty(0, dtype=np.int64)
        dirty_victims = np.empty(0, dtype=bool)
        if shortfall > 0:
            victim_slots = self._choose_victims(shortfall, exclude=slots[hit], urgency=urgency)
            victim_ids, dirty_victims = pad.evict(victim_slots)
        miss_slots = np.concatenate([free[:len(miss_ids) - len(victim_slots)], victim_slots])
        pad.insert(miss_ids, miss_slots)   # a working set: distinct
        slots[miss] = miss_slots
        if self.holds:
            pad.hold(slots)   # the whole working set, until Train(b) finishes
        # invariant 3: a miss that an earlier batch evicted waits for that batch's write-back
        wait = int(self._evicted_by[miss_ids].max(initial=-1))
        self._evicted_by[miss_ids] = -1
        self._evicted_by[victim_ids[dirty_victims]] = batch_index
        decision = PlanDecision(batch_index, self.table, unique, slots, hit, victim_ids,
                                victim_slots, held_before)
        return TablePlan(decision, slots[inverse], miss_ids, miss_slots,
                         victim_ids[dirty_victims], victim_slots[dirty_victims], wait)

    def _choose_victims(self, count: int, exclude: np.ndarray,
                        urgency: Callable[[], np.ndarray] | None) -> np.ndarray:
        pad = self.slot_map
        candidate = pad.slot_ids >= 0
        candidate[exclude] = False               # never evict this batch's own hits (not held yet)
        if self.holds:
            candidate &= ~pad.held_mask()        # invariant 4
        slots = np.flatnonzero(candidate)
        if len(slots) < count:
            raise RuntimeError(f"table {self.table}: need {count} victims but only {len(slots)} "
                               "slots are unheld (the capacity check should have refused this)")
        level = (urgency()[pad.slot_ids[slots]] if self.policy is VictimPolicy.FURTHEST and urgency is not None
                 else None)
        # least urgent (furthest next use) first; among equals, least recently trained; then lowest
        # slot. In the order the partial sort leaves them: the same for the same plan, anywhere.
        return slots[_smallest(count, slots, self.last_trained[slots], level)]

    def trained(self, batch_index: int, slots: np.ndarray) -> None:
        self.last_trained[slots] = batch_index


def _smallest(count: int, slots: np.ndarray, last_trained: np.ndarray,
              urgency: np.ndarray | None) -> np.ndarray:
    """Positions of the `count` candidates first in the order (urgency, last_trained, slot).

    Instead of a full three-key lexsort: urgencies are a few small numbers (0..horizon, see
    `NextUses`), so a count per value finds the value where the `count` first end; the candidates
    below it are all taken, and among those at it a partial sort (O(n)) on one key (least recently
    trained, then lowest slot: unique, since slots are) takes the rest. The chosen set is exactly
    the lexsort's first `count`.
    """
    if urgency is None:
        return _first(count, _lru_key(slots, last_trained))
    boundary = int(np.searchsorted(np.cumsum(np.bincount(urgency)), count))
    whole = np.flatnonzero(urgency < boundary)                     # all taken
    tied = np.flatnonzero(urgency == boundary)                     # some taken, oldest first
    chosen = tied[_first(count - len(whole), _lru_key(slots[tied], last_trained[tied]))]
    return np.concatenate([whole, chosen])


def _lru_key(slots: np.ndarray, last_trained: np.ndarray) -> np.ndarray:
    """One int64 per candidate, in the order (last_trained, slot)."""
    width = int(slots.max(initial=0)) + 1                          # slot in [0, width)
    return (last_trained + 1) * width + slots


def _first(count: int, key: np.ndarray) -> np.ndarray:
    """Positions of the `count` smallest keys (any order)."""
    if count >= len(key):
        return np.arange(len(key))
    return np.argpartition(key, count - 1)[:count]


def minimum_capacity(working_sets, depth: int, num_rows: int) -> int:
    """Largest union of D+1 consecutive working sets: the slots a scratchpad must have.

    Plan(b) counts batches b-D .. b-1 as in flight, so the batches b-D .. b hold slots together.
    `working_sets` is any iterable of arrays of unique ids in [0, num_rows); only the last D+1
    are kept, so a long run is checked in constant memory.
    """
    in_window = np.zeros(num_rows, dtype=np.int32)   # how many window batches use each id
    window: deque[np.ndarray] = deque()
    best = size = 0
    for ws in working_sets:
        in_window[ws] += 1
        size += int(np.count_nonzero(in_window[ws] == 1))
        window.append(ws)
        if len(window) > depth + 1:
            leaving = window.popleft()
            in_window[leaving] -= 1
            size -= int(np.count_nonzero(in_window[leaving] == 0))
        best = max(best, size)
    return best


def minimum_capacities(source, depth: int, start: int, stop: int) -> list[int]:
    """Per table, the fewest slots ScratchPipe needs for batches start..stop-1 of `source`.
    Each batch is checked at the door first (an id out of range would corrupt the count)."""
    sets = []
    for b in range(start, stop):
        batch = source.batch(b)
        check_batch(batch, source.table_sizes, b)
        sets.append([np.unique(ids) for ids in batch.ids])
    return [minimum_capacity((s[t] for s in sets), depth, n) for t, n in enumerate(source.table_sizes)]


class ScratchpadTooSmall(ValueError):
    """A scratchpad smaller than the batches in flight need (invariant 5). `fits_all` is the
    smallest capacity that fits every table: the one number to ask for."""

    def __init__(self, table: int, have: int, need: int, depth: int, worst: int, fits_all: int):
        self.table, self.have, self.need, self.depth, self.worst, self.fits_all = \
            table, have, need, depth, worst, fits_all
        super().__init__(f"{self.problem()} A capacity of {fits_all} rows fits every table: "
                         f"CacheParams(capacity={fits_all}), or a smaller depth.")

    def problem(self) -> str:
        """What is wrong, in words that name no parameter (callers add how to ask for more)."""
        return (f"table {self.table}: a scratchpad of {self.have} rows is too small for look-ahead "
                f"depth {self.depth}: the {self.depth + 1} batches in flight touch up to {self.need} "
                f"distinct rows of it (the minimum for this data; (D+1)*B*L = {self.worst} is the "
                f"worst case with no reuse).")

    def __reduce__(self):   # crosses process boundaries whole
        return type(self), (self.table, self.have, self.need, self.depth, self.worst, self.fits_all)


def check_capacities(minimums: list[int], capacities: list[int], depth: int, worst: int) -> None:
    """Raise ScratchpadTooSmall for the first table whose capacity is below its minimum. A table's
    capacity is capped at its size, so the capacity that fits all is the largest minimum."""
    for t, (need, have) in enumerate(zip(minimums, capacities)):
        if have < need:
            raise ScratchpadTooSmall(t, have, need, depth, worst, max(minimums))
