import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scratchkit.config import DataConfig
from scratchkit.data.synthetic import SyntheticSource, ZipfSampler


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
