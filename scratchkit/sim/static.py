"""Static cache: pin the `capacity` most frequent ids of a profiled prefix; never change.

What a practitioner does before training: count ids over a sample of the data (the first
`prefix_share` of the trace), put the hottest rows on the device, and serve every other lookup
from the host. `prefix_share=1.0` profiles the whole trace: the oracle hot set, the best any
static cache of that size can do.

Counting rules:
- hits are counted over the whole trace, the profiled prefix included (the hot set is in place
  before the first batch);
- a miss gathers its row from the host for that lookup and does not keep it: fetched_rows =
  misses; the cold row is updated where it lives, on the host, so nothing is written back while
  training runs (written_back_rows = 0);
- the pinned rows are loaded once before the trace (`extra["pinned_rows"]`); every one of them was
  looked up in the prefix, so all are dirty at the end and the final flush writes them back
  (flushed_rows = pinned rows).
Ties in frequency go to the smaller id, so the hot set is deterministic. If the prefix holds fewer
distinct ids than `capacity`, only those are pinned and the rest of the cache stays empty.
"""

from __future__ import annotations

import math

import numpy as np

from scratchkit.sim.checks import as_capacity, as_share, as_trace
from scratchkit.sim.record import SimResult

# Profiling a tenth of the data is a cheap pass that, on a trace whose popularity does not drift,
# already ranks the hot rows well; 1.0 gives the oracle hot set.
DEFAULT_PREFIX_SHARE = 0.1


def hot_set(trace, capacity: int, prefix_share: float = DEFAULT_PREFIX_SHARE) -> np.ndarray:
    """The pinned ids: the `capacity` most frequent of the profiled prefix, hottest first. [<=capacity]"""
    trace = as_trace(trace)
    capacity = as_capacity(capacity)
    share = as_share(prefix_share, "prefix_share")
    profiled = trace[: math.ceil(share * trace.size)]
    ids, counts = np.unique(profiled, return_counts=True)
    order = np.lexsort((ids, -counts))  # most frequent first, then smaller id
    return ids[order[:capacity]]


def simulate_static(trace, capacity: int, prefix_share: float = DEFAULT_PREFIX_SHARE) -> SimResult:
    trace = as_trace(trace)
    capacity = as_capacity(capacity)
    share = as_share(prefix_share, "prefix_share")
    pinned = hot_set(trace, capacity, share)
    hits = int(np.count_nonzero(np.isin(trace, pinned)))
    misses = trace.size - hits
    return SimResult(
        policy="static",
        capacity=capacity,
        lookups=int(trace.size),
        hits=hits,
        misses=misses,
        fetched_rows=misses,
        written_back_rows=0,
        flushed_rows=int(pinned.size),
        extra={
            "prefix_share": share,
            "profiled_lookups": math.ceil(share * trace.size),
            "pinned_rows": int(pinned.size),
        },
    )


def static_by_batch(sets: list[np.ndarray], rows: int, capacity: int, profiled: int) -> np.ndarray:
    """The static trainer's cache served a batch at a time: the `capacity` ids found in most of the
    first `profiled` batches pinned (ties, never-seen ids among them, to the smaller id: the order
    of embedding/victims.py's `profile_hot_ids`), and each later batch's other distinct ids fetched
    and, once trained, written back. `sets[b]`: batch b's distinct ids. -> [later batches] misses."""
    capacity = as_capacity(capacity)
    counts = np.bincount(np.concatenate(sets[:profiled]), minlength=rows)
    pinned = np.zeros(rows, dtype=bool)
    pinned[np.argsort(-counts, kind="stable")[:capacity]] = True
    return np.array([np.count_nonzero(~pinned[s]) for s in sets[profiled:]], dtype=np.int64)
