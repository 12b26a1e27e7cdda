import numpy as np
import pytest

from scratchkit.config import DataConfig
from scratchkit.data.batch import Batch
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.data.trace import batch_trace, make_trace, read_trace, table_offsets, write_trace


def test_trace_is_sample_major_with_table_offsets():
    # two samples, two tables with bags of different sizes: written out by hand
    batch = Batch(
        dense=np.zeros((2, 1), np.float32),
        ids=(np.array([1, 2, 3]), np.array([0, 4, 5])),
        offsets=(np.array([0, 2]), np.array([0, 1])),
        labels=np.zeros(2, np.float32),
    )
    offsets = table_offsets([10, 6])
    np.testing.assert_array_equal(offsets, [0, 10])
    # sample 0: table 0 bag [1, 2], table 1 bag [0]; sample 1: table 0 bag [3], table 1 bag [4, 5]
    np.testing.assert_array_equal(batch_trace(batch, offsets), [1, 2, 10, 3, 14, 15])


def test_make_write_read_roundtrip(tmp_path):
    src = SyntheticSource(DataConfig(table_sizes=(50, 20), pooling=2, batch_size=4))
    trace = make_trace(src, 3)
    assert trace.dtype == np.int64 and len(trace) == 3 * 4 * 2 * 2
    assert trace.max() < 70
    path = write_trace(trace, tmp_path / "ids.npy")
    np.testing.assert_array_equal(read_trace(path), trace)


def test_read_trace_refuses_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_trace(tmp_path / "missing.npy")
    np.save(tmp_path / "2d.npy", np.zeros((2, 2), np.int64))
    with pytest.raises(ValueError, match="a trace is a 1-D array of int64 ids"):
        read_trace(tmp_path / "2d.npy")
    np.save(tmp_path / "neg.npy", np.array([3, -1, 2]))
    with pytest.raises(ValueError, match="position 1 holds -1"):
        read_trace(tmp_path / "neg.npy")
    with pytest.raises(ValueError, match="must be positive"):
        make_trace(SyntheticSource(DataConfig()), 0)
