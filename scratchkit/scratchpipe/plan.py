"""ScratchPipe's Plan stage for one table: decide which ids live in which slots, ahead of Train.

For batch b the planner takes the working set U_b (unique ids), finds the hits in the scratchpad's
map, gives each miss a free slot or evicts a *victim*, holds every slot of U_b until Train(b) has
finished, and remaps the batch's ids to slots. Two rules keep it correct (docs/design.md):

- a victim is never a held slot (invariant 4): a batch in flight still needs it;
- a missed id that an earlier batch evicted must be read from the host only after that eviction's
  write-back has landed (invariant 3). We *order*, rather than forward: each plan names the batch
  whose write-back its Collect must wait for (`wait_for_write_back`).

Victims: ScratchPipe can see the future, so it evicts the slots whose ids are needed furthest in
the future within the batches it can see (`horizon`, counted by `lookahead.NextUses`), falling
back to least recently trained (`VictimPolicy.FURTHEST`), or by least recently trained alone
(`VictimPolicy.LRU`). `least_urgent` picks them in O(candidates); its slow, obvious twin is the
three-key sort `first_by_keys` that the backward-looking caches use (scratchkit/embedding/victims.py).

Its map (`SlotMap`) is the planner's own copy, running ahead of the row store: it says what the
slots *will* hold once the batches planned so far are inserted.

A table's planner sees each batch (reads its working set), plans batches in order, and retires
each once Train has finished with it: `see`, `shortfall`, `plan`, `retire`. This class is the
NumPy twin, the specification; `plan_native.py` runs the same decisions as a C++ loop
(plan_loop.cpp; ~2x faster on one core, and on many cores at once: benchmarks/bench_planner.py),
and the tests hold the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scratchkit.config import VictimPolicy
from scratchkit.scratchpipe.events import PlanDecision
from scratchkit.embedding.working_sets import WorkingSets
from scratchkit.scratchpipe.lookahead import NextUses
from scratchkit.scratchpipe.slot_map import SlotMap


@dataclass
class TablePlan:
    """Plan(b) for one table: what the later stages of batch b need."""

    decision: PlanDecision
    lookup_slots: np.ndarray  # [n] slot of every lookup of the batch, in lookup order
    miss_ids: np.ndarray  # [m] ids to collect from the host table
    miss_slots: np.ndarray  # [m] where Insert writes them
    victim_ids: np.ndarray  # [v] dirty victims whose rows Write-back returns to the host
    victim_slots: np.ndarray  # [v]
    wait_for_write_back: int  # Collect waits until this batch's write-back landed (-1: none)
    # the step record's counts: they stay when the arrays are dropped after the host stages
    fetched_rows: int = field(init=False)
    written_back_rows: int = field(init=False)
    victims: int = field(init=False)  # victims chosen, dirty or not (the victim choice ran if > 0)

    def __post_init__(self):
        self.fetched_rows, self.written_back_rows = len(self.miss_ids), len(self.victim_ids)
        self.victims = len(self.decision.victim_ids)

    def __reduce__(self):
        """Pickled as two arrays, not eleven: a plan crosses from the forked planner every step
        (scratchpipe/ring.py), and each array costs its pickling ~2 us and unpickling ~1 us, a
        third of a millisecond a step at 26 tables, on the trainer's side too."""
        d = self.decision
        parts = (
            d.unique_ids,
            d.slots,
            d.victim_ids,
            d.victim_slots,
            d.held_before,
            self.lookup_slots,
            self.miss_ids,
            self.miss_slots,
            self.victim_ids,
            self.victim_slots,
        )
        words = np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])
        return (
            _table_plan,
            (
                d.batch,
                d.table,
                words,
                np.asarray(d.hit, dtype=bool),
                [len(p) for p in parts],
                self.wait_for_write_back,
                self.fetched_rows,
                self.written_back_rows,
                self.victims,
            ),
        )


def _table_plan(
    batch: int,
    table: int,
    words: np.ndarray,
    hit: np.ndarray,
    lengths: list[int],
    wait: int,
    fetched: int,
    written: int,
    victims: int,
) -> TablePlan:
    """TablePlan.__reduce__'s inverse: its arrays as views of `words`."""
    views, at = [], 0
    for n in lengths:
        views.append(words[at : at + n])
        at += n
    unique, slots, victim_ids, victim_slots, held, lookups, miss_ids, miss_slots, back_ids, back_slots = views
    plan = TablePlan(
        PlanDecision(batch, table, unique, slots, hit, victim_ids, victim_slots, held),
        lookups,
        miss_ids,
        miss_slots,
        back_ids,
        back_slots,
        wait,
    )
    # the counts as sent: the arrays they were taken from may have been dropped (host_process.py)
    plan.fetched_rows, plan.written_back_rows, plan.victims = fetched, written, victims
    return plan


class TablePlanner:
    """Plans one table's batches against its scratchpad's map. Not thread-safe: one caller."""

    def __init__(
        self,
        table: int,
        slot_map: SlotMap,
        last_trained: np.ndarray,
        policy: VictimPolicy,
        holds: bool = True,
        record_held: bool = True,
    ):
        if policy not in (VictimPolicy.FURTHEST, VictimPolicy.LRU):
            raise ValueError(f"ScratchPipe's planner chooses victims by furthest next use or LRU, not {policy.value!r}")
        self.table, self.slot_map, self.policy, self.holds = table, slot_map, policy, holds
        self.record_held = record_held  # PlanDecision.held_before: for the event trace only
        self.last_trained = last_trained  # [capacity] the LRU clock, as Train will have set it
        # per id: the batch whose write-back returns its evicted row, -1 when none is pending
        self._evicted_by = np.full(slot_map.num_rows, -1, dtype=np.int64)
        self._working_sets = WorkingSets(slot_map.num_rows)
        self._next_uses = NextUses((slot_map.num_rows,))
        self._seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # batch -> (unique, inverse)
        self._planned: dict[int, np.ndarray] = {}  # batch -> its slots, until retired

    def see(self, k: int, ids: np.ndarray) -> None:
        """Batch k's ids [n] (k = the last seen + 1): its working set, for Plan and the look-ahead."""
        self._seen[k] = self._working_sets(ids)

    def shortfall(self, b: int) -> int:
        """How many victims Plan(b) needs: its misses beyond the free slots (<= 0: none)."""
        misses = int(np.count_nonzero(self.slot_map.query(self._seen[b][0]) < 0))
        return misses - len(self.slot_map.free_slots())

    def plan(self, batch_index: int, stop: int, lookup_slots: np.ndarray | None = None) -> TablePlan:
        """Plan batch b (seen). Batches b+1 .. stop-1 are the look-ahead, seen when it evicts.
        `lookup_slots` [n]: where to write each lookup's slot (else a new array)."""
        unique, inverse = self._seen[batch_index]
        for k in [k for k in self._seen if k < batch_index]:
            del self._seen[k]
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
            victim_slots = self._choose_victims(shortfall, slots[hit], batch_index, stop)
            victim_ids, dirty_victims = pad.evict(victim_slots)
        miss_slots = np.concatenate([free[: len(miss_ids) - len(victim_slots)], victim_slots])
        pad.insert(miss_ids, miss_slots)  # a working set: distinct
        slots[miss] = miss_slots
        if self.holds:
            pad.hold(slots)  # the whole working set, until Train(b) finishes
        # invariant 3: a miss that an earlier batch evicted waits for that batch's write-back
        wait = int(self._evicted_by[miss_ids].max(initial=-1))
        self._evicted_by[miss_ids] = -1
        self._evicted_by[victim_ids[dirty_victims]] = batch_index
        self._planned[batch_index] = slots
        decision = PlanDecision(batch_index, self.table, unique, slots, hit, victim_ids, victim_slots, held_before)
        if lookup_slots is None:
            lookup_slots = slots[inverse]
        else:
            lookup_slots[:] = slots[inverse]
        return TablePlan(
            decision, lookup_slots, miss_ids, miss_slots, victim_ids[dirty_victims], victim_slots[dirty_victims], wait
        )

    def retire(self, k: int) -> None:
        """Train(k) has finished by the time the plan being made is used: its slots are dirty,
        clocked and released."""
        trained = self._planned.pop(k)
        self.slot_map.mark_dirty(trained)
        self.last_trained[trained] = k
        if self.holds:
            self.slot_map.release(trained)

    def _choose_victims(self, count: int, exclude: np.ndarray, b: int, stop: int) -> np.ndarray:
        pad = self.slot_map
        candidate = pad.slot_ids >= 0
        candidate[exclude] = False  # never evict this batch's own hits (not held yet)
        if self.holds:
            candidate &= ~pad.held_mask()  # invariant 4
        slots = np.flatnonzero(candidate)
        if len(slots) < count:
            raise RuntimeError(
                f"table {self.table}: need {count} victims but only {len(slots)} "
                "slots are unheld (the capacity check should have refused this)"
            )
        level = None
        if self.policy is VictimPolicy.FURTHEST:  # how soon each id is needed in b+1 .. stop-1
            (urgency,) = self._next_uses([self._seen[k][0] for k in range(b + 1, stop)])
            level = urgency[pad.slot_ids[slots]]
        # least urgent (furthest next use) first; among equals, least recently trained; then lowest
        # slot. The chosen victims in slot order: the same on every engine (plan_loop.cpp too).
        return np.sort(slots[least_urgent(count, slots, self.last_trained[slots], level)])


def least_urgent(count: int, slots: np.ndarray, last_trained: np.ndarray, urgency: np.ndarray | None) -> np.ndarray:
    """Positions of the `count` candidates first in the order (urgency, last_trained, slot).

    Instead of a full three-key lexsort: urgencies are a few small numbers (0..horizon, see
    `NextUses`), so a count per value finds the value where the `count` first end; the candidates
    below it are all taken, and among those at it a partial sort (O(n)) on one key (least recently
    trained, then lowest slot: unique, since slots are) takes the rest. The chosen set is exactly
    the lexsort's first `count` (`first_by_keys((slots, last_trained, urgency), ...)`; a test).
    """
    if urgency is None:
        return _first(count, _lru_key(slots, last_trained))
    boundary = int(np.searchsorted(np.cumsum(np.bincount(urgency)), count))
    whole = np.flatnonzero(urgency < boundary)  # all taken
    tied = np.flatnonzero(urgency == boundary)  # some taken, oldest first
    chosen = tied[_first(count - len(whole), _lru_key(slots[tied], last_trained[tied]))]
    return np.concatenate([whole, chosen])


def _lru_key(slots: np.ndarray, last_trained: np.ndarray) -> np.ndarray:
    """One int64 per candidate, in the order (last_trained, slot)."""
    width = int(slots.max(initial=0)) + 1  # slot in [0, width)
    return (last_trained + 1) * width + slots


def _first(count: int, key: np.ndarray) -> np.ndarray:
    """Positions of the `count` smallest keys (any order)."""
    if count >= len(key):
        return np.arange(len(key))
    return np.argpartition(key, count - 1)[:count]
