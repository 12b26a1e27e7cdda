"""The backward-looking caches (static, lru, lfu): exact training, and hit counts that an
independent cache simulation reproduces lookup for lookup."""

from collections import Counter, OrderedDict

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scratchkit.config import CacheParams, DataConfig, ModelConfig, OptimizerConfig, OptimizerKind, TrainConfig
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.measure.reference import ReferenceRun
from scratchkit.trainers import make_trainer
from scratchkit.trainers.cached import minimum_capacity
from scratchkit.trainers.static import StaticCacheTrainer
from scratchkit.measure.verify import verify

POLICIES = ["static", "lru", "lfu", "prefetch-lru"]
STEPS = 12


def with_cache(config, capacity, optimizer="sgd"):
    return config.replace(
        cache=CacheParams(capacity=capacity), optimizer=OptimizerConfig(kind=OptimizerKind.parse(optimizer))
    )


def largest_working_set(config, steps, together: int = 2):
    """Independently of the kit: the most distinct ids any table has in `together` consecutive
    batches of 0..steps (prefetch-lru holds two; one is enough for the others)."""
    source = SyntheticSource(config.data)
    batches = [source.batch(b).ids for b in range(min(steps + 1, len(source)))]
    return max(
        len(set().union(*(set(batches[k][t].tolist()) for k in range(b, min(b + together, len(batches))))))
        for b in range(len(batches))
        for t in range(len(batches[0]))
    )


# ------------------------------------------------------------------------------ exactness
@pytest.mark.parametrize("optimizer", ["sgd", "adagrad", "rowwise_adagrad"])
@pytest.mark.parametrize("where", ["min", "mid", "full"])
def test_every_policy_trains_bit_exactly(tiny_config, optimizer, where):
    minimum = largest_working_set(tiny_config, STEPS)
    biggest = max(tiny_config.data.table_sizes)
    capacity = {"min": minimum, "mid": (minimum + biggest) // 2, "full": biggest}[where]
    config = with_cache(tiny_config, capacity, optimizer)
    results = list(verify(config, POLICIES, STEPS, device="cpu"))
    assert [r.trainer for r in results] == POLICIES
    assert all(r.max_abs_diff == 0.0 for r in results), [(r.trainer, r.max_abs_diff) for r in results]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(8, 120), min_size=1, max_size=3),
    batch_size=st.integers(1, 12),
    pooling=st.integers(1, 4),
    zipf=st.sampled_from([0.0, 0.6, 1.2]),
    share=st.floats(0.0, 1.0),
    policy=st.sampled_from(POLICIES),
    optimizer=st.sampled_from(["sgd", "adagrad", "rowwise_adagrad"]),
    seed=st.integers(0, 50),
)
def test_exact_for_random_configs_and_capacities(sizes, batch_size, pooling, zipf, share, policy, optimizer, seed):
    steps = 6
    config = TrainConfig(
        data=DataConfig(
            table_sizes=tuple(sizes),
            pooling=pooling,
            batch_size=batch_size,
            num_dense=3,
            zipf=zipf,
            num_batches=steps,
            seed=seed,
        ),
        model=ModelConfig(dim=4, bottom_mlp=(8, 4), top_mlp=(8, 1)),
        seed=seed,
    )
    minimum = largest_working_set(config, steps)
    capacity = minimum + int(share * (max(sizes) - minimum))  # anywhere in [minimum, biggest table]
    [result] = verify(with_cache(config, capacity, optimizer), [policy], steps, device="cpu")
    assert result.max_abs_diff == 0.0


# ------------------------------------------------------------------------------ hit counts
def lru_replay(batches, capacity):
    """A plain-Python LRU (an OrderedDict, least recent first) under the kit's batch rule:
    a batch's cached ids count as hits (per lookup), its misses evict the least recent ids that
    the batch does not use, then all its ids become the most recent, in ascending id order.
    -> (hits, fetched rows, evicted rows) per batch."""
    cache, out = OrderedDict(), []
    for ids in batches:
        uses = Counter(ids.tolist())
        hits = sum(n for x, n in uses.items() if x in cache)
        misses = [x for x in uses if x not in cache]
        for x in uses:  # the batch's cached ids move out of the eviction path
            if x in cache:
                cache.move_to_end(x)
        evicted = 0
        while len(cache) + len(misses) > capacity:
            cache.popitem(last=False)
            evicted += 1
        for x in sorted(uses):
            cache[x] = True
            cache.move_to_end(x)
        out.append((hits, len(misses), evicted))
    return out


def lfu_replay(batches, capacity):
    """A plain-Python in-cache LFU: count = lookups since the id entered; victims are the ids
    the batch does not use with the smallest (count, last step, id)."""
    count, last, out = {}, {}, []
    for step, ids in enumerate(batches):
        uses = Counter(ids.tolist())
        hits = sum(n for x, n in uses.items() if x in count)
        misses = [x for x in uses if x not in count]
        room = capacity - len(count)
        candidates = sorted((count[x], last[x], x) for x in count if x not in uses)
        victims = [x for _, _, x in candidates[: max(0, len(misses) - room)]]
        for x in victims:
            del count[x], last[x]
        for x, n in uses.items():
            count[x] = count.get(x, 0) + n
            last[x] = step
        out.append((hits, len(misses), len(victims)))
    return out


def prefetch_lru_replay(batches, capacity):
    """A plain-Python LRU filled one batch ahead: batch b+1 is admitted while batch b's ids are
    locked (they may not be victims); otherwise the LRU rule of `lru_replay`."""
    cache, locked, out = OrderedDict(), set(), []
    for ids in batches:
        uses = Counter(ids.tolist())
        hits = sum(n for x, n in uses.items() if x in cache)
        misses = [x for x in uses if x not in cache]
        evicted = 0
        while len(cache) + len(misses) > capacity:
            victim = next(x for x in cache if x not in uses and x not in locked)  # least recent first
            del cache[victim]
            evicted += 1
        for x in sorted(uses):
            cache[x] = True
            cache.move_to_end(x)
        out.append((hits, len(misses), evicted))
        locked = set(uses)
    return out


def one_table_config(batch_size, pooling, zipf, capacity, rows=60, batches=80):
    return TrainConfig(
        data=DataConfig(
            table_sizes=(rows,),
            pooling=pooling,
            batch_size=batch_size,
            num_dense=2,
            zipf=zipf,
            num_batches=batches,
            seed=3,
        ),
        model=ModelConfig(dim=4, bottom_mlp=(4,), top_mlp=(4, 1)),
        cache=CacheParams(capacity=capacity),
    )


def trainer_counts(name, config, steps):
    with make_trainer(name, config, device="cpu") as trainer:
        records = list(trainer.train(steps))
    return [(r.hits, r.fetched_rows, r.written_back_rows) for r in records], records


@pytest.mark.parametrize(
    "policy, replay", [("lru", lru_replay), ("lfu", lfu_replay), ("prefetch-lru", prefetch_lru_replay)]
)
@pytest.mark.parametrize("capacity", [36, 45, 59])
def test_hits_fetches_and_write_backs_match_a_plain_python_cache(policy, replay, capacity):
    config = one_table_config(batch_size=6, pooling=3, zipf=0.9, capacity=capacity)
    source = SyntheticSource(config.data)
    batches = [source.batch(b).ids[0] for b in range(60)]
    counts, records = trainer_counts(policy, config, 60)
    # every cached row was looked up, so trained, so dirty: each eviction is a write-back
    assert counts == replay(batches, capacity)
    assert sum(c[2] for c in counts) > 0, "the trace should force evictions"
    assert all(r.lookups == 18 and 0 <= r.hits <= r.lookups for r in records)


@pytest.mark.parametrize("policy, libcachesim_class", [("lru", "LRU"), ("lfu", "LFU")])
def test_one_lookup_per_batch_is_the_textbook_cache_of_libcachesim(policy, libcachesim_class):
    """With one lookup per batch the batch rule is the classic cache: compare with libCacheSim."""
    lcs = pytest.importorskip("libcachesim")
    config = one_table_config(batch_size=1, pooling=1, zipf=0.8, capacity=10, rows=50, batches=300)
    source = SyntheticSource(config.data)
    cache, expected = getattr(lcs, libcachesim_class)(10), []
    for b in range(300):
        request = lcs.Request()
        request.obj_id, request.obj_size = int(source.batch(b).ids[0][0]) + 1, 1
        expected.append(int(cache.get(request)))
    counts, _ = trainer_counts(policy, config, 300)
    assert [c[0] for c in counts] == expected
    assert 0 < sum(expected) < 300


def test_static_hits_are_the_lookups_of_the_profiled_hot_set(tiny_config):
    config = with_cache(tiny_config, 40)
    source = SyntheticSource(config.data)
    prefix = 30
    hot = []
    for t in range(3):  # rank by count (descending), then id (ascending), over the prefix
        uses = Counter(x for b in range(prefix) for x in source.batch(b).ids[t].tolist())
        ranked = sorted(range(config.data.table_sizes[t]), key=lambda x: (-uses[x], x))
        hot.append(set(ranked[:40]))
    with StaticCacheTrainer(config, device="cpu", profile_batches=prefix) as trainer:
        records = list(trainer.train(STEPS))
    for b, r in enumerate(records):
        ids = source.batch(b).ids
        assert r.hits == sum(x in hot[t] for t in range(3) for x in ids[t].tolist())
        misses = sum(len(set(ids[t].tolist()) - hot[t]) for t in range(3))
        assert r.fetched_rows == r.written_back_rows == misses  # each missed row goes and comes back


def test_stage_names_and_counters(tiny_config):
    config = with_cache(tiny_config, largest_working_set(tiny_config, 6))
    for name in POLICIES:
        with make_trainer(name, config, device="cpu") as trainer:
            records = list(trainer.train(5))
        for b, r in enumerate(records):
            # a demand fill stalls the step (`fetch`); prefetch-lru fetches the next batch ahead
            # (`prefetch`), stalls only on its first step, and looks no further than the call's
            # last batch
            fetch = {"fetch"} if name != "prefetch-lru" or b == 0 else {"prefetch"} if b < 4 else set()
            assert {"data", "transfer", "embedding_forward", "mlp", "embedding_backward", "update", *fetch} <= set(
                r.stage_seconds
            ), (name, b)
            if name == "prefetch-lru" and b == 4:
                assert "prefetch" not in r.stage_seconds
            assert r.lookups == 3 * 32 * 2 and 0 <= r.hits <= r.lookups
        if name == "prefetch-lru":
            assert all("fetch" not in r.stage_seconds for r in records[1:])
        # the cache starts empty (lru, lfu), so the first step fetches its whole working set
        if name != "static":
            first = records[0]
            assert first.hits == 0 and first.fetched_rows == sum(
                len(np.unique(i)) for i in SyntheticSource(config.data).batch(0).ids
            )
        assert any(stage in r.stage_seconds for r in records for stage in ("write_back", "prefetch_write_back")), name
        # the first step fills an empty cache: no table chooses a victim; later ones do
        if name in ("lru", "lfu"):
            assert records[0].evicting_tables == 0
            assert 0 < max(r.evicting_tables for r in records) <= len(config.data.table_sizes)
    with make_trainer("lru", with_cache(tiny_config, max(tiny_config.data.table_sizes)), device="cpu") as whole:
        assert all(r.evicting_tables == 0 for r in whole.train(5))  # the whole table fits


# ------------------------------------------------------------------------------ capacity, flush
@pytest.mark.parametrize("policy", ["lru", "lfu"])
def test_a_cache_smaller_than_a_working_set_is_refused_naming_the_minimum(tiny_config, policy):
    source = SyntheticSource(tiny_config.data)
    first = max(len(np.unique(i)) for i in source.batch(0).ids)
    trainer = make_trainer(policy, with_cache(tiny_config, first - 1), device="cpu")
    with pytest.raises(ValueError, match=rf"at least {first} rows for batches 0..0"):
        trainer.train_step()  # a lone step: its own working set
    assert trainer.next_batch == 0
    # a call: the minimum for every batch it trains, so following the message trains them all
    whole = minimum_capacity(source, STEPS)
    with pytest.raises(ValueError, match=rf"at least {whole} rows for batches 0..{STEPS - 1} "):
        list(trainer.train(STEPS))
    assert minimum_capacity(source, STEPS) == largest_working_set(tiny_config, STEPS - 1, together=1)
    with make_trainer(policy, with_cache(tiny_config, minimum_capacity(source, STEPS)), device="cpu") as enough:
        assert len(list(enough.train(STEPS))) == STEPS


def test_flush_is_idempotent_and_close_leaves_complete_host_tables(tiny_config):
    config = with_cache(tiny_config, largest_working_set(tiny_config, STEPS), "adagrad")
    reference = ReferenceRun(config, SyntheticSource(config.data), "cpu")
    reference.train(STEPS)
    for name in POLICIES:
        trainer = make_trainer(name, config, device="cpu")
        list(trainer.train(STEPS))
        stale = max(float((w - r).abs().max()) for w, r in zip(trainer.tables.weights, reference.embedding_weights()))
        assert stale > 0, f"{name}: dirty rows should still sit only in the cache before the flush"
        assert trainer.flush() > 0
        after_first = [w.clone() for w in trainer.tables.weights]
        assert trainer.flush() == 0
        trainer.close()
        trainer.close()
        assert all(torch.equal(a, w) for a, w in zip(after_first, trainer.tables.weights))
        for mine, theirs in zip(trainer.tables.weights, reference.embedding_weights()):
            assert torch.equal(mine, theirs)
        for mine, theirs in zip(trainer.tables.state, reference.embedding_state()):
            assert torch.equal(mine, theirs)


def test_training_continues_exactly_after_a_flush(tiny_config):
    """A checkpoint-style flush mid-run leaves the rows cached (clean) and changes nothing."""
    config = with_cache(tiny_config, largest_working_set(tiny_config, 2 * STEPS), "rowwise_adagrad")
    reference = ReferenceRun(config, SyntheticSource(config.data), "cpu")
    reference.train(2 * STEPS)
    for name in POLICIES:
        with make_trainer(name, config, device="cpu") as trainer:
            list(trainer.train(STEPS))
            trainer.embedding_weights()
            list(trainer.train(STEPS))
            for mine, theirs in zip(trainer.embedding_weights(), reference.embedding_weights()):
                assert torch.equal(mine, theirs)


class CountingSource:
    """A source that counts how often each batch is made (a real loader reads a file each time)."""

    def __init__(self, source):
        self.source, self.reads = source, Counter()

    def batch(self, index):
        self.reads[index] += 1
        return self.source.batch(index)

    def __getattr__(self, name):
        return getattr(self.source, name)

    def __len__(self):
        return len(self.source)


@pytest.mark.parametrize("trainer", ["gpu-only", "hybrid", "lru", "prefetch-lru"])
def test_each_batch_is_read_once_and_its_reading_is_timed_as_data(tiny_config, trainer):
    """prefetch-lru reads batch b+1 to prefetch its rows: that read must be the one step b+1 trains
    on (it once read every batch twice, the second time outside any stage). (scratchpipe reads the
    batches of a train() call once more before its first step: its capacity check, which refuses
    a too-small scratchpad before anything trains.)"""
    source = CountingSource(SyntheticSource(tiny_config.data))
    with make_trainer(trainer, tiny_config, source=source) as t:
        records = list(t.train(6))
    trained = set(range(6))
    assert all(source.reads[b] == 1 for b in trained), dict(source.reads)
    assert all(r.stage_seconds.get("data", 0) > 0 for r in records)
