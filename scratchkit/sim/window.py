"""How many distinct ids the batches in flight hold together: the look-ahead window's working set.

ScratchPipe plans batch b while batches b-D .. b-1 are still in flight (D = look-ahead depth), so
while Plan(b) runs, the scratchpad holds the working sets of b-D .. b at once:

    window(b) = |U_{b-D} u ... u U_b|          U_k = the distinct ids of batch k

The largest window is the fewest slots that let every batch run: the *minimum capacity*. Depth 0
is one batch alone, the least a demand-filled cache (lru, lfu) must hold. This is the one place
the kit computes it; the trainers, the simulators and the course all call it.

Counting without building unions. An id used in batch b is in the windows of b .. b+D. If its
previous use was in batch p, the windows up to p+D counted it already, so batch b adds it to
windows max(b, p+D+1) .. b+D only. One interval per (id, batch) pair, summed with a difference
array: O(pairs log pairs) for the sort that finds each pair's previous use, whatever D is.

`window_sizes_obvious` is the slow twin the tests hold this against: Python sets, union by union.
"""

from __future__ import annotations

import numpy as np


def window_sizes(working_sets: list[np.ndarray], depth: int) -> np.ndarray:
    """[n] for each batch b, |U_{b-D} u ... u U_b| (windows at the start are shorter).

    `working_sets[k]`: batch k's distinct ids (any order, no repeats within a batch).
    """
    _check_depth(depth)
    n = len(working_sets)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    sizes = np.array([len(s) for s in working_sets], dtype=np.int64)
    ids = np.concatenate([np.asarray(s, dtype=np.int64) for s in working_sets])  # [pairs]
    batch = np.repeat(np.arange(n, dtype=np.int64), sizes)  # [pairs]
    return sizes_from_pairs(batch, previous_use(ids, batch), n, depth)


def previous_use(ids: np.ndarray, batch: np.ndarray) -> np.ndarray:
    """[pairs] the batch of each (id, batch) pair's previous use of the same id, -1 for none.
    Pairs come in batch order, one per distinct id per batch."""
    order = np.argsort(ids, kind="stable")  # by id, batch order kept among equals
    same = ids[order][1:] == ids[order][:-1]  # [pairs-1] this pair and the one before: one id
    previous = np.full(ids.shape, -1, dtype=np.int64)
    previous[order[1:][same]] = batch[order[:-1][same]]
    return previous


def sizes_from_pairs(batch: np.ndarray, previous: np.ndarray, num_batches: int, depth: int) -> np.ndarray:
    """The window sizes from each pair's batch and previous use (the interval count above)."""
    first = np.where(previous >= 0, np.maximum(batch, previous + depth + 1), batch)  # [pairs]
    last = np.minimum(batch + depth, num_batches - 1)
    keep = first <= last
    change = np.zeros(num_batches + 1, dtype=np.int64)
    np.add.at(change, first[keep], 1)
    np.add.at(change, last[keep] + 1, -1)
    return np.cumsum(change[:num_batches])


def minimum_capacity(working_sets: list[np.ndarray], depth: int) -> int:
    """The largest window: the fewest slots with which every batch in flight fits (0 for none)."""
    sizes = window_sizes(working_sets, depth)
    return int(sizes.max()) if sizes.size else 0


def window_sizes_obvious(working_sets: list[np.ndarray], depth: int) -> np.ndarray:
    """The slow twin of `window_sizes`: each window's union, built id by id."""
    _check_depth(depth)
    return np.array(
        [
            len(set().union(*(set(s.tolist()) for s in working_sets[max(0, b - depth) : b + 1])))
            for b in range(len(working_sets))
        ],
        dtype=np.int64,
    )


def _check_depth(depth: int) -> None:
    if not isinstance(depth, (int, np.integer)) or isinstance(depth, bool) or depth < 0:
        raise ValueError(f"depth must be an integer >= 0, got {depth!r}")
