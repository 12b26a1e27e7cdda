"""NumPy twins of plan.cu, the device planner's kernels (scratchpipe/device_plan.py): the
specification the `.cu` source is tested against, on every engine (tests/test_kernels_plan.py).

The planner never asks the host how long an array is until the end of a batch, so every array
whose length only the device knows (the working set, the misses, the free slots, the victims) is a
*buffer*: as long as it could be, its items first, then PAD. A kernel over one is launched over the
whole buffer and reads its count from the device (a one-item array, `count`), or stops at the
first PAD. Lengths come from the *inclusive scan* of 0/1 flags (`pos`): item i is flagged when
pos[i] != pos[i-1], goes to position pos[i]-1, and pos[-1] is how many there are.

Ids, slots and keys are int64; `dirty` and `hit` are bool.
"""

from __future__ import annotations

import numpy as np

PAD = np.iinfo(np.int64).max  # a buffer past its count: after every id, slot and key (plan.cu's SK_PAD)


def _flagged(pos: np.ndarray) -> np.ndarray:
    """[n] bool: the items an inclusive scan of flags counted."""
    return np.diff(pos, prepend=0) != 0


def _count_before(pos: np.ndarray, at) -> np.ndarray:
    """How many items the scan counted before each position of `at`."""
    at = np.asarray(at)
    return np.where(at > 0, pos[np.maximum(at, 1) - 1] if len(pos) else 0, 0)


# --------------------------------------------------------------------------- working set
def first_of_runs(ids: np.ndarray, order: np.ndarray) -> np.ndarray:
    """[n] 1 where ids[order] starts a run of equal ids (order sorts ids), else 0."""
    ordered = ids[order]
    return np.concatenate([[1], ordered[1:] != ordered[:-1]]).astype(np.int64)[: len(ids)]


def working_set(ids: np.ndarray, order: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique [n] sorted then PAD, inverse [n]) from the sort and the scan of first_of_runs:
    np.unique(ids, return_inverse=True) in buffers."""
    unique = np.full(len(ids), PAD, dtype=np.int64)
    heads = _flagged(pos)
    unique[pos[heads] - 1] = ids[order[heads]]
    inverse = np.empty(len(ids), dtype=np.int64)
    inverse[order] = pos - 1
    return unique, inverse


def lower_bounds(ordered: np.ndarray, values: np.ndarray, out: np.ndarray) -> None:
    """out[j] = the first position in `ordered` whose item is >= values[j]."""
    out[:] = np.searchsorted(ordered, values, side="left")


# --------------------------------------------------------------------------- flags and compaction
def in_range(values: np.ndarray, low: int, high: int) -> np.ndarray:
    """[n] 1 where low <= values[i] < high, else 0."""
    return ((values >= low) & (values < high)).astype(np.int64)


def compact(pos: np.ndarray, values: np.ndarray) -> np.ndarray:
    """[n] the flagged items of `values`, in order, then PAD."""
    out = np.full(len(values), PAD, dtype=np.int64)
    flagged = _flagged(pos)
    out[pos[flagged] - 1] = values[flagged]
    return out


def counts_at(pos: np.ndarray, at: np.ndarray, out: np.ndarray) -> None:
    """out[j] = how many items the scan counted before position at[j]."""
    out[:] = _count_before(pos, at)


# --------------------------------------------------------------------------- a batch's plan
def split_hits(slots: np.ndarray, count: np.ndarray, batch: int, hit_stamp: np.ndarray) -> np.ndarray:
    """[n] 1 for each miss (slot -1) among the first count[0] items, else 0; and every hit's slot
    stamped with the batch in hit_stamp [S]."""
    valid = np.arange(len(slots)) < count[0]
    hit_stamp[slots[valid & (slots >= 0)]] = batch
    return (valid & (slots < 0)).astype(np.int64)


def table_bounds(
    unique_at, miss_pos, free_pos, held_pos, slot_starts, unique_out, miss_at, free_at, held_at, need, take
):
    """Per table t (starts [T+1]): where its working set, misses, free slots and held slots start;
    per table [T]: the victims it needs (misses beyond its free slots) and the free slots it takes."""
    unique_out[:] = unique_at
    miss_at[:] = _count_before(miss_pos, unique_at)
    free_at[:] = _count_before(free_pos, slot_starts)
    held_at[:] = _count_before(held_pos, slot_starts)
    misses, free = np.diff(miss_at), np.diff(free_at)
    need[:] = np.maximum(misses - free, 0)
    take[:] = np.minimum(misses, free)


def victim_keys(
    slot_ids, last_planned, hit_stamp, table_of_slot, need, urgency, last_trained, batch, held_since, levels
) -> np.ndarray:
    """[S] each candidate slot's key, (table, urgency, last trained + 1, slot) packed into one
    int64, lowest evicted first; PAD for every other slot. A candidate holds an id, is not one of
    this batch's hits, is not held (planned at or after `held_since`), and its table needs victims."""
    slots = len(slot_ids)
    s = np.arange(slots, dtype=np.int64)
    t = table_of_slot
    keys = ((t * levels + urgency) * (batch + 2) + last_trained + 1) * slots + s
    candidate = (slot_ids >= 0) & (hit_stamp != batch) & (last_planned < held_since) & (need[t] > 0)
    return np.where(candidate, keys, PAD)


def victims_per_table(keys: np.ndarray, need, span: int, first, have, count) -> None:
    """With the keys sorted (table t's in [t*span, (t+1)*span)): where each table's candidates
    start, how many it has, and how many it gives up: min(need, have)."""
    tables = len(need)
    starts = np.searchsorted(keys, np.arange(tables + 1, dtype=np.int64) * span)
    first[:], have[:] = starts[:-1], np.diff(starts)
    count[:] = np.minimum(need, have)


def pick_victims(keys: np.ndarray, table_of_slot, first, count, chosen) -> None:
    """chosen [S] (zeroed) = 1 at each table's first count[t] candidates of the sorted keys."""
    real = np.flatnonzero(keys != PAD)
    slots = keys[real] % len(keys)
    t = table_of_slot[slots]
    chosen[slots[real - first[t] < count[t]]] = 1


def evict(victims, count, slot_ids, dirty) -> tuple[np.ndarray, np.ndarray]:
    """(victim_ids [n], written [n]): the id in each of the first count[0] victims' slots (then
    PAD), 1 where the slot was dirty; and those slots emptied in slot_ids."""
    n, v = len(victims), int(count[0])
    victim_ids, written = np.full(n, PAD, dtype=np.int64), np.zeros(n, dtype=np.int64)
    chosen = victims[:v]
    victim_ids[:v], written[:v] = slot_ids[chosen], dirty[chosen]
    slot_ids[chosen] = -1
    return victim_ids, written


def assign_miss_slots(miss_at, take, free_at, victim_at, free_slots, victims, n: int) -> np.ndarray:
    """Each of the misses' slot, table by table (table t's at miss_at[t]..miss_at[t+1]): its
    first take[t] get free_slots[free_at[t]:], the rest victims[victim_at[t]:] as far as table t's
    go; -1 past them and past the misses (of n)."""
    out = np.full(n, -1, dtype=np.int64)
    for t in range(len(take)):
        start, stop, k = int(miss_at[t]), int(miss_at[t + 1]), int(take[t])
        out[start : start + k] = free_slots[free_at[t] : free_at[t] + k]
        given = min(stop - start - k, int(victim_at[t + 1] - victim_at[t]))
        out[start + k : start + k + given] = victims[victim_at[t] : victim_at[t] + given]
    return out


def place(unique, count, miss_pos, miss_slots, batch, slots, slot_ids, dirty, last_planned) -> np.ndarray:
    """Every working-set id in its slot: a miss takes its slot from miss_slots (its id goes into
    slot_ids, clean); every slot is marked planned by the batch. slots [n] in place (-1 past
    count[0]); returns hit [n] bool."""
    u = int(count[0])
    hit = np.zeros(len(slots), dtype=bool)
    hit[:u] = slots[:u] >= 0
    missed = np.flatnonzero(~hit[:u])
    slots[missed] = miss_slots[miss_pos[missed] - 1]
    slots[u:] = -1
    placed = slots[missed]
    slot_ids[placed[placed >= 0]], dirty[placed[placed >= 0]] = unique[missed[placed >= 0]], False
    real = slots[:u][slots[:u] >= 0]
    last_planned[real] = batch
    return hit


def mark_trained(slots, batch: int, dirty, last_trained) -> None:
    """The batch's slots (-1: none) are dirty, last trained by the batch."""
    real = slots[slots >= 0]
    dirty[real], last_trained[real] = True, batch


def to_local(ids, slots, count, table_of_slot, row_starts, slot_starts) -> tuple[np.ndarray, np.ndarray]:
    """(ids, slots) of the first count[0] items made table-local (the table is the slot's);
    -1 past them and where a slot is -1."""
    n, c = len(ids), int(count[0])
    ids_out, slots_out = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    real = np.flatnonzero(slots[:c] >= 0)
    t = table_of_slot[slots[real]]
    ids_out[real], slots_out[real] = ids[real] - row_starts[t], slots[real] - slot_starts[t]
    return ids_out, slots_out


def to_global(ids, table_of_slot, row_starts) -> np.ndarray:
    """[S] each slot's table-local id (-1: free) as a global id: id + its table's first row."""
    return np.where(ids >= 0, ids + row_starts[table_of_slot], -1)


def gather_ids(values, index) -> np.ndarray:
    """values[index]"""
    return values[index]


PLAN_TWINS = (
    first_of_runs,
    working_set,
    lower_bounds,
    in_range,
    compact,
    counts_at,
    split_hits,
    table_bounds,
    victim_keys,
    victims_per_table,
    pick_victims,
    evict,
    assign_miss_slots,
    place,
    mark_trained,
    to_local,
    to_global,
    gather_ids,
)
