"""Caches that look backwards: a device cache per table in front of the host tables (docs/design.md).

The tables live on the host (`HostTables`); each table has a device-side cache of
`config.cache.capacity_for(num_rows)` rows and their optimizer state (`DeviceCache`). A step:

    data        make the batch, check its ids
    fetch       per table: the working set U (distinct ids), the id -> slot map, hits and misses;
                the misses are read into slots *before* the batch trains, by the device's row
                kernels from the host tables mapped into the device (`DeviceCache`, as
                scratchpipe-device moves rows): the step stalls on them (a demand fill)
    write_back  a dirty victim's row (and state), written into the host table by the same
                kernels before its slot is reused
    transfer    ids, offsets and slots to the device
    embedding_forward   every table's bags of cache rows at `slots`, summed in lookup order
                (`pooled_lookup_tables`: scratchkit/embedding/table_batched.py)
    mlp         the dense model
    embedding_backward  coalesce the per-lookup gradients on the table *ids*, each distinct id's
                sum addressed by its slot: see `scratchkit.embedding.optim` on why ids
    update      `apply_updates` on the cache rows, addressed by slot; those slots become dirty

Why this is exact. The reference pools `weight[ids]` bag by bag with the same `embedding_bag` op;
here every looked-up row sits, with the same bits, at `rows[slot]`, and bag `b` sums
`rows[slots[i]]` over the same lookups `i` in the same order, so each pooled vector is identical.
The backward coalesces the very `ids` array the reference coalesces, so the summed gradients are
identical, and the update does the same per-row arithmetic whether it addresses rows by id or
by slot. Rows leave the cache only with their optimizer state, so nothing is ever stale.

This module: the step (`CachedTrainer`), and the demand-filled caches `lru` and `lfu`: a miss
takes a free slot, else a victim chosen (scratchkit/embedding/victims.py states the exact rules,
which the tests replay) among the cached rows the current batch does *not* use. So the cache must
hold one batch's working set; a smaller capacity is refused with a ValueError naming the minimum.
The other caches: `static` (trainers/static.py) and `prefetch-lru` (trainers/prefetch.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from scratchkit.config import VictimPolicy
from scratchkit.embedding.device_cache import DeviceCache
from scratchkit.embedding.device_tbe import DeviceTBE
from scratchkit.embedding.table_batched import apply_updates, pooled_lookup_tables
from scratchkit.embedding.victims import VictimChooser, victim_chooser
from scratchkit.embedding.working_sets import WorkingSets
from scratchkit.kernels.engine import EngineKind, make_engine
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.scratchpipe.device_moves import host_view
from scratchkit.sim.window import minimum_capacity as window_minimum
from scratchkit.trainers.base import HostTablesTrainer, StepRecord
from scratchkit.designs.demand_cache import LFU, LRU
from scratchkit.trainers.timing import StageTimer


def minimum_capacity(source, steps: int) -> int:
    """Smallest `CacheParams.capacity` (rows per table) that `lru`/`lfu` accept for `steps` steps:
    the largest working set of any table in batches 0 .. steps-1 (the look-ahead window's minimum
    at depth 0: a window of one batch; scratchkit/sim/window.py)."""
    batches = [source.batch(b) for b in range(steps)]
    return max(
        1, *(window_minimum([np.unique(batch.ids[t]) for batch in batches], 0) for t in range(len(source.table_sizes)))
    )


@dataclass
class Served:
    """A batch's rows in the cache: per table (unique [u], inverse [n], counts [u], slot [u])."""

    tables: list = field(default_factory=list)
    hits: int = 0  # lookups whose row was cached before the batch was served
    fetched: int = 0
    written: int = 0
    evicting: int = 0  # tables that chose victims


@dataclass(frozen=True)
class ServeStages:
    """Where serving a batch charges its time: a timer (the step's, or a prefetch thread's own)
    and the names of its two stages, fetching and writing back."""

    timer: StageTimer
    names: tuple[str, str] = ("fetch", "write_back")

    def fetch(self):
        return self.timer.stage(self.names[0])

    def write_back(self):
        return self.timer.stage(self.names[1])


class CachedTrainer(HostTablesTrainer):
    """Host tables behind one device cache per table; subclasses say how misses are served."""

    def __init__(self, config, source=None, device=None):
        super().__init__(config, source, device)
        # the row kernels scratchpipe-device moves rows with: CuPy's on a GPU, where the host
        # tables are mapped into the device; on a CPU the NumPy twin over the tables' own memory
        self.engine = make_engine(EngineKind.CUPY if self.device.type == "cuda" else EngineKind.TWIN)
        view = lambda table: None if table is None else host_view(table, self.engine.xp)
        self.caches = [
            DeviceCache(view(w), view(s), config.cache.capacity_for(n), self.engine)
            for n, w, s in zip(self.tables.table_sizes, self.tables.weights, self.tables.state)
        ]
        self.working_sets = [WorkingSets(n) for n in self.tables.table_sizes]
        self.tbe = DeviceTBE(self.dev, self.tables.table_sizes) if self.dev.is_cuda else None  # Train's kernels

    # --- what subclasses decide -------------------------------------------------------------------
    def check_working_set(self, t: int, size: int, step: int) -> None:
        """Refuse batch `step`, whose `size` distinct ids of table `t` this cache cannot serve."""

    def admit(
        self,
        t: int,
        unique: np.ndarray,
        counts: np.ndarray,
        slot_u: np.ndarray,
        step: int,
        locked: np.ndarray | None,
        stages: ServeStages,
    ) -> tuple[int, int, int]:
        """Give every id of `unique` [u] a slot: fill `slot_u` [u] (-1 = miss) in place, moving rows
        as needed, never evicting a `locked` slot. Times its own stages (`stages`).
        -> (rows fetched, rows written back, victims chosen)."""
        raise NotImplementedError

    def after_update(self) -> int:
        """Anything to do after the update (the static cache returns transient rows). -> rows written."""
        return 0

    # --- one step ------------------------------------------------------------------------------------
    def train_step(self) -> StepRecord:
        started = time.perf_counter()
        with self.timer.stage("data"):
            batch, ids, offsets = self.load_batch()
        served = self.serve(batch, self.next_batch)
        return self.train_served(batch, ids, offsets, served, started)

    def serve(
        self, batch, step: int, locked: np.ndarray | list | None = None, stages: ServeStages | None = None
    ) -> Served:
        """Give every row of `batch` a slot, fetching misses (and writing victims back) as the
        policy says: the map lookup is part of serving. `locked`: per table, slots no victim may
        come from (another batch's, in flight). `stages`: where the time goes (None: the step's
        timer, as `fetch` and `write_back`)."""
        stages = ServeStages(self.timer) if stages is None else stages
        served = Served()
        with stages.fetch():
            for t, table_ids in enumerate(batch.ids):
                unique, inverse, counts = self.working_sets[t](table_ids, counts=True)
                self.check_working_set(t, len(unique), step)  # before anything moves
                slot_u = self.caches[t].slot_of_id[unique]  # [u], -1 = miss
                served.hits += int(counts[slot_u >= 0].sum())  # per lookup, before the fill
                served.tables.append((unique, inverse, counts, slot_u))
        for t, (unique, _, counts, slot_u) in enumerate(served.tables):
            f, w, v = self.admit(t, unique, counts, slot_u, step, None if locked is None else locked[t], stages)
            served.fetched, served.written, served.evicting = (
                served.fetched + f,
                served.written + w,
                served.evicting + (v > 0),
            )
        return served

    def train_served(self, batch, ids, offsets, served: Served, started: float) -> StepRecord:
        """Train the batch whose rows `served` put in the cache; the rest of the step."""
        stage = self.timer.stage
        slots = [slot_u[inverse] for _, inverse, _, slot_u in served.tables]  # [n] per table
        if self.tbe is not None:  # on a GPU: tbe.cu's kernels (embedding/device_tbe.py)
            loss = self._train_on_device(batch, ids, offsets, slots, served)
        else:
            with stage("transfer"):
                moved = self.dev.to_device_together([*ids, *offsets, *(torch.from_numpy(s) for s in slots)])
                ids, offsets, slots = (moved[k * len(ids) : (k + 1) * len(ids)] for k in range(3))
            with stage("embedding_forward"):
                pooled = pooled_lookup_tables([c.rows for c in self.caches], slots, offsets)  # [B, T, dim]
            with stage("mlp"):
                loss, grad = self.dense_step(batch, pooled, self.next_batch)
            with stage("embedding_backward"):  # coalesced on the ids, each id's sum addressed by its slot
                sizes = [c.num_rows for c in self.caches]
                coalesced = self.embedding_backward(ids, offsets, grad, sizes, addresses=slots)
            self.update_weights(lambda: self._update_cache(coalesced, served))
        written = served.written + self.after_update()
        return self.make_record(
            loss,
            batch,
            started,
            hits=served.hits,
            fetched_rows=served.fetched,
            written_back_rows=written,
            evicting_tables=served.evicting,
        )

    def _train_on_device(self, batch, ids, offsets, slots, served: Served) -> float:
        """The batch trained on the cache's rows by slot with tbe.cu's kernels: the ids, offsets and
        slots in one copy, one forward launch, the lookups sorted by id, one update launch."""
        stage, tbe = self.timer.stage, self.tbe
        with stage("transfer"):
            lookups = tbe.lookups(ids, offsets, slots)
        rows, states = [c.rows for c in self.caches], [c.state for c in self.caches]
        with stage("embedding_forward"):
            pooled = tbe.forward(rows, lookups)  # [B, T, dim]
        with stage("mlp"):
            loss, grad = self.dense_step(batch, pooled, self.next_batch)
        with stage("embedding_backward"):  # summed on the ids, each id's sum applied at its slot
            tbe.sort(lookups)

        def update_tables():
            tbe.update(rows, states, lookups, grad, self.config.optimizer)
            self._mark_dirty(served)

        self.update_weights(update_tables)
        return loss

    def _update_cache(self, coalesced, served: Served) -> None:
        """The tables' part of the step: the cached rows updated by slot, and marked dirty."""
        apply_updates([c.rows for c in self.caches], [c.state for c in self.caches], coalesced, self.config.optimizer)
        self._mark_dirty(served)

    def _mark_dirty(self, served: Served) -> None:
        for t, cache in enumerate(self.caches):
            touched = served.tables[t][3]
            cache.dirty[touched[touched < cache.capacity]] = True  # transient slots aside

    # --- flushing ------------------------------------------------------------------------------------
    def flush(self) -> int:
        """Write every dirty cached row back so the host tables are complete. Idempotent. -> rows."""
        return sum(c.flush() for c in self.caches)


class DemandFilledTrainer(CachedTrainer):
    """A miss takes a free slot, else evicts a row the batch does not use (chosen by the policy)."""

    policy: VictimPolicy

    def __init__(self, config, source=None, device=None):
        super().__init__(config, source, device)
        chooser = victim_chooser(self.policy)
        self.policies: list[VictimChooser] = [chooser(c.capacity, c.num_rows) for c in self.caches]

    def check_working_set(self, t, size, step):
        capacity = self.caches[t].capacity
        if size > capacity:
            stop = max(self.call_end, step + 1)  # the rest of the running call (a lone step: itself)
            fits = max(minimum_capacities(self.source, 0, step, stop))  # depth 0: each batch alone
            raise ValueError(
                f"{self.name} cache too small: table {t}, batch {step} touches {size} "
                f"distinct rows but the cache holds {capacity}. A batch never evicts its own rows, so "
                f"the capacity must hold each batch's working set: at least {fits} rows for batches "
                f"{step}..{stop - 1} (the command line's --capacity min finds it for a whole run)"
            )

    def admit(self, t, unique, counts, slot_u, step, locked, stages):
        cache, policy = self.caches[t], self.policies[t]
        miss = slot_u < 0
        misses = unique[miss]
        victims = np.empty(0, dtype=np.int64)
        with stages.fetch():
            free = cache.free_slots()[: len(misses)]
            if len(misses) > len(free):
                in_use = np.zeros(cache.capacity, dtype=bool)
                in_use[slot_u[~miss]] = True
                if locked is not None:
                    in_use[locked[locked < cache.capacity]] = True
                candidates = np.flatnonzero((cache.id_of_slot >= 0) & ~in_use)
                self.check_victims(t, len(misses) - len(free), len(candidates))
                victims = policy.choose(candidates, len(misses) - len(free))
        written = 0
        if len(victims):
            with stages.write_back():  # the device writes the dirty ones over the link
                written = cache.evict(victims)
                policy.forget(victims)
        with stages.fetch():  # the device reads the misses over the link
            targets = np.concatenate([free, victims])
            cache.fill(misses, targets)
            slot_u[miss] = targets
            policy.touch(slot_u, unique, counts, step)
        return len(misses), written, len(victims)

    def check_victims(self, t: int, needed: int, candidates: int) -> None:
        """More victims needed than slots may be given up: only with locked slots (a subclass)."""


class LRUCacheTrainer(DemandFilledTrainer):
    """Demand-filled cache; the victim is the least recently used row."""

    name = LRU.name
    policy = VictimPolicy.LRU


class LFUCacheTrainer(DemandFilledTrainer):
    """Demand-filled cache; the victim is the least frequently used row (ties: least recent)."""

    name = LFU.name
    policy = VictimPolicy.LFU
