"""plan.cu (the device planner's fused steps) on every engine, against the obvious NumPy: the
table-local conversion, the misses' slots table by table, the victims' keys in the planner's order."""

import numpy as np
import pytest

from scratchkit.kernels import twin


def host(engine, a):
    return a if engine.xp is np else engine.xp.asnumpy(a)


def slot_space(capacities):
    starts = np.concatenate([[0], np.cumsum(capacities)]).astype(np.int64)
    return starts, np.repeat(np.arange(len(capacities)), capacities).astype(np.int64)


@pytest.mark.parametrize("n", [0, 1, 300])
def test_to_local_subtracts_the_start_of_each_values_table(engine, n):
    rng = np.random.default_rng(n)
    slot_starts, table_of_slot = slot_space([5, 40, 1, 17])
    row_starts = np.array([0, 100, 1100, 1101, 5000], np.int64)
    where = rng.integers(0, slot_starts[-1], n)
    table = table_of_slot[where]
    values = row_starts[table] + rng.integers(0, np.diff(row_starts)[table])  # an id of that table
    xp = engine.xp
    got = host(
        engine,
        engine.to_local(xp.asarray(values), xp.asarray(where), xp.asarray(table_of_slot), xp.asarray(row_starts)),
    )
    want = np.array([v - row_starts[table_of_slot[w]] for v, w in zip(values, where)], np.int64)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", range(6))
def test_assign_miss_slots_gives_each_table_its_free_slots_then_its_victims(engine, seed):
    rng = np.random.default_rng(seed)
    tables = int(rng.integers(1, 6))
    misses = rng.integers(0, 12, tables)
    take = np.minimum(misses, rng.integers(0, 12, tables))  # free slots each table takes
    free_counts, victim_counts = take + rng.integers(0, 4, tables), misses - take
    free_slots = np.sort(rng.choice(1000, int(free_counts.sum()), replace=False)).astype(np.int64)
    victims = np.sort(rng.choice(np.arange(1000, 2000), int(victim_counts.sum()), replace=False)).astype(np.int64)
    at = lambda counts: np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    miss_at, free_at, victim_at = at(misses), at(free_counts), at(victim_counts)
    want = np.concatenate(
        [
            np.concatenate([free_slots[free_at[t] : free_at[t] + take[t]], victims[victim_at[t] : victim_at[t + 1]]])
            for t in range(tables)
        ]
        + [np.empty(0, np.int64)]
    )
    xp = engine.xp
    got = engine.assign_miss_slots(
        *(xp.asarray(a) for a in (miss_at, take.astype(np.int64), free_at, victim_at, free_slots, victims)),
        int(miss_at[-1]),
    )
    np.testing.assert_array_equal(host(engine, got), want)


@pytest.mark.parametrize("n", [0, 1, 500])
def test_victim_keys_sort_as_the_planners_lexsort(engine, n):
    rng = np.random.default_rng(n + 7)
    slot_starts, table_of_slot = slot_space([300, 200, 100])
    batch, levels = 40, 9
    urgency = rng.integers(0, levels, len(table_of_slot))
    last_trained = rng.integers(-1, batch, len(table_of_slot))
    candidates = np.sort(rng.choice(len(table_of_slot), n, replace=False)).astype(np.int64)
    xp = engine.xp
    keys = host(
        engine,
        engine.victim_keys(
            xp.asarray(candidates),
            xp.asarray(table_of_slot),
            xp.asarray(urgency),
            xp.asarray(last_trained),
            levels,
            batch,
            len(table_of_slot),
        ),
    )
    lexsorted = candidates[
        np.lexsort((candidates, last_trained[candidates], urgency[candidates], table_of_slot[candidates]))
    ]
    np.testing.assert_array_equal(candidates[np.argsort(keys, kind="stable")], lexsorted)
    np.testing.assert_array_equal(
        keys, twin.victim_keys(candidates, table_of_slot, urgency, last_trained, levels, batch, len(table_of_slot))
    )
