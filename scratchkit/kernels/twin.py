"""NumPy twins of the CUDA kernels: same arguments, same results, written to be read.

Each function here does what the kernel of the same name in `hashmap.cu`, `rows.cu` or
`embedding_bag.cu` does (`plan.cu`'s are in twin_plan.py, `tbe.cu`'s in twin_tbe.py), in the most
direct NumPy (or plain Python) there is. The tests run the `.cu` sources (host build, CuPy)
against these functions, so they are the specification.

Bit-for-bit agreement with the kernels comes from doing float arithmetic in the same order:
- pooled sums and coalesced gradients add in lookup order (`np.add.at` applies its additions one
  index after the other, in the order given, like a kernel thread walking its bag);
- row-wise Adagrad's mean of g*g sums the columns left to right, as the kernel's loop does
  (`.sum(axis=1)` would add pairwise and differ in the last bit);
- the row update is one fused multiply-add; NumPy has none, so `fma_f32` (floats.py) computes it exactly.

Hash map layout matches too, not just query answers: inserting ids one after the other, in order,
is what the serial host build does. A GPU inserts concurrently, so its buckets may differ, while
every query answer stays the same.
"""

from __future__ import annotations

import numpy as np

from scratchkit.device_work import launched
from scratchkit.kernels.floats import fma_f32
from scratchkit.kernels.twin_plan import PLAN_TWINS
from scratchkit.kernels.twin_tbe import TBE_TWINS

EMPTY = -1  # a bucket never used
TOMBSTONE = -2  # a bucket whose id was erased; probing walks past it, insert may reuse it


# ---------------------------------------------------------------------------------- hash map
def hash_ids(ids: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on int64 ids, as uint64 (the kernel's `sk_hash`)."""
    x = np.asarray(ids, dtype=np.int64).view(np.uint64).copy()
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def home_buckets(ids: np.ndarray, mask: int) -> np.ndarray:
    """The first bucket each id's probe sequence looks at: hash(id) & mask."""
    return (hash_ids(ids) & np.uint64(mask)).astype(np.int64)


def find_bucket(keys: np.ndarray, id_: int, home: int) -> int:
    """The bucket holding id_, or -1: walk from `home` past other ids and tombstones to an EMPTY."""
    if id_ < 0:
        return -1  # EMPTY and TOMBSTONE are negative: no id matches them
    mask, bucket = len(keys) - 1, home
    for _ in range(len(keys)):
        if keys[bucket] == id_:
            return bucket
        if keys[bucket] == EMPTY:
            return -1
        bucket = (bucket + 1) & mask
    return -1


def hashmap_query(keys: np.ndarray, values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The slot of each id, -1 when absent."""
    homes = home_buckets(ids, len(keys) - 1).tolist()
    found = [find_bucket(keys, id_, home) for id_, home in zip(ids.tolist(), homes)]
    return np.array([values[b] if b >= 0 else -1 for b in found], dtype=np.int64)


def hashmap_insert(keys: np.ndarray, values: np.ndarray, ids: np.ndarray, slots: np.ndarray, stats=None):
    """Store ids[i] -> slots[i] in the first EMPTY or TOMBSTONE bucket, one id after the other; a
    pair whose id or slot is negative is padding, skipped.

    Returns (tombstones reused, ids that found no bucket), the kernel's `stats`; given `stats`
    ([2] uint64), adds them there instead, as the kernel does, and returns None.
    """
    mask = len(keys) - 1
    reused = failed = 0
    for id_, slot, bucket in zip(ids.tolist(), slots.tolist(), home_buckets(ids, mask).tolist()):
        if id_ < 0 or slot < 0:
            continue
        for _ in range(len(keys)):
            if keys[bucket] in (EMPTY, TOMBSTONE):
                reused += int(keys[bucket] == TOMBSTONE)
                keys[bucket], values[bucket] = id_, slot
                break
            bucket = (bucket + 1) & mask
        else:
            failed += 1
    if stats is None:
        return reused, failed
    stats += np.array([reused, failed], dtype=stats.dtype)
    return None


def hashmap_stamp(keys: np.ndarray, values: np.ndarray, ids: np.ndarray, value: int, out: np.ndarray) -> None:
    """out[slot of id] = value for each id in the map (ids distinct; absent ones skipped)."""
    slots = hashmap_query(keys, values, ids)
    out[slots[slots >= 0]] = value


def hashmap_erase(keys: np.ndarray, values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Turn each id's bucket into a TOMBSTONE; return the slot it had (-1 when absent)."""
    out = np.full(len(ids), -1, dtype=np.int64)
    for i, (id_, home) in enumerate(zip(ids.tolist(), home_buckets(ids, len(keys) - 1).tolist())):
        bucket = find_bucket(keys, id_, home)
        if bucket >= 0:
            out[i] = values[bucket]
            keys[bucket], values[bucket] = TOMBSTONE, -1
    return out


# -------------------------------------------------------------------------------------- rows
def gather_rows(table: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """out[i] = table[slots[i]]   ([n, width])"""
    return table[slots]


def scatter_rows(table: np.ndarray, slots: np.ndarray, src: np.ndarray) -> None:
    """table[slots[i]] = src[i], in place (slots distinct)."""
    table[slots] = src


# ----------------------------------------------------------------------------- embedding bag
def bag_of_lookups(offsets: np.ndarray, nnz: int) -> np.ndarray:
    """[nnz] the bag each lookup belongs to (bag b = offsets[b] .. offsets[b+1], last to nnz)."""
    lengths = np.diff(np.append(offsets, nnz))
    return np.repeat(np.arange(len(offsets)), lengths)


def embedding_bag_forward(rows: np.ndarray, slots: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """pooled[b] = sum of rows[slots[j]] over the lookups j of bag b, added in lookup order."""
    pooled = np.zeros((len(offsets), rows.shape[1]), dtype=np.float32)  # [num_bags, dim]
    np.add.at(pooled, bag_of_lookups(offsets, len(slots)), rows[slots])
    return pooled


def coalesce(slots: np.ndarray, offsets: np.ndarray, grad_pooled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique slots ascending, [U, dim] summed gradient of each), duplicates added in lookup order."""
    unique_slots, where = np.unique(slots, return_inverse=True)
    grad = np.zeros((len(unique_slots), grad_pooled.shape[1]), dtype=np.float32)
    np.add.at(grad, where, grad_pooled[bag_of_lookups(offsets, len(slots))])
    return unique_slots, grad


def embedding_bag_backward_sgd(
    rows: np.ndarray, slots: np.ndarray, offsets: np.ndarray, grad_pooled: np.ndarray, lr: float
) -> None:
    """row = fma(-lr, g, row) for every looked-up row, g its coalesced gradient. In place."""
    unique_slots, grad = coalesce(slots, offsets, grad_pooled)
    rows[unique_slots] = fma_f32(-np.float32(lr), grad, rows[unique_slots])


def embedding_bag_backward_rowwise_adagrad(
    rows: np.ndarray,
    state: np.ndarray,
    slots: np.ndarray,
    offsets: np.ndarray,
    grad_pooled: np.ndarray,
    lr: float,
    eps: float,
) -> None:
    """s += mean(g*g); row = fma(-lr, g / (sqrt(s) + eps), row). state is [capacity, 1]. In place."""
    unique_slots, grad = coalesce(slots, offsets, grad_pooled)
    sum_sq = np.zeros(len(unique_slots), dtype=np.float32)
    for c in range(grad.shape[1]):  # column order, as the kernel adds them
        sum_sq += grad[:, c] * grad[:, c]
    s = state[unique_slots, 0] + sum_sq / np.float32(grad.shape[1])
    state[unique_slots, 0] = s
    denom = np.sqrt(s) + np.float32(eps)  # [U]
    rows[unique_slots] = fma_f32(-np.float32(lr), grad / denom[:, None], rows[unique_slots])


def embedding_bag_backward_adagrad(
    rows: np.ndarray,
    state: np.ndarray,
    slots: np.ndarray,
    offsets: np.ndarray,
    grad_pooled: np.ndarray,
    lr: float,
    eps: float,
) -> None:
    """s += g*g; row = fma(-lr, g / (sqrt(s) + eps), row), per element. state is [capacity, dim]."""
    unique_slots, grad = coalesce(slots, offsets, grad_pooled)
    s = state[unique_slots] + grad * grad
    state[unique_slots] = s
    rows[unique_slots] = fma_f32(-np.float32(lr), grad / (np.sqrt(s) + np.float32(eps)), rows[unique_slots])


def _counted(kernel):
    """A twin called as an engine's kernel: one launch counted (device_work), then the twin."""

    def launch(*args, **kwargs):
        launched(kernel.__name__)
        return kernel(*args, **kwargs)

    return staticmethod(launch)


class TwinEngine:
    """The twins behind the same interface as the launched engines (host build, CuPy): each call
    counts as the launch of its kernel, as theirs do."""

    name = "twin"
    xp = np

    @staticmethod
    def addresses(arrays) -> list:
        """The twins take the tables themselves where the kernels take their addresses."""
        return list(arrays)


for _kernel in (
    hashmap_query,
    hashmap_insert,
    hashmap_erase,
    hashmap_stamp,
    gather_rows,
    scatter_rows,
    embedding_bag_forward,
    embedding_bag_backward_sgd,
    embedding_bag_backward_rowwise_adagrad,
    embedding_bag_backward_adagrad,
    *PLAN_TWINS,
    *TBE_TWINS,
):
    setattr(TwinEngine, _kernel.__name__, _counted(_kernel))
