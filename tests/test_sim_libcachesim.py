"""Exact agreement with an independent simulator: libCacheSim (PyPI `libcachesim`).

Requests are fed one by one with object size 1, so libCacheSim's capacity counts rows as ours
does. Its Belady needs every request's next access time (never again = INT64 max), which we
compute here with a plain dict scan, not with scratchkit's `next_use`.
"""

from __future__ import annotations


import numpy as np
import pytest

from scratchkit.sim import (
    lru_mrc,
    native,
    opt_mrc,
    profile_lru,
    simulate,
    simulate_lfu,
    simulate_lookahead,
    simulate_lru,
    simulate_opt,
)

lcs = pytest.importorskip("libcachesim")

NEVER = np.iinfo(np.int64).max


def zipf_trace(n: int, rows: int, exponent: float, seed: int) -> np.ndarray:
    """n ids drawn from `rows` ids with P(rank r) ~ r**-exponent; ranks shuffled over ids."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, rows + 1) ** exponent
    ranks = rng.choice(rows, size=n, p=weights / weights.sum())
    return rng.permutation(rows)[ranks].astype(np.int64) * 7 + 3  # sparse, non-contiguous ids


def criteo_trace(path, table_size: int = 1 << 14) -> np.ndarray:
    """The sample's 26 categorical fields, rows in order, fields in order; table t's id is
    int(hex, 16) % table_size + t * table_size, a missing field is id 0 of its table."""
    ids = []
    with open(path) as lines:
        for line in lines:
            fields = line.rstrip("\n").split("\t")[14:40]
            ids.extend((int(f, 16) % table_size if f else 0) + t * table_size for t, f in enumerate(fields))
    return np.array(ids, dtype=np.int64)


def next_access(trace: np.ndarray) -> list[int]:
    seen: dict[int, int] = {}
    out = [NEVER] * len(trace)
    for t in range(len(trace) - 1, -1, -1):
        out[t] = seen.get(int(trace[t]), NEVER)
        seen[int(trace[t])] = t
    return out


def libcachesim_hits(cache_class, trace: np.ndarray, capacity: int, later=None) -> int:
    """Hits of libCacheSim's `cache_class` with `capacity` objects of size 1; `later` is
    `next_access(trace)` when the caller has it already."""
    cache = cache_class(cache_size=capacity)
    hits = 0
    later = next_access(trace) if later is None else later
    for t, (row, later) in enumerate(zip(trace.tolist(), later)):
        hits += cache.get(lcs.Request(obj_size=1, obj_id=row, clock_time=t, next_access_vtime=later))
    return hits


ZIPF_CASES = [  # (lookups, rows, exponent, seed)
    (20_000, 3_000, 0.8, 0),
    (20_000, 3_000, 1.05, 1),
    (20_000, 5_000, 1.3, 2),
]
CAPACITIES = [1, 16, 250, 2_000]


@pytest.fixture(scope="module", params=ZIPF_CASES, ids=lambda c: f"zipf{c[2]}-seed{c[3]}")
def zipf(request):
    return zipf_trace(*request.param)


@pytest.fixture(scope="module")
def zipf_reference(zipf):
    """libCacheSim's LRU and Belady hits at CAPACITIES: {capacity: (lru, belady)}."""
    later = next_access(zipf)
    return {
        c: (libcachesim_hits(lcs.LRU, zipf, c, later), libcachesim_hits(lcs.Belady, zipf, c, later)) for c in CAPACITIES
    }


@pytest.mark.parametrize("capacity", CAPACITIES)
def test_lru_and_opt_hits_equal_libcachesim_on_zipf(zipf, zipf_reference, capacity):
    lru, belady = zipf_reference[capacity]
    assert simulate_lru(zipf, capacity).hits == lru
    assert simulate_opt(zipf, capacity).hits == belady


def test_curves_equal_libcachesim_on_zipf(zipf, zipf_reference):
    lru = lru_mrc(zipf)
    opt = opt_mrc(zipf, CAPACITIES)
    assert [(lru.hits_at(c), int(h)) for c, h in zip(CAPACITIES, opt.hits)] == [zipf_reference[c] for c in CAPACITIES]


@pytest.mark.parametrize("engine", ["native", "numpy"])
def test_both_exact_lru_engines_equal_libcachesim(zipf, zipf_reference, engine):
    """The C loop (where it builds) and the vectorised twin, streamed in uneven chunks."""
    if engine == "native" and not native.available():
        pytest.skip("no C++ compiler here")
    curve = profile_lru(zipf, engine=engine, chunk_size=4_999)
    assert [curve.hits_at(c) for c in CAPACITIES] == [zipf_reference[c][0] for c in CAPACITIES]


@pytest.mark.parametrize("capacity", [7, 300])
def test_lfu_hits_equal_libcachesim(zipf, capacity):
    """Same counting rule as libCacheSim's LFU: counts since insertion, LRU among ties."""
    assert simulate_lfu(zipf, capacity).hits == libcachesim_hits(lcs.LFU, zipf, capacity)


@pytest.mark.parametrize("capacity", [5, 120])
def test_lookahead_with_one_lookup_per_batch_is_belady_or_lru(zipf, capacity):
    """batch_size=1, depth=0: the planner sees the whole trace and evicts the furthest next use:
    Belady; horizon=0 sees nothing ahead: LRU. Plan-time reuses are those caches' hits."""
    trace = zipf[:6_000]
    far = simulate_lookahead(trace, capacity, batch_size=1, depth=0)
    blind = simulate_lookahead(trace, capacity, batch_size=1, depth=0, horizon=0)
    assert far.extra["reused_rows"] == libcachesim_hits(lcs.Belady, trace, capacity)
    assert blind.extra["reused_rows"] == libcachesim_hits(lcs.LRU, trace, capacity)
    assert far.fetched_rows == len(trace) - far.extra["reused_rows"]


@pytest.fixture(scope="module")
def criteo():
    from scratchkit.data.samples import KAGGLE_SAMPLE, PLACE_IT

    if not KAGGLE_SAMPLE.exists():
        pytest.skip(f"no Criteo Kaggle sample: {PLACE_IT}")
    return criteo_trace(KAGGLE_SAMPLE)


CRITEO_CAPACITIES = [64, 4_096, 20_000]  # the sample has 31,614 distinct ids


def test_lru_and_opt_hits_equal_libcachesim_on_criteo(criteo):
    assert len(criteo) == 7_200 * 26
    later = next_access(criteo)
    lru_curve = lru_mrc(criteo)
    opt_curve = opt_mrc(criteo, CRITEO_CAPACITIES)
    for capacity, opt_hits in zip(CRITEO_CAPACITIES, opt_curve.hits):
        lru = libcachesim_hits(lcs.LRU, criteo, capacity, later)
        belady = libcachesim_hits(lcs.Belady, criteo, capacity, later)
        assert (simulate(criteo, "lru", capacity).hits, lru_curve.hits_at(capacity)) == (lru, lru)
        assert (simulate(criteo, "opt", capacity).hits, int(opt_hits)) == (belady, belady)
