"""What a trace says about caching: skew, reuse between batches, look-ahead working sets, Amdahl.

These are the numbers the course plots. Each is a few lines of NumPy over ids the data source
already produces, so a learner can check any of them by hand on a tiny example:

    skew           the hottest x% of ids serve y% of the lookups (`access_cdf`, `top_share`)
    reuse          how much of batch b's working set U_b batch b-1 already touched
    window         |U_b u U_b+1 u ... u U_b+D|: what a scratchpad must hold to run D batches ahead
    time           the share of a step the embedding stages take
    Amdahl         a step whose hits run s times faster is at most 1 / (1 - hit rate) faster
    sampling       what a SHARDS-sampled LRU curve costs in accuracy against the exact one
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from scratchkit.sim.checks import as_trace
from scratchkit.sim.curve import Curve
from scratchkit.sim.mrc import lru_mrc
from scratchkit.sim.profile import profile_lru
from scratchkit.sim.sampling import curve_error, smallest_trusted_capacity
from scratchkit.sim.window import window_sizes as trailing_windows


# --- skew --------------------------------------------------------------------------------------
def access_cdf(trace, points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """(share of distinct ids, share of lookups they serve), hottest ids first.

    Point k says: the k hottest distinct ids serve `y[k]` of all lookups. Downsampled to at most
    `points` points (always keeping the last, (1, 1)) so a 10M-lookup trace plots instantly.
    """
    trace = as_trace(trace)
    if trace.size == 0:
        raise ValueError("access_cdf of an empty trace: there are no lookups to count")
    if points < 2:
        raise ValueError(f"points must be >= 2, got {points}")
    counts = np.sort(np.unique(trace, return_counts=True)[1])[::-1]  # [distinct], hottest first
    served = np.cumsum(counts) / trace.size
    share = np.arange(1, counts.size + 1) / counts.size
    keep = np.unique(np.linspace(0, counts.size - 1, min(points, counts.size)).round().astype(np.int64))
    return share[keep], served[keep]


def top_share(trace, fraction: float) -> float:
    """Share of lookups served by the hottest `fraction` of distinct ids (rounded up to >= 1 id)."""
    trace = as_trace(trace)
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if trace.size == 0:
        raise ValueError("top_share of an empty trace: there are no lookups to count")
    counts = np.sort(np.unique(trace, return_counts=True)[1])[::-1]
    k = max(1, int(np.ceil(fraction * counts.size)))
    return float(counts[:k].sum() / trace.size)


# --- working sets ------------------------------------------------------------------------------
def _check_table(source, table: int) -> None:
    if not 0 <= table < len(source.table_sizes):
        raise ValueError(f"table {table} out of range: the source has {len(source.table_sizes)} tables")


def working_sets(source, table: int, num_batches: int, start: int = 0) -> list[np.ndarray]:
    """U_b for b = start .. start+num_batches-1: the sorted unique ids of `table` in each batch."""
    _check_table(source, table)
    if num_batches <= 0:
        raise ValueError(f"num_batches must be positive, got {num_batches}")
    if start < 0 or start + num_batches > len(source):
        raise ValueError(f"batches {start}..{start + num_batches - 1} are outside the source's {len(source)} batches")
    return [np.unique(source.batch(b).ids[table]) for b in range(start, start + num_batches)]


def consecutive_reuse(sets: list[np.ndarray]) -> np.ndarray:
    """[n-1]: for b = 1..n-1, the share of U_b that U_b-1 also touched (0 when U_b is empty)."""
    if len(sets) < 2:
        raise ValueError(f"reuse needs at least 2 batches, got {len(sets)}")
    return np.array(
        [np.isin(cur, prev, assume_unique=True).mean() if cur.size else 0.0 for prev, cur in zip(sets[:-1], sets[1:])]
    )


def window_working_set(sets: list[np.ndarray], depth: int) -> np.ndarray:
    """[n-depth]: |U_b u ... u U_b+depth| for every window of depth+1 consecutive batches.

    With look-ahead depth D, batch b trains while batches b+1 .. b+D are already planned, so the
    scratchpad holds those D+1 working sets at once (plus victims in transit). The windows that
    start before batch 0 are left out (scratchkit/sim/window.py counts them all).
    """
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    if len(sets) < depth + 1:
        raise ValueError(f"a window of depth {depth} needs {depth + 1} batches, got {len(sets)}")
    return trailing_windows(sets, depth)[depth:]


@dataclass(frozen=True)
class WindowSizes:
    """Working-set size of a look-ahead window, per depth, for one table."""

    depths: np.ndarray  # [k]
    mean: np.ndarray  # [k] mean over windows
    max: np.ndarray  # [k] largest window: what the scratchpad must hold
    no_reuse: np.ndarray  # [k] (D+1) * B * L, the bound if no id ever repeated


def window_sizes(source, table: int, depths, num_batches: int) -> WindowSizes:
    """Mean and max window working set for each depth, over the first `num_batches` batches."""
    depths = np.asarray(list(depths), dtype=np.int64)
    if depths.size == 0:
        raise ValueError("give at least one depth")
    sets = working_sets(source, table, num_batches)
    sizes = [window_working_set(sets, int(d)) for d in depths]
    lookups = source.batch(0).ids[table].size  # B * L for fixed pooling
    return WindowSizes(
        depths, np.array([s.mean() for s in sizes]), np.array([s.max() for s in sizes]), (depths + 1) * lookups
    )


# --- time ------------------------------------------------------------------------------------
EMBEDDING_STAGES = ("embedding_forward", "embedding_backward", "update")


def embedding_share(stage_seconds) -> float:
    """Share of a step's measured time spent in the embedding stages (forward, backward, update)."""
    total = sum(stage_seconds.values())
    if not total > 0:
        raise ValueError(f"no time measured: stage times {dict(stage_seconds)}")
    return sum(stage_seconds.get(s, 0.0) for s in EMBEDDING_STAGES) / total


# --- Amdahl ------------------------------------------------------------------------------------
def amdahl_speedup(hit_rate, hit_speedup: float):
    """Speed-up of the embedding work when a `hit_rate` share runs `hit_speedup` times faster.

    time = (1 - h) + h / s of the all-miss time, so speed-up = 1 / ((1 - h) + h / s): however fast
    the hits, it never exceeds 1 / (1 - h). Misses cap the speed-up. Works on arrays of h.
    """
    h = np.asarray(hit_rate, dtype=np.float64)
    if np.any((h < 0) | (h > 1)):
        raise ValueError(f"hit rates must be in [0, 1], got {hit_rate}")
    if not hit_speedup >= 1:
        raise ValueError(f"hit_speedup must be >= 1 (hits are not slower than misses), got {hit_speedup}")
    result = 1.0 / ((1.0 - h) + h / hit_speedup)
    return float(result) if result.ndim == 0 else result


# --- sampling --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sampled:
    """One LRU curve of a trace, exact (rate 1.0) or sampled, with its error and its time."""

    rate: float
    curve: Curve
    seconds: float  # fastest of `repeats` runs
    trusted_from: int  # capacities below 1/rate rows are not to be trusted
    mae: float  # mean |hit rate - exact hit rate| over the trusted capacities
    max_error: float  # largest such difference


def sampled_lru(trace, rates=(1.0, 0.1, 0.01), repeats: int = 3) -> list[Sampled]:
    """The exact LRU curve (rate 1.0, one pass of Mattson's stack) and SHARDS estimates at `rates`,
    each timed and held to the exact one at every capacity from 1/rate rows to the distinct ids."""
    trace = as_trace(trace)
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    exact = lru_mrc(trace)
    out = []
    for rate in rates:
        best, curve = float("inf"), exact
        for _ in range(repeats):
            started = time.perf_counter()
            curve = lru_mrc(trace) if rate == 1.0 else profile_lru(trace, rate=rate)
            best = min(best, time.perf_counter() - started)
        trusted = smallest_trusted_capacity(rate)
        error = curve_error(curve, exact, trusted)
        out.append(Sampled(rate, curve, best, trusted, error["mae"], error["max"]))
    return out
