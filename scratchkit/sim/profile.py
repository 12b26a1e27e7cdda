"""`profile_lru`: the LRU miss-ratio curve of a trace streamed in chunks, exact or sampled.

    profile_lru(trace)                         # exact: hits at every capacity 1 .. distinct ids
    profile_lru("ids.npy", rate=0.1)           # SHARDS, fixed rate (a tenth of the ids)
    profile_lru(chunks_of_ids, size=100_000)   # SHARDS, at most 100k ids kept (constant memory)
    profile_lru(trace, on_chunk=bar.update)    # called with each chunk's length (progress bars)

Memory grows with the ids kept (all distinct ids when exact, R x them at a fixed rate, `size` at
a fixed size), never with the trace: a `.npy` path is memory-mapped and read a chunk at a time.
The work is done by `lru_engine.cpp` (`native.py`); where it cannot be built, by its twin
`stack_twin.py` for sampled curves (slow: fine for small traces) and by the vectorised
`stackdist.py` for exact curves of in-memory traces.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import numpy as np

from scratchkit.sim import native
from scratchkit.sim.chunks import CHUNK_SIZE, trace_chunks
from scratchkit.sim.curve import Curve
from scratchkit.sim.sampling import (
    EXACT,
    MAX_BINS,
    check_sampling,
    exact_curve,
    fixed_rate_curve,
    fixed_size_curve,
    threshold_for,
)
from scratchkit.sim.stack_twin import StackTwin
from scratchkit.sim.stackdist import stack_distance_histogram

ENGINES = ("auto", "native", "twin", "numpy")


class NativeEngine:
    """`lru_engine.cpp` behind the same four methods as `StackTwin`."""

    def __init__(self, threshold: int, exact: bool, max_ids: int = 0, max_bins: int = MAX_BINS):
        self._lib = native.library()
        self._handle = self._lib.sk_lru_new(threshold, int(exact), max_ids, max_bins)
        if not self._handle:
            raise MemoryError("could not allocate the LRU stack engine")
        self._free = weakref.finalize(self, self._lib.sk_lru_free, self._handle)

    def feed(self, ids: np.ndarray) -> None:
        self._lib.sk_lru_feed(self._handle, native.i64_pointer(ids), ids.size)

    def stats(self) -> tuple[list[int], list[float]]:
        counts, reals = np.zeros(6, np.int64), np.zeros(3, np.float64)
        self._lib.sk_lru_stats(self._handle, native.i64_pointer(counts), native.f64_pointer(reals))
        return counts.tolist(), reals.tolist()

    def hist(self) -> np.ndarray:
        out = np.zeros(self.stats()[0][4], np.int64)
        self._lib.sk_lru_hist(self._handle, native.i64_pointer(out))
        return out

    def bins(self) -> np.ndarray:
        out = np.zeros(self.stats()[0][5], np.float64)
        self._lib.sk_lru_bins(self._handle, native.f64_pointer(out))
        return out


def make_engine(rate: float | None, size: int | None, native_loop: bool, max_bins: int = MAX_BINS):
    """The counting engine for these sampling settings: the C loop, or its Python twin."""
    exact = rate in (None, 1.0) and size is None
    threshold = EXACT if rate is None else threshold_for(rate)
    kind = NativeEngine if native_loop else StackTwin
    return kind(threshold, exact, size or 0, max_bins)


def profile_lru(
    source,
    *,
    rate: float | None = None,
    size: int | None = None,
    chunk_size: int = CHUNK_SIZE,
    on_chunk: Callable[[int], None] | None = None,
    engine: str = "auto",
    max_bins: int = MAX_BINS,
) -> Curve:
    """LRU hits at every capacity of `source` (array, `.npy` path, or iterable of id arrays).

    `rate` in (0, 1]: SHARDS at that fixed rate; `size`: SHARDS keeping at most `size` ids
    (starting at `rate`, default 1). Sampled curves carry their final rate in `Curve.rate` and
    estimate hits; trust them from 1/rate rows up (`sampling.smallest_trusted_capacity`).
    `engine`: "auto" (the C loop if it builds, else the twins), "native", "twin" (the Python
    stack) or "numpy" (the vectorised exact curve; not for sampling).
    """
    rate, size = check_sampling(rate, size)
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    stream = trace_chunks(source, chunk_size)
    exact = rate in (None, 1.0) and size is None
    if engine == "auto":
        engine = "native" if native.available() else ("numpy" if exact else "twin")
    if engine == "numpy":
        if not exact:
            raise ValueError("engine numpy computes exact curves only; sample with native or twin")
        return _numpy_exact(stream, on_chunk)
    counter = make_engine(rate, size, engine == "native", max_bins)
    for chunk in stream:
        counter.feed(chunk)
        if on_chunk is not None:
            on_chunk(chunk.size)
    (seen, sampled, cold, _, _, _), (weight, width, final_rate) = counter.stats()
    if exact:
        return exact_curve(seen, cold, counter.hist())
    if size is None:
        return fixed_rate_curve(seen, sampled, cold, counter.hist(), final_rate)
    return fixed_size_curve(seen, counter.bins(), width, weight, final_rate)


def _numpy_exact(stream, on_chunk) -> Curve:
    """No compiler here: gather the chunks and run the vectorised twin (memory O(trace))."""
    parts = []
    for chunk in stream:
        parts.append(chunk)
        if on_chunk is not None:
            on_chunk(chunk.size)
    trace = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    hist = stack_distance_histogram(trace)
    return exact_curve(int(trace.size), int(hist.size), hist)
