"""The demand caches (trainers/cached.py, trainers/static.py): a device cache per table in front of
the host tables, filled as a batch misses. A step is the sum of its stages: a miss stalls it while
its row is fetched.

    static  the hot rows pinned, profiled from a prefix; a batch's misses in transient slots past the
            cache, read in and written back each step
    lru     filled on demand, the least recently used row the batch does not use evicted
    lfu     the same, the least frequently used (by count, then recency)

`fetch` is the map lookup of the working set (WorkingSets: a bitmap or np.unique; the id -> slot
array) and the demand fill (for a full cache first the victims' choice: a selection among the
cached rows the batch does not use; then the misses read by the device's row kernels from the
host tables mapped into the device, over the link, and scattered into their slots:
`device_move_rows`, as scratchpipe-device's Collect and Insert); `write_back` the dirty victims'
rows gathered from their slots and written over the link into the host tables by the same
kernels; then the batch trains on the cache's rows by slot (train.py). A row moves with its
optimizer state (`moved_row_bytes`); the rows fetched and written back in a step are the
measured counters, split over the tables by their distinct ids (`StepWork.share`).

Which rows move, without training: the caches of sim/, served a batch at a time as the trainers
serve them (`sim.lru_by_batch`: LFU is counted as LRU, the same fills and other victims;
`sim.static_by_batch`), each the mean over the second half of the batches (past the cache's
filling).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scratchkit.config import TrainConfig, VictimPolicy
from scratchkit.designs import kit
from scratchkit.designs.design import Compared, Design, Place
from scratchkit.designs.serial import TRAIN_STAGES, one_after_another
from scratchkit.designs.step import StepWork
from scratchkit.designs.train import id_transfer, total, train_stages
from scratchkit.designs.work import FLOAT_BYTES, ID_BYTES, Work
from scratchkit.sim.lru import lru_by_batch
from scratchkit.sim.static import static_by_batch


def device_move_rows(
    w: StepWork, rows: float, from_rows: float, to_rows: float, *, cpu: bool, written: bool = False
) -> Work:
    """Rows with their state between a host table mapped into the device and device slots, moved
    by the device's row kernels (embedding/device_cache.py): per width a `gather_rows` from where
    they are and a `scatter_rows` to where they go, both device work, the rows crossing the link
    as the kernel reads them (a fill: the misses, in id order) or writes them (`written`, a
    write-back: the victims, in the cache's order); on a GPU the ids and the slots go to the device
    first. `cpu`: the device is the host's CPU, where each kernel is a NumPy call."""
    if not rows:
        return Work()
    if cpu:
        work = Work(pcie=rows * w.moved_row_bytes)
    else:
        work = kit.rows_over_link(rows, w.moved_row_bytes, written=written, by_id=not written)
        work += Work(pcie=2 * rows * ID_BYTES, pcie_copies=2)
    for width in (w.dim, w.state_width):
        if width:
            rb = width * FLOAT_BYTES
            work += (
                (kit.numpy_calls(2) if cpu else kit.calls(True, "kernel", 2))
                + kit.gather(True, rows, rb, from_rows * rb)
                + kit.scatter(True, rows, rb, to_rows * rb)
            )
    return work


@dataclass(frozen=True)
class DemandCache:
    """How a demand cache's step counts (a design's `count`): `pinned`, a static cache's hot rows
    (its misses go to transient slots past the cache, no victims are chosen); `counts_uses`, LFU's
    use counts (its victims sort by two keys, and each use adds to a count); `fetch_stages`, the
    names its fetch and write-back are recorded under."""

    pinned: bool = False
    counts_uses: bool = False
    fetch_stages: tuple[str, str] = ("fetch", "write_back")

    def __call__(self, w: StepWork, place: Place) -> dict[str, Work]:
        by_slot = not place.kernels  # tbe.cu reads each lookup's slot: no searchsorted of the distinct ids
        train = train_stages(
            w, footprint="capacity", by_slot=by_slot, batched=place.device_batched, kernels=place.kernels
        )
        train["update"] += total(kit.map_write(t.unique, t.capacity) for t in w.tables)  # dirty bits
        fetch, write_back = self.fetch_stages
        return {
            fetch: self.fetch(w, place.device_is_host),
            write_back: self.write_back(w, place.device_is_host),
            "transfer": id_transfer(w, arrays=2, kernels=place.kernels) + kit.calls(False, "op", w.num_tables),
            **train,
        }

    def fetch(self, w: StepWork, cpu: bool = False) -> Work:
        """The fetch stage for one batch (trainers/cached.py: serve, admit, fill, touch).
        `cpu`: the device is the host's CPU."""
        fetched, victims = w.share(w.fetched_rows), w.share(w.written_back_rows, evicting_only=True)
        f = w.victim_share  # the victim choice runs in this share of the tables' steps
        work = Work()
        for t, m, v in zip(w.tables, fetched, victims):
            C = t.capacity
            work += (
                kit.working_set(t.lookups, t.unique, t.rows, counts=True)
                + kit.map_lookup(t.unique, t.rows)
                + kit.scan(t.unique, 3)
                + kit.scan(C, 2)
            )  # misses; free slots
            if self.pinned:  # misses into transient slots past the cache
                work += device_move_rows(w, m, t.rows, C + m, cpu=cpu)
                continue
            if v:  # a full cache: of the cached rows the batch does not use, the
                candidates = max(C - t.unique, 1)  # first by recency (lfu: by count, then recency)
                keys = 2 if self.counts_uses else 1
                chosen = v / max(f, 1e-9)  # victims in a step that chooses (first_k: split, then sorted)
                work += (
                    kit.scan(f * C, 3)
                    + kit.map_write(f * t.unique, C)
                    + kit.gather(False, f * candidates, ID_BYTES, C * ID_BYTES)  # the first key
                    + kit.select(candidates, f * keys)
                    + kit.scan(candidates, 4 * f)  # <, ==, taken
                    + kit.gather(False, f * keys * chosen, ID_BYTES, C * ID_BYTES)
                    + Work(host_sorts=(("numpy", chosen, f * keys),))
                    + kit.numpy_calls(3 * f)
                )
            # the fill, the map (slot_of_id, id_of_slot, dirty, the batch's slots), the clock
            work += (
                device_move_rows(w, m, t.rows, C, cpu=cpu)
                + kit.map_write(m, t.rows)
                + kit.map_write(m, C)
                + kit.map_write(m, C)
                + kit.map_write(m, t.unique)
                + kit.scan(t.unique, 2)
                + kit.map_write(t.unique, C)
            )
            if self.counts_uses:
                work += kit.gather(False, t.unique, ID_BYTES, C * ID_BYTES) + kit.map_write(t.unique, C)
        return work

    def write_back(self, w: StepWork, cpu: bool = False) -> Work:
        """Victims' rows home before their slots are reused (static: the step's transient rows), by
        the device's kernels over the link. `cpu`: the device is the host's CPU."""
        work = Work()
        for t, v in zip(w.tables, w.share(w.written_back_rows, evicting_only=not self.pinned)):
            if not v:
                continue
            work += device_move_rows(w, v, t.capacity, t.rows, cpu=cpu, written=True)
            if not self.pinned:  # the map: the victims' ids forgotten, slots freed
                work += (
                    kit.gather(False, v, 1, t.capacity)
                    + kit.gather(False, v, ID_BYTES, t.capacity * ID_BYTES)
                    + kit.map_write(v, t.rows)
                    + kit.map_write(v, t.capacity)
                    + kit.map_write(v, t.capacity)
                )
        return work


def per_table(config: TrainConfig, source, batches: int, served) -> tuple[float, float]:
    """(rows fetched, rows written back) a step, added over the tables: `served(sets, rows,
    capacity)`, one table's cache over its batches' distinct ids -> (fetched, written back)."""
    ids = [source.batch(b).ids for b in range(batches)]  # [batch][table] ids
    totals = np.zeros(2)
    for t, rows in enumerate(config.data.table_sizes):
        sets = [np.unique(batch[t]) for batch in ids]
        totals += served(sets, rows, config.cache.capacity_for(rows))
    return float(totals[0]), float(totals[1])


def lru_moves(config: TrainConfig, source, batches: int) -> tuple[float, float]:
    """A demand-filled cache's rows moved a step: fetched and evicted, past the filling."""
    served = lambda sets, rows, capacity: np.mean(lru_by_batch(sets, rows, capacity)[len(sets) // 2 :], axis=0)
    return per_table(config, source, batches, served)


def static_moves(config: TrainConfig, source, batches: int) -> tuple[float, float]:
    """The static cache's rows moved a step: its misses, profiled on the first half of the batches,
    fetched and written back each later batch."""

    def served(sets, rows, capacity):
        misses = np.mean(static_by_batch(sets, rows, capacity, profiled=len(sets) // 2))
        return np.array([misses, misses])

    return per_table(config, source, batches, served)


STATIC = Design(
    "static",
    "scratchkit.trainers.static:StaticCacheTrainer",
    "hot rows pinned on the device, profiled from a prefix",
    stages=("fetch", "write_back", "transfer", *TRAIN_STAGES),
    count=DemandCache(pinned=True),
    combine=one_after_another,
    moves=static_moves,
    compared=Compared.MEASURED,
)
LRU = Design(
    VictimPolicy.LRU.value,
    "scratchkit.trainers.cached:LRUCacheTrainer",
    "demand-filled cache, least recently used victim",
    stages=("fetch", "write_back", "transfer", *TRAIN_STAGES),
    count=DemandCache(),
    combine=one_after_another,
    moves=lru_moves,
    window_depth=0,
    compared=Compared.PROJECTED,
)
LFU = Design(
    VictimPolicy.LFU.value,
    "scratchkit.trainers.cached:LFUCacheTrainer",
    "demand-filled cache, least frequently used victim",
    stages=("fetch", "write_back", "transfer", *TRAIN_STAGES),
    count=DemandCache(counts_uses=True),
    combine=one_after_another,
    moves=lru_moves,  # the same fills as lru's, other victims
    window_depth=0,
    compared=Compared.MEASURED,
)
