"""hashmap.cu against its NumPy twin and against a Python dict.

Every engine's answers (slots found, slots erased) must equal a dict model's. The host build runs
threads serially in index order, which is the twin's order, so its table layout (keys and values
of every bucket) must also equal the twin's exactly. A GPU inserts concurrently, so for CuPy only
the answers are compared.
"""

import numpy as np

from scratchkit.kernels import twin

EMPTY, TOMBSTONE = twin.EMPTY, twin.TOMBSTONE


class Pair:
    """One table run by the engine under test, one by the twin, and a dict: applied together."""

    def __init__(self, engine, table_size):
        self.engine, self.xp = engine, engine.xp
        self.keys = self.xp.full(table_size, EMPTY, dtype=self.xp.int64)
        self.values = self.xp.full(table_size, -1, dtype=self.xp.int64)
        self.twin_keys = np.full(table_size, EMPTY, dtype=np.int64)
        self.twin_values = np.full(table_size, -1, dtype=np.int64)
        self.model = {}

    def _dev(self, a):
        return self.xp.asarray(np.asarray(a, dtype=np.int64))

    def _host(self, a):
        return a if self.xp is np else self.xp.asnumpy(a)

    def insert(self, ids, slots):
        ids, slots = np.asarray(ids, np.int64), np.asarray(slots, np.int64)
        got = self.engine.hashmap_insert(self.keys, self.values, self._dev(ids), self._dev(slots))
        want = twin.hashmap_insert(self.twin_keys, self.twin_values, ids, slots)
        assert got == want
        self.model.update(zip(ids.tolist(), slots.tolist()))
        self.check_layout()
        return got

    def query(self, ids):
        ids = np.asarray(ids, np.int64)
        got = self._host(self.engine.hashmap_query(self.keys, self.values, self._dev(ids)))
        np.testing.assert_array_equal(got, twin.hashmap_query(self.twin_keys, self.twin_values, ids))
        np.testing.assert_array_equal(got, [self.model.get(i, -1) for i in ids.tolist()])
        return got

    def erase(self, ids):
        ids = np.asarray(ids, np.int64)
        got = self._host(self.engine.hashmap_erase(self.keys, self.values, self._dev(ids)))
        np.testing.assert_array_equal(got, twin.hashmap_erase(self.twin_keys, self.twin_values, ids))
        np.testing.assert_array_equal(got, [self.model.pop(i, -1) for i in ids.tolist()])
        self.check_layout()
        return got

    def check_layout(self):
        if self.engine.name in ("twin", "host"):
            np.testing.assert_array_equal(self._host(self.keys), self.twin_keys)
            np.testing.assert_array_equal(self._host(self.values), self.twin_values)


def colliding_ids(home, mask, count, limit=1 << 20):
    """`count` ids whose home bucket is `home`, built from the hash function itself."""
    candidates = np.arange(limit, dtype=np.int64)
    found = candidates[twin.home_buckets(candidates, mask) == home][:count]
    assert len(found) == count
    return found


def test_random_operations_match_dict_and_twin(engine):
    rng = np.random.default_rng(7)
    pair = Pair(engine, 256)
    universe = rng.choice(10**9, size=400, replace=False)
    next_slot = 0
    for _ in range(6):
        absent = [i for i in universe.tolist() if i not in pair.model]
        new = rng.choice(absent, size=20, replace=False)
        pair.insert(new, np.arange(next_slot, next_slot + 20))
        next_slot += 20
        present = np.array(sorted(pair.model))
        pair.query(rng.choice(universe, size=60))  # hits, misses, repeats
        pair.erase(rng.choice(present, size=7, replace=False))
    assert len(pair.model) == 6 * 13


def test_empty_batches_change_nothing(engine):
    pair = Pair(engine, 16)
    pair.insert([5, 9], [0, 1])
    assert pair.insert([], []) == (0, 0)
    assert pair.query([]).shape == (0,)
    assert pair.erase([]).shape == (0,)
    pair.query([5, 9, 6])


def test_all_hits_all_misses_and_duplicates(engine):
    pair = Pair(engine, 64)
    ids = np.arange(100, 130)
    pair.insert(ids, np.arange(30))
    assert (pair.query(ids) >= 0).all()  # all hits
    assert (pair.query(np.arange(1000, 1050)) == -1).all()  # all misses
    got = pair.query([101, 101, 7, 101, 7])  # duplicates within a batch
    np.testing.assert_array_equal(got, [1, 1, -1, 1, -1])


def test_colliding_ids_chain_skip_tombstones_and_reuse_them(engine):
    mask = 63
    ids = colliding_ids(home=10, mask=mask, count=6)
    pair = Pair(engine, mask + 1)
    pair.insert(ids, np.arange(6))
    if engine.name != "cupy":  # serial insertion fills the chain in order: home, home+1, ...
        np.testing.assert_array_equal(pair.keys[10:16], ids)
    pair.erase(ids[2:3])  # a tombstone in the middle of the chain
    pair.query(ids)  # later ids are found past it
    newcomer = colliding_ids(home=10, mask=mask, count=7)[6:]
    reused, failed = pair.insert(newcomer, [40])
    assert (reused, failed) == (1, 0)  # the tombstone is taken again
    pair.query(np.concatenate([ids, newcomer]))


def test_chain_wraps_around_the_end_of_the_table(engine):
    mask = 31
    ids = colliding_ids(home=mask, mask=mask, count=4)  # home is the last bucket
    pair = Pair(engine, mask + 1)
    pair.insert(ids, [3, 2, 1, 0])
    pair.query(ids)
    pair.erase(ids[:1])
    pair.query(ids)


def test_nearly_full_and_full_table(engine):
    rng = np.random.default_rng(3)
    pair = Pair(engine, 16)
    ids = rng.choice(10**6, size=16, replace=False)
    pair.insert(ids[:15], np.arange(15))  # one EMPTY bucket left
    pair.query(np.concatenate([ids, rng.integers(10**6, 2 * 10**6, 20)]))
    pair.insert(ids[15:], [15])  # no EMPTY bucket at all
    pair.query(np.concatenate([ids, rng.integers(10**6, 2 * 10**6, 20)]))  # misses still end
    assert pair.insert([2 * 10**6 + 1], [99]) == (0, 1)  # no bucket: reported, not looped forever
    pair.model.pop(2 * 10**6 + 1)
    pair.erase(ids[:3])
    pair.query(ids)


def test_twin_hash_spreads_sequential_ids():
    """Sanity of the hash itself: consecutive ids land in many different buckets."""
    homes = twin.home_buckets(np.arange(4096), 4095)
    assert len(np.unique(homes)) > 0.6 * 4096  # a random map fills ~63%


def test_padding_is_skipped_and_no_negative_id_is_ever_found(engine):
    """The device planner's buffers go in whole: a pair with a negative id or slot is skipped; -1
    and -2 (an empty and an erased bucket's marks) are never found, nor erased."""
    pair = Pair(engine, 32)
    pair.insert([5, 9], [0, 1])
    pair.erase([9])  # a tombstone (-2) beside empty buckets (-1)
    got = pair.engine.hashmap_insert(
        pair.keys, pair.values, pair._dev([7, -1, 8, 2**63 - 1]), pair._dev([3, 4, -1, -1])
    )
    twin.hashmap_insert(pair.twin_keys, pair.twin_values, np.array([7, -1, 8, 2**63 - 1]), np.array([3, 4, -1, -1]))
    pair.model[7] = 3
    assert got[1] == 0
    pair.check_layout()
    np.testing.assert_array_equal(
        pair._host(pair.engine.hashmap_query(pair.keys, pair.values, pair._dev([-1, -2]))), [-1, -1]
    )
    keys_before = pair._host(pair.keys).copy()
    pair.engine.hashmap_erase(pair.keys, pair.values, pair._dev([-1, -2]))
    np.testing.assert_array_equal(pair._host(pair.keys), keys_before)
    pair.query([5, 7, 8, 9])


def test_insert_adds_its_counts_to_the_stats_it_is_given(engine):
    """Given a stats array, insert reads nothing back: the counts wait there for the caller's read."""
    pair = Pair(engine, 16)
    ids = colliding_ids(home=3, mask=15, count=3)
    pair.insert(ids, [0, 1, 2])
    pair.erase(ids[:2])
    stats = pair.xp.zeros(2, dtype=pair.xp.uint64)
    more = colliding_ids(home=3, mask=15, count=5)[3:]
    assert pair.engine.hashmap_insert(pair.keys, pair.values, pair._dev(more), pair._dev([5, 6]), stats) is None
    pair.engine.hashmap_insert(pair.keys, pair.values, pair._dev([]), pair._dev([]), stats)
    np.testing.assert_array_equal(pair._host(stats), [2, 0])  # both tombstones reused


def test_stamp_marks_the_slot_of_each_id_in_the_map(engine):
    pair = Pair(engine, 64)
    pair.insert([11, 22, 33], [4, 0, 7])
    out = pair._dev(np.zeros(9))
    pair.engine.hashmap_stamp(pair.keys, pair.values, pair._dev([33, 44, 11, 2**63 - 1]), 5, out)
    pair.engine.hashmap_stamp(pair.keys, pair.values, pair._dev([11]), 8, out)  # a later stamp wins
    np.testing.assert_array_equal(pair._host(out), [0, 0, 0, 0, 8, 0, 0, 5, 0])
    want = np.zeros(9, np.int64)
    twin.hashmap_stamp(pair.twin_keys, pair.twin_values, np.array([33, 44, 11]), 5, want)
    twin.hashmap_stamp(pair.twin_keys, pair.twin_values, np.array([11]), 8, want)
    np.testing.assert_array_equal(pair._host(out), want)
