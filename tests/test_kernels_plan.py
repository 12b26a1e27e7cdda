"""plan.cu (the device planner's kernels) on every engine, each against the obvious NumPy: the
working set from a sort and a scan, compaction into padded buffers, each table's bounds, the victim
choice in the planner's order, and the misses placed; a kernel over a padded buffer reads its count
from the device and leaves the padding alone."""

import numpy as np
import pytest

from scratchkit.kernels.twin_plan import PAD


class On:
    """An engine's arrays: in (`dev`), back out (`host`), and its scans (the planner's xp.cumsum)."""

    def __init__(self, engine):
        self.engine, self.xp = engine, engine.xp

    def dev(self, a, dtype=np.int64):
        return self.xp.asarray(np.asarray(a, dtype=dtype))

    def host(self, a):
        return a if self.xp is np else self.xp.asnumpy(a)

    def scan(self, flags):
        return self.xp.cumsum(flags)

    def ints(self, n):
        return self.xp.empty(n, dtype=self.xp.int64)


def slot_space(capacities):
    starts = np.concatenate([[0], np.cumsum(capacities)]).astype(np.int64)
    return starts, np.repeat(np.arange(len(capacities)), capacities).astype(np.int64)


@pytest.mark.parametrize("n", [1, 2, 300])
def test_the_working_set_is_np_unique_in_a_padded_buffer(engine, n):
    on, rng = On(engine), np.random.default_rng(n)
    ids = rng.integers(0, max(n // 3, 1), n) * 7 + 5
    d = on.dev(ids)
    order = on.xp.argsort(d)
    pos = on.scan(engine.first_of_runs(d, order))
    unique, inverse = (on.host(a) for a in engine.working_set(d, order, pos))
    want, want_inverse = np.unique(ids, return_inverse=True)
    assert on.host(pos)[-1] == len(want)
    np.testing.assert_array_equal(unique[: len(want)], want)
    assert (unique[len(want) :] == PAD).all()
    np.testing.assert_array_equal(inverse, want_inverse)


def test_lower_bounds_are_searchsorted(engine):
    on = On(engine)
    ordered = np.array([0, 3, 3, 9, 40, PAD, PAD], np.int64)
    values = np.array([-1, 0, 3, 4, 40, 41, 10**12], np.int64)
    out = on.ints(len(values))
    engine.lower_bounds(on.dev(ordered), on.dev(values), out)
    np.testing.assert_array_equal(on.host(out), np.searchsorted(ordered, values))


@pytest.mark.parametrize("seed", range(4))
def test_flags_compact_and_count_as_boolean_masks_would(engine, seed):
    on, rng = On(engine), np.random.default_rng(seed)
    values = rng.integers(-3, 10, 200)
    flags = on.host(engine.in_range(on.dev(values), -1, 4))
    mask = (values >= -1) & (values < 4)
    np.testing.assert_array_equal(flags, mask)
    pos = on.scan(on.dev(flags))
    out = on.host(engine.compact(pos, on.dev(values)))
    np.testing.assert_array_equal(out[: mask.sum()], values[mask])
    assert (out[mask.sum() :] == PAD).all()
    at = np.array([0, 1, 50, 200], np.int64)
    counted = on.ints(len(at))
    engine.counts_at(pos, on.dev(at), counted)
    np.testing.assert_array_equal(on.host(counted), [mask[:a].sum() for a in at])


def test_split_hits_flags_the_misses_of_the_counted_items_and_stamps_the_hits(engine):
    on = On(engine)
    slots = np.array([4, -1, 0, -1, 7, -1, -1], np.int64)  # the last two: past the count
    stamp = on.dev(np.full(9, -5))
    flags = on.host(engine.split_hits(on.dev(slots), on.dev([5]), 12, stamp))
    np.testing.assert_array_equal(flags, [0, 1, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(on.host(stamp), [12, -5, -5, -5, 12, -5, -5, 12, -5])


def test_table_bounds_count_each_tables_misses_free_and_held_slots(engine):
    on, rng = On(engine), np.random.default_rng(3)
    starts, _ = slot_space([6, 1, 9])
    unique_at = np.array([0, 5, 5, 12], np.int64)  # 12 of the buffer's 14 are the working set
    miss, free, held = rng.random(14) < 0.5, rng.random(16) < 0.4, rng.random(16) < 0.3
    miss[12:] = False
    out = [on.ints(4) for _ in range(4)] + [on.ints(3) for _ in range(2)]
    scans = [on.scan(on.dev(f)) for f in (miss, free, held)]
    engine.table_bounds(on.dev(unique_at), *scans, on.dev(starts), *out)
    unique_out, miss_at, free_at, held_at, need, take = (on.host(a) for a in out)
    np.testing.assert_array_equal(unique_out, unique_at)
    np.testing.assert_array_equal(miss_at, [miss[:a].sum() for a in unique_at])
    np.testing.assert_array_equal(free_at, [free[:a].sum() for a in starts])
    np.testing.assert_array_equal(held_at, [held[:a].sum() for a in starts])
    misses, spare = np.diff(miss_at), np.diff(free_at)
    np.testing.assert_array_equal(need, np.maximum(misses - spare, 0))
    np.testing.assert_array_equal(take, np.minimum(misses, spare))


@pytest.mark.parametrize("seed", range(6))
def test_the_victims_are_each_tables_least_urgent_then_least_recent_unheld_slots(engine, seed):
    """victim_keys, a sort, victims_per_table, pick_victims and a compaction: per table, its first
    `need` candidates by (urgency, last trained, slot), all of them ascending; the obvious way:
    a lexsort per table of the candidates a mask finds."""
    on, rng = On(engine), np.random.default_rng(seed)
    capacities = [40, 25, 60]
    starts, table_of_slot = slot_space(capacities)
    slots, tables, batch, depth, levels = len(table_of_slot), len(capacities), 30, 2, 7
    slot_ids = np.where(rng.random(slots) < 0.9, rng.integers(0, 10**6, slots), -1)
    last_planned = rng.integers(20, batch, slots)
    hit_stamp = np.where(rng.random(slots) < 0.2, batch, 3)
    urgency, last_trained = rng.integers(0, levels, slots), rng.integers(-1, batch, slots)
    need = rng.integers(0, 20, tables) * (rng.random(tables) < 0.8)
    need[int(rng.integers(tables))] = 10**4  # more than it has: it gives what it has
    dirty = rng.random(slots) < 0.5
    keys = engine.victim_keys(
        *(on.dev(a) for a in (slot_ids, last_planned, hit_stamp, table_of_slot, need, urgency, last_trained)),
        batch,
        batch - depth,
        levels,
    )
    keys = on.xp.sort(keys)
    first, have, count, victim_at = on.ints(tables), on.ints(tables), on.ints(tables), on.dev(np.zeros(tables + 1))
    engine.victims_per_table(keys, on.dev(need), levels * (batch + 2) * slots, first, have, count)
    on.xp.cumsum(count, out=victim_at[1:])
    chosen = on.dev(np.zeros(slots))
    engine.pick_victims(keys, on.dev(table_of_slot), first, count, chosen)
    victims = engine.compact(on.scan(chosen), on.dev(np.arange(slots)))

    candidate = (slot_ids >= 0) & (hit_stamp != batch) & (last_planned < batch - depth)
    want, want_have = [], []
    for t in range(tables):
        mine = np.flatnonzero(candidate & (table_of_slot == t))
        want_have.append(len(mine) if need[t] else 0)
        ordered = mine[np.lexsort((mine, last_trained[mine], urgency[mine]))]
        want += sorted(ordered[: need[t]])
    np.testing.assert_array_equal(on.host(have), want_have)
    np.testing.assert_array_equal(on.host(count), np.minimum(need, want_have))
    got = on.host(victims)
    np.testing.assert_array_equal(got[: len(want)], want)
    assert (got[len(want) :] == PAD).all()

    ids_on_device, dirty_on_device = on.dev(slot_ids.copy()), on.dev(dirty, bool)
    victim_ids, written = engine.evict(victims, victim_at[tables:], ids_on_device, dirty_on_device)
    np.testing.assert_array_equal(on.host(victim_ids)[: len(want)], slot_ids[want])
    assert (on.host(victim_ids)[len(want) :] == PAD).all()
    np.testing.assert_array_equal(on.host(written), np.append(dirty[want], np.zeros(slots - len(want))))
    emptied = slot_ids.copy()
    emptied[want] = -1
    np.testing.assert_array_equal(on.host(ids_on_device), emptied)


@pytest.mark.parametrize("seed", range(6))
def test_assign_miss_slots_gives_each_table_its_free_slots_then_its_victims(engine, seed):
    rng = np.random.default_rng(seed)
    tables = int(rng.integers(1, 6))
    misses = rng.integers(0, 12, tables)
    take = np.minimum(misses, rng.integers(0, 12, tables))  # free slots each table takes
    free_counts = take + rng.integers(0, 4, tables)
    victim_counts = np.maximum(misses - take - rng.integers(0, 2, tables), 0)  # maybe one short
    free_slots = np.sort(rng.choice(1000, int(free_counts.sum()), replace=False)).astype(np.int64)
    victims = np.sort(rng.choice(np.arange(1000, 2000), int(victim_counts.sum()), replace=False)).astype(np.int64)
    at = lambda counts: np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    miss_at, free_at, victim_at = at(misses), at(free_counts), at(victim_counts)
    want = []
    for t in range(tables):
        given = list(free_slots[free_at[t] : free_at[t] + take[t]]) + list(victims[victim_at[t] : victim_at[t + 1]])
        want += given + [-1] * (misses[t] - len(given))  # short of victims: no slot
    n = int(miss_at[-1]) + 3  # a buffer longer than the misses
    on = On(engine)
    got = engine.assign_miss_slots(
        *(on.dev(a) for a in (miss_at, take, free_at, victim_at, np.append(free_slots, PAD), np.append(victims, PAD))),
        n,
    )
    np.testing.assert_array_equal(on.host(got), want + [-1] * 3)


def test_place_puts_every_id_in_its_slot_and_marks_what_it_planned(engine):
    on = On(engine)
    unique = np.array([3, 8, 9, 15, 20, PAD], np.int64)
    slots = np.array([5, -1, 0, -1, -1, -1], np.int64)  # 8, 15, 20 miss
    miss_pos = np.cumsum(slots < 0)
    miss_slots = np.array([2, 7, -1, -1, -1, -1], np.int64)  # 20 got none: the planner reports it
    slot_ids, dirty, last_planned = on.dev(np.full(8, -1)), on.dev(np.ones(8), bool), on.dev(np.full(8, -9))
    d_slots = on.dev(slots)
    hit = engine.place(
        on.dev(unique), on.dev([5]), on.dev(miss_pos), on.dev(miss_slots), 4, d_slots, slot_ids, dirty, last_planned
    )
    np.testing.assert_array_equal(on.host(hit), [True, False, True, False, False, False])
    np.testing.assert_array_equal(on.host(d_slots), [5, 2, 0, 7, -1, -1])
    np.testing.assert_array_equal(on.host(slot_ids), [-1, -1, 8, -1, -1, -1, -1, 15])
    np.testing.assert_array_equal(on.host(dirty), [1, 1, 0, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(on.host(last_planned), [4, -9, 4, -9, -9, 4, -9, 4])
    trained = on.dev(np.full(8, -1))
    engine.mark_trained(on.dev([5, -1, 0]), 6, dirty, trained)
    np.testing.assert_array_equal(on.host(trained), [6, -1, -1, -1, -1, 6, -1, -1])
    assert on.host(dirty)[[0, 5]].all()


@pytest.mark.parametrize("n", [1, 300])
def test_ids_and_slots_go_table_local_and_back_by_their_slots_table(engine, n):
    on, rng = On(engine), np.random.default_rng(n)
    slot_starts, table_of_slot = slot_space([5, 40, 1, 17])
    row_starts = np.array([0, 100, 1100, 1101, 5000], np.int64)
    slots = rng.integers(0, slot_starts[-1], n)
    slots[n // 2] = -1  # no slot: no table
    table = table_of_slot[slots]
    ids = row_starts[table] + rng.integers(0, np.diff(row_starts)[table])  # an id of that table
    args = on.dev(table_of_slot), on.dev(row_starts), on.dev(slot_starts)
    ids_local, slots_local = (on.host(a) for a in engine.to_local(on.dev(ids), on.dev(slots), on.dev([n - 1]), *args))
    real = np.arange(n) < n - 1
    real[n // 2] = False
    np.testing.assert_array_equal(ids_local[real], ids[real] - row_starts[table[real]])
    np.testing.assert_array_equal(slots_local[real], slots[real] - slot_starts[table[real]])
    assert (ids_local[~real] == -1).all() and (slots_local[~real] == -1).all()
    local_ids = np.where(rng.random(len(table_of_slot)) < 0.5, rng.integers(0, 3, len(table_of_slot)), -1)
    global_ids = on.host(engine.to_global(on.dev(local_ids), *args[:2]))
    np.testing.assert_array_equal(global_ids, np.where(local_ids >= 0, local_ids + row_starts[table_of_slot], -1))
    index = rng.integers(0, n, 50)
    np.testing.assert_array_equal(on.host(engine.gather_ids(on.dev(ids), on.dev(index))), ids[index])
