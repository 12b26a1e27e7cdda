"""NumPy twins of the CUDA kernels: same arguments, same results, written to be read.

Each function here does what the kernel of the same name in `hashmap.cu`, `rows.cu`,
`embedding_bag.cu`, `plan.cu` or `tbe.cu` does, in the most direct NumPy (or plain Python) there
is. The tests run the `.cu` sources (host build, CuPy) against these functions, so they are the
specification; `TwinEngine` puts them behind the launched engines' interface.

Bit-for-bit agreement with the kernels comes from doing float arithmetic in the same order:
- pooled sums and coalesced gradients add in lookup order (`np.add.at` applies its additions one
  index after the other, in the order given, like a kernel thread walking its bag);
- row-wise Adagrad's mean of g*g sums the columns left to right, as the kernel's loop does
  (`.sum(axis=1)` would add pairwise and differ in the last bit);
- the row update is one fused multiply-add; NumPy has none, so `fma_f32` computes it exactly.

Hash map layout matches too, not just query answers: inserting ids one after the other, in order,
is what the serial host build does. A GPU inserts concurrently, so its buckets may differ, while
every query answer stays the same.
"""

from __future__ import annotations

import numpy as np

from ..device_work import launched

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


def hashmap_insert(keys: np.ndarray, values: np.ndarray, ids: np.ndarray, slots: np.ndarray) -> tuple[int, int]:
    """Store ids[i] -> slots[i] in the first EMPTY or TOMBSTONE bucket, one id after the other.

    Returns (tombstones reused, ids that found no bucket), the kernel's `stats`.
    """
    mask = len(keys) - 1
    reused = failed = 0
    for id_, slot, bucket in zip(ids.tolist(), slots.tolist(), home_buckets(ids, mask).tolist()):
        for _ in range(len(keys)):
            if keys[bucket] in (EMPTY, TOMBSTONE):
                reused += int(keys[bucket] == TOMBSTONE)
                keys[bucket], values[bucket] = id_, slot
                break
            bucket = (bucket + 1) & mask
        else:
            failed += 1
    return reused, failed


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


def fma_f32(a, b, c) -> np.ndarray:
    """a*b + c in float32 with a single rounding, like C's fmaf and a GPU's FFMA.

    In float64, a*b is exact (24+24 significant bits fit in 53) and TwoSum gives p + c = s + t
    exactly. Rounding s to float32 is then right except when s lies exactly halfway between two
    float32 numbers and the lost part t tips the true value to one side: fix those.
    """
    a, b, c = (np.asarray(x, dtype=np.float32).astype(np.float64) for x in (a, b, c))
    p = a * b
    s = p + c
    bp = s - p
    t = (p - (s - bp)) + (c - bp)  # s + t == a*b + c exactly
    r = np.asarray(s.astype(np.float32))
    r64 = r.astype(np.float64)
    side = np.where(s > r64, np.float32(np.inf), np.float32(-np.inf))
    other = np.nextafter(r, side)  # the float32 neighbour on s's side of r
    halfway = (s != r64) & ((r64 + other.astype(np.float64)) * 0.5 == s)
    tipped = halfway & (t != 0) & (np.sign(t) == np.sign(s - r64))
    return np.where(tipped, other, r).astype(np.float32)


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


# ------------------------------------------------------------- the device planner's steps
def to_local(values: np.ndarray, where: np.ndarray, table_of_slot: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """values[i] - starts[table of slot where[i]]: global ids or slots made table-local."""
    return values - starts[table_of_slot[where]]


def assign_miss_slots(miss_at, take, free_at, victim_at, free_slots, victims, n: int) -> np.ndarray:
    """Each of the n misses' slot, table by table (table t's at miss_at[t]..miss_at[t+1]): its
    first take[t] get free_slots[free_at[t]:], the rest victims[victim_at[t]:], in order."""
    out = np.empty(n, dtype=np.int64)
    for t in range(len(take)):
        start, stop, k = int(miss_at[t]), int(miss_at[t + 1]), int(take[t])
        out[start : start + k] = free_slots[free_at[t] : free_at[t] + k]
        out[start + k : stop] = victims[victim_at[t] : victim_at[t] + stop - start - k]
    return out


def victim_keys(candidates, table_of_slot, urgency, last_trained, levels: int, batch: int, slots: int) -> np.ndarray:
    """One int64 per candidate slot ordering (table, urgency, last trained, slot), lowest first."""
    return (
        (table_of_slot[candidates] * levels + urgency[candidates]) * (batch + 2) + last_trained[candidates] + 1
    ) * slots + candidates


# ------------------------------------------------------- table-batched embedding (tbe.cu)
# The batch as the kernels take it (T tables, B bags, N lookups in all):
#     tables      [T] arrays [rows_t, dim]  each table's rows (or a cache's, a scratchpad's slots)
#     index       [N]    the row each lookup reads: index[j] - index_base[t] for table t's lookups
#     starts      [T+1]  table t's lookups are positions starts[t] .. starts[t+1]
#     offsets     [T*B]  table t's bag b starts at lookup starts[t] + offsets[t*B + b]
#     sorted_keys [N]    each lookup's global id (its table's first row, plus its id), sorted stably
#     sorted_at   [N]    the lookup at each sorted position: a key's lookups in lookup order


def bags_of(at: np.ndarray, t: np.ndarray, starts: np.ndarray, offsets: np.ndarray, num_bags: int) -> np.ndarray:
    """The bag of each lookup at positions `at` of tables `t` (the last bag starting at or before it)."""
    bag = np.empty(len(at), dtype=np.int64)
    for table in np.unique(t):
        mine = t == table
        bags = offsets[table * num_bags : (table + 1) * num_bags]
        bag[mine] = np.searchsorted(bags, at[mine] - starts[table], side="right") - 1
    return bag


def tables_of(at: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The table of each lookup at positions `at`."""
    return np.searchsorted(starts, at, side="right") - 1


def tbe_forward(tables, index, index_base, starts, offsets, pooled) -> None:
    """pooled[b, t] = the sum of table t's rows over the lookups of its bag b, in lookup order."""
    num_bags = pooled.shape[0]
    pooled[...] = 0
    for t, rows in enumerate(tables):
        at = np.arange(starts[t], starts[t + 1])
        bag = bags_of(at, np.full(len(at), t), starts, offsets, num_bags)
        np.add.at(pooled[:, t], bag, rows[index[at] - index_base[t]])


def summed_runs(grad, sorted_keys, sorted_at, index, index_base, starts, offsets):
    """The distinct keys' runs: (table [R], row [R] each run updates, summed gradient [R, dim]),
    each run's gradients added in lookup order."""
    n, num_bags = len(sorted_keys), grad.shape[0]
    first = np.ones(n, dtype=bool)
    first[1:] = sorted_keys[1:] != sorted_keys[:-1]  # a run starts here
    run = np.cumsum(first) - 1  # [N] the run of each sorted position
    t = tables_of(sorted_at, starts)  # [N]
    bag = bags_of(sorted_at, t, starts, offsets, num_bags)  # [N]
    summed = np.zeros((int(first.sum()), grad.shape[2]), dtype=np.float32)
    np.add.at(summed, run, grad[bag, t])
    t_run = t[first]
    rows = index[sorted_at[first]] - index_base[t_run]
    return t_run, rows, summed


def tbe_backward_sgd(tables, grad, sorted_keys, sorted_at, index, index_base, starts, offsets, lr) -> None:
    """row = fma(-lr, g, row) for every distinct looked-up row, g its summed gradient. In place."""
    t_run, rows, g = summed_runs(grad, sorted_keys, sorted_at, index, index_base, starts, offsets)
    for t, table in enumerate(tables):
        mine = t_run == t
        table[rows[mine]] = fma_f32(-np.float32(lr), g[mine], table[rows[mine]])


def tbe_backward_rowwise_adagrad(
    tables, states, grad, sorted_keys, sorted_at, index, index_base, starts, offsets, lr, eps
) -> None:
    """s += mean(g*g); row = fma(-lr, g / (sqrt(s) + eps), row). states[t] is [rows_t, 1]."""
    t_run, rows, g = summed_runs(grad, sorted_keys, sorted_at, index, index_base, starts, offsets)
    sum_sq = np.zeros(len(rows), dtype=np.float32)
    for c in range(g.shape[1]):  # column order, as the kernel adds them
        sum_sq += g[:, c] * g[:, c]
    for t, (table, state) in enumerate(zip(tables, states)):
        mine = t_run == t
        r = rows[mine]
        s = state[r, 0] + sum_sq[mine] / np.float32(g.shape[1])
        state[r, 0] = s
        denom = np.sqrt(s) + np.float32(eps)
        table[r] = fma_f32(-np.float32(lr), g[mine] / denom[:, None], table[r])


def tbe_backward_adagrad(
    tables, states, grad, sorted_keys, sorted_at, index, index_base, starts, offsets, lr, eps
) -> None:
    """s += g*g; row = fma(-lr, g / (sqrt(s) + eps), row), element by element. states[t] [rows_t, dim]."""
    t_run, rows, g = summed_runs(grad, sorted_keys, sorted_at, index, index_base, starts, offsets)
    for t, (table, state) in enumerate(zip(tables, states)):
        mine = t_run == t
        r, gt = rows[mine], g[mine]
        s = state[r] + gt * gt
        state[r] = s
        table[r] = fma_f32(-np.float32(lr), gt / (np.sqrt(s) + np.float32(eps)), table[r])


def tbe_count_hits(slot_ids, index, keys, key_base, starts, hits) -> None:
    """hits[0] += the lookups j whose slot index[j] of their table holds their id keys[j] - key_base[t]."""
    for t, ids in enumerate(slot_ids):
        at = slice(starts[t], starts[t + 1])
        hits[0] += np.count_nonzero(ids[index[at]] == keys[at] - key_base[t])


def _stands_for_its_kernel(function):
    """A twin as an engine's method: each call counts as the launch of the kernel it twins
    (device_work.launched), so a CPU run counts what a GPU run would launch."""

    def counted(*args, **kwargs):
        launched(function.__name__)
        return function(*args, **kwargs)

    counted.__name__, counted.__doc__ = function.__name__, function.__doc__
    return staticmethod(counted)


class TwinEngine:
    """The twins behind the same interface as the launched engines (host build, CuPy)."""

    name = "twin"
    xp = np
    hashmap_query = _stands_for_its_kernel(hashmap_query)
    hashmap_insert = _stands_for_its_kernel(hashmap_insert)
    hashmap_erase = _stands_for_its_kernel(hashmap_erase)
    gather_rows = _stands_for_its_kernel(gather_rows)
    scatter_rows = _stands_for_its_kernel(scatter_rows)
    embedding_bag_forward = _stands_for_its_kernel(embedding_bag_forward)
    embedding_bag_backward_sgd = _stands_for_its_kernel(embedding_bag_backward_sgd)
    embedding_bag_backward_rowwise_adagrad = _stands_for_its_kernel(embedding_bag_backward_rowwise_adagrad)
    embedding_bag_backward_adagrad = _stands_for_its_kernel(embedding_bag_backward_adagrad)
    to_local = _stands_for_its_kernel(to_local)
    assign_miss_slots = _stands_for_its_kernel(assign_miss_slots)
    victim_keys = _stands_for_its_kernel(victim_keys)
    tbe_forward = _stands_for_its_kernel(tbe_forward)
    tbe_backward_sgd = _stands_for_its_kernel(tbe_backward_sgd)
    tbe_backward_rowwise_adagrad = _stands_for_its_kernel(tbe_backward_rowwise_adagrad)
    tbe_backward_adagrad = _stands_for_its_kernel(tbe_backward_adagrad)
    tbe_count_hits = _stands_for_its_kernel(tbe_count_hits)

    @staticmethod
    def addresses(arrays) -> list:
        """The twins take the tables themselves where the kernels take their addresses."""
        return list(arrays)
