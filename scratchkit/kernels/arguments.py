"""Checks of the arrays a scratchpad's kernels are given: a kernel that reads past a buffer does not
raise, it corrupts memory or crashes the process. So every value is checked on the host before a
launch, and the error names the array, the position and the value."""

from __future__ import annotations

import numpy as np


def check_range(name: str, values: np.ndarray, low: int, high: int) -> None:
    """Every value in [low, high), else ValueError naming the first one outside."""
    if values.size and (values.min() < low or values.max() >= high):
        pos = int(np.flatnonzero((values < low) | (values >= high))[0])
        raise ValueError(f"{name}[{pos}] = {values[pos]} is out of range [{low}, {high})")


def check_unique(name: str, values: np.ndarray) -> None:
    """No value twice (a scatter to one slot from two threads races), else ValueError naming both."""
    if values.size < 2:
        return
    ordered = np.sort(values)
    repeats = np.flatnonzero(ordered[1:] == ordered[:-1])
    if repeats.size:
        value = ordered[repeats[0]]
        first, second = np.flatnonzero(values == value)[:2]
        raise ValueError(f"{name}[{second}] = {value} repeats {name}[{first}]")


def check_offsets(offsets: np.ndarray, nnz: int) -> None:
    """Bag starts: from 0, never decreasing, within the `nnz` lookups (the embedding-bag convention)."""
    if offsets.size == 0:
        if nnz:
            raise ValueError(f"offsets is empty but there are {nnz} lookups: every lookup needs a bag")
        return
    if offsets[0] != 0:
        raise ValueError(f"offsets[0] = {offsets[0]} must be 0 (bag 0 starts at the first lookup)")
    steps = np.diff(offsets)
    if steps.size and steps.min() < 0:
        pos = int(np.flatnonzero(steps < 0)[0]) + 1
        raise ValueError(
            f"offsets[{pos}] = {offsets[pos]} is smaller than offsets[{pos - 1}] = "
            f"{offsets[pos - 1]}: offsets must not decrease"
        )
    if offsets[-1] > nnz:
        raise ValueError(f"offsets[{offsets.size - 1}] = {offsets[-1]} is beyond the {nnz} lookups")
