"""Which cached row to give up when a miss needs a slot: caches that look *backwards*.

The choice itself is a `VictimPolicy` (scratchkit/config.py): LRU or LFU here, FURTHEST in
ScratchPipe's planner. Each chooser keeps a little metadata per slot of one table's cache and
answers one question:
"given these occupied slots that the current batch does not use, which `k` go?". The rules are
written out exactly, because the tests replay them with an independent plain-Python cache and
expect the same hit count, lookup for lookup.

How a batch is processed (the same for every policy and for the simulators in the tests):

1. The batch's working set `U` (the distinct ids of the table) is looked up all at once. Every
   *lookup* whose id is cached counts as a hit (hits are counted per lookup, docs/design.md).
2. The misses need `m` slots: free slots first (ascending), then `m - free` victims chosen by the
   policy among occupied slots whose id is **not** in `U` (a batch never evicts its own rows).
3. The misses are fetched before the batch trains; then every id of `U` is *touched* at this step.

Recency is the key `(step, id)`: an id used at a later step is more recent, and ids of the same
batch are ordered by id (the batch's unique ids are processed in ascending order). Keys are
distinct, so "the k least recent" is always one well-defined set.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from scratchkit.config import VictimPolicy
from scratchkit.data.checks import check_batch


class VictimChooser(ABC):
    """Per-slot metadata of one table's cache, and the victim choice."""

    def __init__(self, capacity: int, num_rows: int):
        self.capacity, self.num_rows = capacity, num_rows
        # (step, id) packed into one int64: step * num_rows + id; -1 = slot never used
        self.recency = np.full(capacity, -1, dtype=np.int64)

    def touch(self, slots: np.ndarray, ids: np.ndarray, counts: np.ndarray, step: int) -> None:
        """The batch of `step` used `ids` [u] (now in `slots` [u]), `counts` [u] lookups each."""
        self.recency[slots] = step * self.num_rows + ids

    def forget(self, slots: np.ndarray) -> None:
        """These slots were emptied (their rows evicted)."""
        self.recency[slots] = -1

    @abstractmethod
    def choose(self, candidates: np.ndarray, k: int) -> np.ndarray:
        """`k` victims among `candidates` (occupied slots the batch does not use), `k <= len`."""


def first_by_keys(keys: tuple[np.ndarray, ...], candidates: np.ndarray, k: int) -> np.ndarray:
    """The k candidates that come first when sorted by `keys` (last key = primary, as lexsort),
    in that order. The obvious way: the twin that `first_k` and ScratchPipe's planner
    (`least_urgent`) are tested against."""
    order = np.lexsort(tuple(key[candidates] for key in keys))
    return candidates[order[:k]]


def first_k(keys: tuple[np.ndarray, ...], candidates: np.ndarray, k: int) -> np.ndarray:
    """`first_by_keys(keys, candidates, k)`, the same k in the same order, without sorting every
    candidate: the k-th smallest primary key (np.partition, one pass on average) splits the
    candidates into those certainly in (a smaller key), those tied with it, and the rest; the ties
    are settled by the next key the same way (or, on the last, by their order among the
    candidates, as lexsort's stable order does), and only the k chosen are sorted. A demand cache
    gives up ~1,500 of ~6,000 candidates a table on `small`: 34 us this way, 234 us by lexsort."""
    if k >= len(candidates):
        return first_by_keys(keys, candidates, k)
    if k <= 0:
        return candidates[:0]
    primary = keys[-1][candidates]  # [c]
    threshold = np.partition(primary, k - 1)[k - 1]
    below, tied = candidates[primary < threshold], candidates[primary == threshold]
    wanted = k - len(below)  # 1 .. len(tied)
    tied = first_k(keys[:-1], tied, wanted) if len(keys) > 1 else tied[:wanted]
    return first_by_keys(keys, np.concatenate([below, tied]), k)


class LRUVictims(VictimChooser):
    """Least recently used: the victims are the candidates with the smallest `(step, id)`."""

    def choose(self, candidates, k):
        return first_k((self.recency,), candidates, k)


class LFUVictims(VictimChooser):
    """Least frequently used, counting lookups since the row entered the cache.

    A row's count starts at its lookups in the batch that fetched it and grows by its lookups in
    every later batch; eviction resets it (the classic in-cache LFU, as libCacheSim's `LFU`). The
    victims are the candidates with the smallest count; ties go to the least recent `(step, id)`.
    Its known weakness, visible in the notebooks: rows that were hot long ago keep big counts and
    squat in the cache ("cache pollution"), while new hot rows start from a small count.
    """

    def __init__(self, capacity, num_rows):
        super().__init__(capacity, num_rows)
        self.count = np.zeros(capacity, dtype=np.int64)

    def touch(self, slots, ids, counts, step):
        super().touch(slots, ids, counts, step)
        self.count[slots] += counts  # slots are distinct: fancy += is safe

    def forget(self, slots):
        super().forget(slots)
        self.count[slots] = 0

    def choose(self, candidates, k):
        return first_k((self.recency, self.count), candidates, k)


def profile_hot_ids(source, num_batches: int, capacities: list[int]) -> list[np.ndarray]:
    """The static cache's pinned set: per table, the `capacities[t]` most looked-up ids over
    batches `0 .. num_batches-1` of `source`, sorted ascending.

    Ranking: more lookups first; equal counts (including never-seen rows, which fill a cache
    larger than the rows the prefix touched) go to the smaller id. Deterministic.
    """
    if num_batches <= 0:
        raise ValueError(f"the static cache needs at least one batch to profile, got {num_batches}")
    sizes = source.table_sizes
    counts = [np.zeros(n, dtype=np.int64) for n in sizes]
    for b in range(min(num_batches, len(source))):
        batch = source.batch(b)
        # a bad id would miscount, or make bincount fail obscurely
        check_batch(batch, sizes, b, num_dense=source.num_dense)
        for t, ids in enumerate(batch.ids):
            counts[t] += np.bincount(ids, minlength=sizes[t])
    # stable argsort of -count: descending count, ascending id among equals
    return [np.sort(np.argsort(-c, kind="stable")[:k]) for c, k in zip(counts, capacities)]


def victim_chooser(policy: VictimPolicy) -> type[VictimChooser]:
    """The chooser class of a demand-filled cache for `policy` (LRU or LFU)."""
    choosers = {VictimPolicy.LRU: LRUVictims, VictimPolicy.LFU: LFUVictims}
    if policy not in choosers:
        raise ValueError(f"a demand-filled cache chooses victims by lru or lfu, not {policy.value!r}")
    return choosers[policy]
