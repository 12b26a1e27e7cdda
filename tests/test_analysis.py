"""scratchkit.course.analysis: skew, reuse, look-ahead working sets and Amdahl, against hand counts and sets."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scratchkit.course.analysis import (
    access_cdf,
    amdahl_speedup,
    consecutive_reuse,
    embedding_share,
    top_share,
    window_sizes,
    window_working_set,
    working_sets,
)
from scratchkit.config import DataConfig
from scratchkit.data.synthetic import SyntheticSource


def test_access_cdf_counts_by_hand():
    # id 7 three times, id 2 twice, id 9 once: the hottest third of ids serve half the lookups
    x, y = access_cdf([7, 2, 7, 9, 2, 7])
    np.testing.assert_allclose(x, [1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(y, [3 / 6, 5 / 6, 1])
    assert top_share([7, 2, 7, 9, 2, 7], 1 / 3) == pytest.approx(0.5)
    assert top_share([7, 2, 7, 9, 2, 7], 0.01) == pytest.approx(0.5)  # at least one id


def test_access_cdf_downsamples_but_keeps_the_end():
    trace = np.arange(10_000) % 5000
    x, y = access_cdf(trace, points=50)
    assert x.size <= 50 and x[-1] == 1 and y[-1] == 1
    np.testing.assert_allclose(y, x)  # uniform: the diagonal


@pytest.mark.parametrize("bad", [[], np.zeros((2, 2), dtype=np.int64), [0.5, 1.5]])
def test_access_cdf_refuses_bad_traces(bad):
    with pytest.raises(ValueError):
        access_cdf(bad)


def test_top_share_refuses_bad_fraction():
    with pytest.raises(ValueError, match="fraction"):
        top_share([1, 2], 0)


def test_reuse_by_hand():
    sets = [np.array([1, 2, 3]), np.array([2, 3, 4, 5]), np.array([9])]
    np.testing.assert_allclose(consecutive_reuse(sets), [2 / 4, 0])
    with pytest.raises(ValueError, match="at least 2"):
        consecutive_reuse(sets[:1])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), min_size=1, max_size=12), min_size=1, max_size=8), st.integers(0, 4))
def test_window_working_set_matches_python_sets(batches, depth):
    sets = [np.unique(b) for b in batches]
    if len(sets) < depth + 1:
        with pytest.raises(ValueError, match="needs"):
            window_working_set(sets, depth)
        return
    expected = [len(set().union(*map(set, batches[b : b + depth + 1]))) for b in range(len(batches) - depth)]
    assert window_working_set(sets, depth).tolist() == expected


def test_window_sizes_on_synthetic_data():
    cfg = DataConfig(table_sizes=(400, 50), pooling=3, batch_size=16, num_batches=40, zipf=1.0)
    source = SyntheticSource(cfg)
    sizes = window_sizes(source, 0, [0, 1, 2, 4], num_batches=20)
    assert sizes.no_reuse.tolist() == [48, 96, 144, 240]  # (D+1) * B * L
    assert np.all(sizes.max <= sizes.no_reuse) and np.all(np.diff(sizes.max) >= 0)
    assert np.all(sizes.mean <= sizes.max)
    sets = working_sets(source, 0, 20)
    assert sizes.max[1] == max(len(set(sets[b]) | set(sets[b + 1])) for b in range(19))
    # table 1 has 50 rows: a window can never need more than the table
    assert window_sizes(source, 1, [4], 20).max[0] <= 50


def test_working_sets_refuse_bad_ranges():
    source = SyntheticSource(DataConfig(table_sizes=(10,), num_batches=5))
    with pytest.raises(ValueError, match="table 3"):
        working_sets(source, 3, 2)
    with pytest.raises(ValueError, match="outside"):
        working_sets(source, 0, 6)


def test_amdahl():
    assert amdahl_speedup(0.0, 10) == pytest.approx(1.0)
    assert amdahl_speedup(1.0, 10) == pytest.approx(10.0)
    assert amdahl_speedup(0.9, 1e12) == pytest.approx(10.0)  # the 1/(1-h) cap
    h = np.array([0.5, 0.8])
    np.testing.assert_allclose(amdahl_speedup(h, 4), 1 / ((1 - h) + h / 4))
    with pytest.raises(ValueError, match="hit rates"):
        amdahl_speedup(1.5, 2)
    with pytest.raises(ValueError, match="hit_speedup"):
        amdahl_speedup(0.5, 0.5)


def test_embedding_share():
    stages = {"data": 1.0, "embedding_forward": 2.0, "mlp": 1.0, "embedding_backward": 3.0, "update": 1.0}
    assert embedding_share(stages) == pytest.approx(6 / 8)
    with pytest.raises(ValueError, match="no time"):
        embedding_share({"mlp": 0.0})
