"""The streamed LRU profiler: the C loop against its twins, SHARDS's error, chunked sources."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchkit.sim import curve_error, lru_mrc, native, profile_lru, simulate_lru, trace_chunks
from scratchkit.sim.profile import make_engine
from scratchkit.sim.sampling import threshold_for
from scratchkit.sim.stackdist import stack_distance_histogram

needs_native = pytest.mark.skipif(not native.available(), reason="no C++ compiler here")

traces = st.lists(st.integers(0, 40), max_size=300).map(lambda ids: np.array(ids, dtype=np.int64))
settings_of = st.sampled_from([(None, None), (0.5, None), (0.2, None), (None, 5), (0.7, 12)])


def zipf(n: int, rows: int, exponent: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.zipf(exponent, n) % rows).astype(np.int64)


def engine_state(engine, trace, chunk):
    for start in range(0, trace.size, chunk):
        engine.feed(trace[start : start + chunk])
    return engine.stats(), engine.hist().tolist(), engine.bins().tolist()


@needs_native
@settings(max_examples=120, deadline=None)
@given(traces, settings_of, st.integers(1, 64))
def test_c_engine_equals_its_python_twin_bit_for_bit(trace, sampling, chunk):
    """Counts, histogram, weights and bins: the same, whatever the chunking."""
    rate, size = sampling
    ours = engine_state(make_engine(rate, size, native_loop=True, max_bins=8), trace, chunk)
    twin = engine_state(make_engine(rate, size, native_loop=False, max_bins=8), trace, trace.size or 1)
    assert ours == twin


@needs_native
def test_c_engine_compacts_rehashes_and_drops_like_the_twin():
    """Many distinct ids (the tree is renumbered and the table grows many times), and a fixed
    size far below them (ids are dropped from the table over and over)."""
    trace = zipf(60_000, 30_000, 1.05, 4) * 1_000_003 + 11
    assert profile_lru(trace, engine="native").hits.tolist() == profile_lru(trace, engine="numpy").hits.tolist()
    small = trace[:4_000]
    for size in (3, 40):
        ours = engine_state(make_engine(None, size, native_loop=True, max_bins=64), small, 999)
        twin = engine_state(make_engine(None, size, native_loop=False, max_bins=64), small, 4_000)
        assert ours == twin


@pytest.mark.parametrize("engine", ["auto", "numpy", "twin"])
def test_exact_curve_is_the_stack_distance_histogram(engine):
    trace = zipf(3_000, 500, 1.1, 1)
    curve = profile_lru(trace, engine=engine, chunk_size=256)
    hist = stack_distance_histogram(trace)
    assert curve.rate == 1.0 and curve.unique_ids == hist.size
    assert curve.hits.tolist() == np.cumsum(hist).tolist()
    assert curve.hits_at(37) == simulate_lru(trace, 37).hits


def test_without_a_compiler_the_twins_answer(monkeypatch):
    monkeypatch.setenv("SCRATCHKIT_SIM_NATIVE", "0")
    assert not native.available()
    trace = zipf(2_000, 300, 1.1, 2)
    assert lru_mrc(trace).hits_at(20) == simulate_lru(trace, 20).hits
    assert profile_lru(trace, rate=0.5).rate == 0.5


@needs_native
def test_sampled_curves_stay_close_to_the_exact_one():
    """1M accesses, Zipf 1.05 over 100k ids: SHARDS error at capacities >= 1/R."""
    trace = zipf(1_000_000, 100_000, 1.05, 0)
    exact = lru_mrc(trace)
    fixed_rate = profile_lru(trace, rate=0.1)
    assert curve_error(fixed_rate, exact, 10)["mae"] <= 0.005
    assert abs(fixed_rate.unique_ids - exact.unique_ids) <= 0.05 * exact.unique_ids
    fixed_size = profile_lru(trace, size=5_000)
    assert fixed_size.rate < 0.1
    assert curve_error(fixed_size, exact, round(1 / fixed_size.rate))["mae"] <= 0.01


def test_fixed_rate_one_is_exact_and_the_threshold_is_the_rate():
    trace = zipf(2_000, 300, 1.1, 3)
    assert profile_lru(trace, rate=1.0).hits.tolist() == lru_mrc(trace).hits.tolist()
    assert threshold_for(0.5) == 2**63 and threshold_for(1.0) == 2**64 - 1


def test_npy_file_iterable_and_array_give_one_curve(tmp_path):
    trace = zipf(5_000, 800, 1.1, 5).astype(np.int32)
    path = tmp_path / "ids.npy"
    np.save(path, trace.astype(np.int64))  # a file is int64 (the reader's door); arrays may be any integer
    seen = []
    from_file = profile_lru(path, chunk_size=1_000, on_chunk=seen.append)
    parts = (trace[i : i + 333] for i in range(0, trace.size, 333))
    from_parts = profile_lru(parts, rate=0.5)
    assert seen == [1_000] * 5
    assert from_file.hits.tolist() == lru_mrc(trace).hits.tolist()
    assert from_parts.hits.tolist() == profile_lru(trace, rate=0.5).hits.tolist()


def test_empty_and_tiny_traces():
    empty = profile_lru(np.zeros(0, np.int64))
    assert (empty.lookups, empty.unique_ids, empty.capacities.size) == (0, 0, 0)
    assert profile_lru([], size=4).capacities.size == 0
    assert profile_lru([5, 5, 5]).hits.tolist() == [2]


@pytest.mark.parametrize(
    "source, kwargs, message",
    [
        (np.array([1, 2, -3]), {}, r"trace\[2\] = -3"),
        ([np.array([1, 2]), np.array([4, -1])], {}, r"trace\[3\] = -1"),
        ([np.array([[1, 2]])], {}, "chunk at access 0 must be 1-D"),
        (np.array([1.0, 2.0]), {}, "integer ids"),
        (np.array([1, 2]), {"rate": 0}, r"sample rate must be in \(0, 1\], got 0.0"),
        (np.array([1, 2]), {"rate": 1.5}, r"sample rate must be in \(0, 1\]"),
        (np.array([1, 2]), {"size": 0}, "sample size must be an integer >= 1, got 0"),
        (np.array([1, 2]), {"engine": "gpu"}, "engine must be one of"),
        (np.array([1, 2]), {"engine": "numpy", "rate": 0.5}, "exact curves only"),
        (42, {}, "a trace is an array"),
    ],
)
def test_bad_input_says_what_and_where(source, kwargs, message):
    with pytest.raises(ValueError, match=message):
        profile_lru(source, **kwargs)


def test_missing_or_wrong_npy_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        profile_lru(tmp_path / "nope.npy")
    path = tmp_path / "floats.npy"
    np.save(path, np.ones(4))
    with pytest.raises(ValueError, match="floats.npy: the trace's ids are float64, not int64"):
        profile_lru(path)


def test_curve_rates_at_many_capacities():
    curve = lru_mrc([1, 2, 1, 2, 3])
    assert curve.rates_at([1, 2, 3, 10]).tolist() == [0.0, 0.4, 0.4, 0.4]
    assert curve_error(curve, curve)["mae"] == 0.0


def test_a_truncated_npy_is_refused(tmp_path):
    path = tmp_path / "cut.npy"
    np.save(path, np.arange(100, dtype=np.int64))
    whole = path.read_bytes()
    path.write_bytes(whole[:-80])  # the last 10 ids are gone
    with pytest.raises(ValueError, match="cut.npy: not a .npy array of ids"):
        profile_lru(path)
    path.write_bytes(whole)
    stream = iter(trace_chunks(path, chunk_size=64))
    path.write_bytes(whole[:-80])  # cut while it is being read
    with pytest.raises(ValueError, match="header says 100 ids, the file ends after 90"):
        list(stream)


def test_a_sampled_curve_is_a_step_function_between_its_listed_capacities():
    trace = zipf(20_000, 2_000, 1.05, 6)
    curve = profile_lru(trace, rate=0.25)
    assert curve.rate == 0.25 and curve.capacities[0] == 1
    assert np.all(np.diff(curve.capacities) > 0) and np.all(np.diff(curve.hits) >= 0)
    low, high = int(curve.capacities[5]), int(curve.capacities[6])
    assert high - low > 1  # steps of about 1/R rows
    inside = curve.hits_over(np.arange(low, high))
    assert inside.tolist() == [curve.hits[5]] * (high - low)
    assert curve.hits_at(10**9) == curve.lookups - curve.unique_ids
