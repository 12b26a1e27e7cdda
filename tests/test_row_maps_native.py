"""The dictionaries' searches in C++ (row_maps_loop.cpp) against NumPy's, map by map: every row of
every batch equal, over random dictionaries, values present and absent, and both widths."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scratchkit.data.row_maps import LOOP, Dictionary, Modulo, RowMapper

pytestmark = pytest.mark.skipif(not LOOP.available(), reason="no C++ compiler here")


def random_maps(rng, kinds, dict_dtype, bound):
    maps = []
    for kind, size in kinds:
        if kind == "modulo":
            maps.append(Modulo(size))
        else:
            maps.append(Dictionary(np.unique(rng.integers(0, bound, size)).astype(dict_dtype)))
    return maps


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(
        st.tuples(st.sampled_from(["dictionary", "dictionary", "modulo"]), st.integers(1, 3000)), min_size=1, max_size=8
    ),
    n=st.integers(0, 200),
    raw_wide=st.booleans(),
    dict_wide=st.booleans(),
    present=st.floats(0, 1),
    seed=st.integers(0, 2**16),
)
def test_the_loop_maps_every_table_as_numpy_does(kinds, n, raw_wide, dict_wide, present, seed):
    rng = np.random.default_rng(seed)
    bound = 2**40 if raw_wide and dict_wide else 2**32
    maps = random_maps(rng, kinds, np.uint64 if dict_wide else np.uint32, bound)
    raw = rng.integers(0, bound, (n, len(maps))).astype(np.uint64 if raw_wide else np.uint32)
    for t, m in enumerate(maps):  # most values taken from the dictionary
        if isinstance(m, Dictionary):
            take = rng.random(n) < present
            raw[take, t] = rng.choice(m.values, int(take.sum()))
    native, twin = RowMapper(maps), RowMapper(maps, native=False)
    assert native.native == any(isinstance(m, Dictionary) for m in maps) and not twin.native
    got = native(raw)
    expected = np.stack([m(raw[:, t]) for t, m in enumerate(maps)]) if n else np.zeros((len(maps), 0))
    assert got.dtype == np.int64 and got.shape == (len(maps), n)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(twin(raw), expected)


def test_a_strided_batch_and_signed_values_read_as_numpy_reads_them():
    rng = np.random.default_rng(0)
    maps = [Dictionary(np.arange(0, 1000, 3, dtype=np.uint32)), Modulo(7), Dictionary(np.array([5, 2**33], np.uint64))]
    raw = rng.integers(0, 1000, (300, 3)).astype(np.uint32)[::2]  # not contiguous
    expected = np.stack([m(raw[:, t]) for t, m in enumerate(maps)])
    np.testing.assert_array_equal(RowMapper(maps)(raw), expected)
    signed = raw.astype(np.int32)  # TorchRec's int32 ids: NumPy maps them
    np.testing.assert_array_equal(RowMapper(maps)(signed), expected)


def test_a_source_still_pickles_and_maps_the_same_after(tmp_path):
    """The mapper holds C pointers; pickling remakes them (a source may go to another process)."""
    import pickle

    from scratchkit.data.criteo import load_criteo

    sample = Path(__file__).resolve().parents[1] / "datasets" / "samples" / "criteo-synthetic.tsv"
    source = load_criteo(sample, batch_size=8, cache_dir=tmp_path)
    copy = pickle.loads(pickle.dumps(source))
    np.testing.assert_array_equal(copy.batch(2).ids, source.batch(2).ids)
