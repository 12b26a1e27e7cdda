import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scratchkit.config import DataConfig
from scratchkit.data.synthetic import SyntheticSource, ZipfSampler, zipf_cdf
from scratchkit.profiles import get_profile


def test_batches_are_deterministic_and_random_access():
    cfg = DataConfig(table_sizes=(100, 50), pooling=3, batch_size=16, num_dense=5, seed=7)
    a, b = SyntheticSource(cfg), SyntheticSource(cfg)
    later_first = b.batch(4)
    for i in range(5):
        x = a.batch(i)
        y = later_first if i == 4 else b.batch(i)
        for t in range(2):
            np.testing.assert_array_equal(x.ids[t], y.ids[t])
        np.testing.assert_array_equal(x.dense, y.dense)
        np.testing.assert_array_equal(x.labels, y.labels)
    other_seed = SyntheticSource(DataConfig(**{**cfg.__dict__, "seed": 8})).batch(0)
    assert not np.array_equal(other_seed.ids[0], a.batch(0).ids[0])


def test_batch_shapes_ranges_and_offsets():
    cfg = DataConfig(table_sizes=(100, 7, 1), pooling=4, batch_size=32, num_dense=3)
    batch = SyntheticSource(cfg).batch(0)
    assert batch.dense.shape == (32, 3) and batch.dense.dtype == np.float32
    assert set(np.unique(batch.labels)) <= {0.0, 1.0}
    for t, n in enumerate(cfg.table_sizes):
        assert batch.ids[t].dtype == np.int64 and len(batch.ids[t]) == 32 * 4
        assert batch.ids[t].min() >= 0 and batch.ids[t].max() < n
        np.testing.assert_array_equal(batch.offsets[t], np.arange(0, 128, 4))
    assert batch.lookups() == 3 * 128
    with pytest.raises(IndexError, match="batch 10000 out of range"):
        SyntheticSource(cfg).batch(10_000)


def test_zipf_knob_controls_skew():
    def top_share(zipf):
        src = SyntheticSource(DataConfig(table_sizes=(5000,), pooling=8, batch_size=256, zipf=zipf))
        ids = np.concatenate([src.batch(i).ids[0] for i in range(20)])
        counts = np.sort(np.bincount(ids, minlength=5000))[::-1]
        return counts[:50].sum() / counts.sum()  # share of lookups that go to the top 1% rows

    uniform, mild, strong = top_share(0.0), top_share(0.8), top_share(1.2)
    assert uniform < 0.03 < mild < strong
    assert strong > 0.5


def test_hot_rows_are_scattered_not_the_first_rows():
    src = SyntheticSource(DataConfig(table_sizes=(10_000,), pooling=8, batch_size=256, zipf=1.2))
    ids = np.concatenate([src.batch(i).ids[0] for i in range(10)])
    hottest = np.argsort(np.bincount(ids, minlength=10_000))[::-1][:10]
    assert hottest.max() > 100  # a cache that pinned rows 0..99 would not catch them


@settings(max_examples=40, deadline=None)
@given(num_rows=st.integers(1, 5000), exponent=st.floats(0.1, 3.0), seed=st.integers(0, 2**16))
def test_guide_table_sampler_equals_binary_search(num_rows, exponent, seed):
    sampler = ZipfSampler(num_rows, exponent)
    u = np.random.default_rng(seed).random(2000)
    np.testing.assert_array_equal(sampler.ranks(u), np.searchsorted(sampler.cdf, u, side="right"))


def plain_batch(cfg: DataConfig, index: int):
    """Batch `index` of `cfg` made the plain way the module note states: one binary search of each
    table's whole CDF per draw, no guide table, no sampler shared between tables, nothing in place
    (laws of at most EXACT_RANKS ranks: no continuous tail). -> (dense, ids, labels)."""
    rng = np.random.default_rng([cfg.seed, index])
    B, L = cfg.batch_size, cfg.pooling
    dense = rng.standard_normal((B, cfg.num_dense), dtype=np.float32)
    ids = []
    for t, n in enumerate(cfg.table_sizes):
        u = rng.random(B * L)
        s = cfg.exponent(t)
        ranks = np.searchsorted(zipf_cdf(cfg.ranks(t), s), u, side="right") if s > 0 else (u * n).astype(np.int64)
        a = (0x9E3779B1 + 2 * (cfg.seed + t)) % n or 1  # the scatter's multiplier: coprime with n
        while math.gcd(a, n) != 1:
            a = a % n + 1
        ids.append(((ranks % n) * a + (7919 * t + cfg.seed) % n) % n)
    weights = np.random.default_rng([cfg.seed, 2**31 - 1]).standard_normal(cfg.num_dense).astype(np.float32)
    score = dense @ weights / max(1.0, math.sqrt(cfg.num_dense))
    for t_ids in ids:
        score = score + (((t_ids * 2654435761) % 1000) / 1000.0 - 0.5).reshape(B, L).mean(axis=1)
    labels = (rng.random(B) < 1.0 / (1.0 + np.exp(-2.0 * score))).astype(np.float32)
    return dense, ids, labels


@pytest.mark.parametrize(
    "cfg",
    [
        get_profile("tiny").data,
        get_profile("embedding-bound", scale=0.01).data,  # 1M-rank laws folded into 10k rows, shared
        DataConfig(table_sizes=(997, 5, 1000), pooling=3, batch_size=40, zipf=(0.0, 1.3, 0.6), seed=11),
        DataConfig(table_sizes=(300, 300), pooling=5, batch_size=8, zipf=2.5, rank_rows=(70_000, 300), seed=2),
    ],
    ids=["tiny", "embedding-bound", "per-table laws", "folded"],
)
def test_batches_equal_their_plain_twin(cfg):
    source = SyntheticSource(cfg)
    for index in (0, 1, len(source) - 1):
        batch, (dense, ids, labels) = source.batch(index), plain_batch(cfg, index)
        np.testing.assert_array_equal(batch.dense, dense)
        np.testing.assert_array_equal(batch.labels, labels)
        for mine, plain in zip(batch.ids, ids):
            assert mine.dtype == np.int64
            np.testing.assert_array_equal(mine, plain)
