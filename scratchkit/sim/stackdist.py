"""LRU stack distances for a whole trace in one vectorised pass (Mattson et al., 1970).

The *stack distance* of an access is the number of distinct other ids used since the previous
access to the same id (-1 for a first access). An LRU cache of `C` rows hits exactly the accesses
whose distance is below `C`, for every `C` at once (LRU is a *stack algorithm*), so one histogram
of distances is the whole miss-ratio curve.

Counting distinct ids, turned into counting pairs. Let an id be used at `p` and next at `t`.
Every position `s` strictly between them is either the last use of some id before `t` (one per
distinct id) or a use whose id comes back before `t`, i.e. a reuse pair `(s, next(s))` nested
inside `(p, t)`. So

    distance(t) = (t - p - 1) - #{reuse pairs (s, u) with p < s and u < t}.

Counting, for every pair, the pairs nested in it is a 2-D dominance count. List the pairs in
reverse start order, each with the value `v = n - 1 - end`; the pairs nested in a pair are then
exactly the *earlier* entries with a *greater* value. For every entry at once, that count is
assembled one bit of `v` at a time, most significant first (an MSD radix pass): at bit `b` the
entries are grouped by the bits above `b` (equal prefixes, original order inside a group);
within a group an earlier entry whose bit `b` is 1 is greater than a later one whose bit is 0,
and pairs that differ higher up were counted at a higher bit. A running sum of the bits, reset
at each group start, counts those. Then the entries are split stably, zeros before ones, which
groups them by one more bit for the next level (the ordering of a wavelet matrix).

That is O(n log n) work in ~12 NumPy array passes per bit and no Python loop over accesses: 4-5 s
for the whole curve of a 10M-access trace on this project's 2-core VM. It is now the vectorised
twin of the C loop (`lru_engine.cpp`, via `profile.py`), which is about 4x faster and streams, and
the exact curve's fallback where no compiler is found.
"""

from __future__ import annotations

import numpy as np

from scratchkit.sim.checks import as_trace
from scratchkit.sim.reuse import next_use


def stack_distances(trace) -> np.ndarray:
    """LRU stack distance of every access, -1 where the id is used for the first time. [n] int64"""
    trace = as_trace(trace)
    n = trace.size
    starts, ends = _reuse_pairs(trace)
    distance, pair = _distances(starts, ends, n, track=True)
    out = np.full(n, -1, dtype=np.int64)
    out[ends[pair]] = distance
    return out


def stack_distance_histogram(trace) -> np.ndarray:
    """`hist[d]` = accesses at stack distance `d`, for d in 0 .. unique ids - 1 (first accesses,
    which miss at every capacity, are left out). [unique ids] int64"""
    trace = as_trace(trace)
    starts, ends = _reuse_pairs(trace)
    distance, _ = _distances(starts, ends, trace.size, track=False)
    unique = trace.size - starts.size  # every id's last use starts no pair
    return np.bincount(distance, minlength=unique).astype(np.int64)


def _reuse_pairs(trace: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, t) for every reuse: p = previous use, t = the reuse; ordered by p. [m], [m] int64"""
    nxt = next_use(trace)
    starts = np.flatnonzero(nxt < trace.size)
    return starts, nxt[starts]


def _distances(starts, ends, n: int, track: bool):
    """Stack distance of each reuse pair, returned in an order of the algorithm's choosing, with
    (if `track`) the pair index of each entry; else None."""
    m = starts.size
    dtype = np.int32 if n < 2**31 else np.int64  # halves memory traffic when it fits
    value = (n - 1 - ends)[::-1].astype(dtype)  # reversed start order: nested = earlier & greater
    carry = (ends - starts - 1)[::-1].astype(dtype)  # the gap; nested pairs are subtracted
    who = np.arange(m - 1, -1, -1, dtype=np.int64) if track else None
    if m == 0:
        return carry.astype(np.int64), who
    bits = max(int(n - 1).bit_length(), 1)
    index = np.arange(m, dtype=dtype)
    shifted, bit, ones, base, start = (np.empty(m, dtype) for _ in range(5))
    value_next, carry_next = np.empty_like(value), np.empty_like(carry)
    who_next = np.empty_like(who) if track else None
    dest = np.empty(m, dtype=np.intp)
    start[0] = 1
    for b in range(bits - 1, -1, -1):
        np.right_shift(value, b, out=shifted)
        np.bitwise_and(shifted, 1, out=bit)  # bit b of each value
        np.cumsum(bit, out=ones)
        ones -= bit  # ones strictly before, whole array
        np.right_shift(shifted, 1, out=shifted)  # group key: the bits above b
        np.not_equal(shifted[1:], shifted[:-1], out=start[1:], casting="unsafe")
        if (m >> (bits - 1 - b)) >= 64:  # few groups (< m/64): fill per group
            first = np.flatnonzero(start)
            base.fill(0)
            base[first] = np.diff(ones[first], prepend=0)
            np.cumsum(base, out=base)  # ones before my group began
        else:  # many groups: a running max is cheaper
            np.multiply(ones, start, out=base)
            np.maximum.accumulate(base, out=base)  # ones before my group began
        np.subtract(ones, base, out=base)  # earlier ones in my group ...
        np.multiply(base, bit, out=shifted)
        base -= shifted  # ... counted only where my bit is 0
        carry -= base
        # Stable split, zeros first: a zero goes to (zeros before it), a one after all zeros.
        zeros = m - int(ones[-1]) - int(bit[-1])
        np.subtract(index, ones, out=start)  # `start` is free again: reuse it
        np.add(ones, zeros, out=shifted)
        shifted -= start
        shifted *= bit
        start += shifted
        dest[:] = start
        value_next[dest] = value
        carry_next[dest] = carry
        value, value_next = value_next, value
        carry, carry_next = carry_next, carry
        if track:
            who_next[dest] = who
            who, who_next = who_next, who
        start[0] = 1
    return carry.astype(np.int64), who
