"""InMemoryDataset, the batch source the real-format loaders return: slicing and its refusals."""

from __future__ import annotations

import numpy as np
import pytest

from scratchkit.data.in_memory import InMemoryDataset


def arrays(n=10, tables=(5, 7)):
    rng = np.random.default_rng(0)
    dense = rng.random((n, 3), dtype=np.float32)
    ids = np.stack([rng.integers(0, size, n) for size in tables])
    labels = rng.integers(0, 2, n).astype(np.float32)
    return dense, ids, labels, tables


def test_batch_i_is_rows_i_times_b_to_i_plus_one_times_b():
    dense, ids, labels, tables = arrays()
    data = InMemoryDataset(dense, ids, labels, tables, batch_size=4)
    assert (data.num_batches, data.num_rows, data.num_dense) == (2, 10, 3)
    batch = data.batch(1)
    np.testing.assert_array_equal(batch.dense, dense[4:8])
    np.testing.assert_array_equal(batch.labels, labels[4:8])
    for t in range(2):
        np.testing.assert_array_equal(batch.ids[t], ids[t, 4:8])
        np.testing.assert_array_equal(batch.offsets[t], np.arange(4))
    assert batch.lookups() == 8


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d, i, y: (d[:9], i, y), r"dense must be \[N, num_dense\]"),
        (lambda d, i, y: (d, i[:1], y), r"ids must be \[num_tables=2, N=10\], got \(1, 10\)"),
        (lambda d, i, y: (d, i + 5, y), r"table 0: ids must lie in \[0, 5\)"),
        (lambda d, i, y: (d, i - 5, y), r"table 0: ids must lie in \[0, 5\)"),
        (lambda d, i, y: (d, i, y * 2), "labels must be 0 or 1"),
    ],
)
def test_inconsistent_arrays_are_refused(change, message):
    dense, ids, labels, tables = arrays()
    with pytest.raises(ValueError, match=message):
        InMemoryDataset(*change(dense, ids, labels), tables, batch_size=2)


def test_fewer_rows_than_a_batch_is_refused():
    dense, ids, labels, tables = arrays(n=3)
    with pytest.raises(ValueError, match="3 rows is fewer than one batch of 4"):
        InMemoryDataset(dense, ids, labels, tables, batch_size=4)
