"""Float32 arithmetic NumPy lacks, as the kernels do it: the twins (twin.py, twin_tbe.py) share it."""

from __future__ import annotations

import numpy as np


def fma_f32(a, b, c) -> np.ndarray:
    """a*b + c in float32 with a single rounding, like C's fmaf and a GPU's FFMA.

    In float64, a*b is exact (24+24 significant bits fit in 53) and TwoSum gives p + c = s + t
    exactly. Rounding s to float32 is then right except when s lies exactly halfway between two
    float32 numbers and the lost part t tips the true value to one side: fix those.
    """
    a, b, c = (np.asarray(x, dtype=np.float32).astype(np.float64) for x in (a, b, c))
    p = a * b
    s = p + c
    bp = s - p
    t = (p - (s - bp)) + (c - bp)  # s + t == a*b + c exactly
    r = np.asarray(s.astype(np.float32))
    r64 = r.astype(np.float64)
    side = np.where(s > r64, np.float32(np.inf), np.float32(-np.inf))
    other = np.nextafter(r, side)  # the float32 neighbour on s's side of r
    halfway = (s != r64) & ((r64 + other.astype(np.float64)) * 0.5 == s)
    tipped = halfway & (t != 0) & (np.sign(t) == np.sign(s - r64))
    return np.where(tipped, other, r).astype(np.float32)
