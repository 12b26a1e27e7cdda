"""NumPy's speeds on this machine, as the caches' bookkeeping and the kit's host maps use NumPy:
its streaming copy, its gathers and scatters of 8-byte ids by map size, the fixed cost of its
calls (and of one kernel of the .cu files as this CPU runs it), np.unique's sort rate and
np.partition's select rate. calibration/calibrate.py gathers them into the host's `Hardware`."""

from __future__ import annotations

import numpy as np

from scratchkit.calibration.kit_timings import FOOTPRINTS, SORT_SIZES, TABLES, Bench, row_points
from scratchkit.costmodel.hardware import MB, RateCurve
from scratchkit.designs.work import sort_units
from scratchkit.kernels.engine import EngineKind, make_engine, resolve


def numpy_stream_bandwidth(bench: Bench) -> float:
    src = np.ones(8 * MB)  # 64 MiB of float64: beyond any last-level cache
    dst = np.empty_like(src)
    return 2 * src.nbytes / bench.median(lambda _: np.copyto(dst, src))


def numpy_row_points(bench: Bench, quick: bool) -> tuple[list, list]:
    """8-byte ids gathered (np.take) and scattered (fancy assignment): the caches' and the
    scratchpad's maps, by the bytes of the map and the ids of the call."""
    footprints = FOOTPRINTS[not quick]
    ids = np.ones(footprints[-1] // 8, dtype=np.int64)
    gathers, scatters = [], []
    out = lambda n: np.empty(n, dtype=np.int64)
    for footprint in footprints:
        maps = [ids[r * footprint // 8 : (r + 1) * footprint // 8] for r in range(ids.nbytes // footprint)]
        fresh = lambda n: bench.rng.integers(0, len(maps[0]), n)
        gathers += row_points(
            bench, quick, 8, footprint, len(maps), out, fresh, lambda r, i, o: np.take(maps[r], i, out=o)
        )
        scatters += row_points(
            bench, quick, 8, footprint, len(maps), out, fresh, lambda r, i, o: maps[r].__setitem__(i, o)
        )
    return gathers, scatters


def numpy_call_latencies(bench: Bench) -> dict[str, float]:
    small, pick = [np.arange(16) + t for t in range(TABLES)], np.array([1, 2])
    kinds = (
        lambda t: small[t][pick],
        lambda t: small[t].__setitem__(pick, 3),
        lambda t: np.flatnonzero(small[t] > 3),
        lambda t: np.zeros(16, dtype=bool),
    )
    # a kernel of the .cu files as this CPU runs it (the host build, else the NumPy twin): a gather
    engine = make_engine(resolve(EngineKind.AUTO, "cpu"))
    return {
        "numpy": float(np.mean([bench.per_call(f) for f in kinds])),
        "unique": bench.per_call(lambda t: np.unique(small[t], return_inverse=True, return_counts=True)),
        "kernel": bench.per_call(lambda t: engine.gather_ids(small[t], pick)),
        "device_plan_table": 0.0,
    }  # measured last, beyond what the finished hardware prices


def numpy_sort_rate(bench: Bench, quick: bool, unique_fixed: float) -> RateCurve:
    points = []
    for n in SORT_SIZES[not quick]:
        tables = max(1, min(TABLES, 2**16 // n))
        ids = [bench.rng.integers(0, 4 * n, n) for _ in range(tables)]  # a table's ids each
        t = bench.per_call(lambda k: np.unique(ids[k], return_inverse=True, return_counts=True), tables)
        points.append((n, sort_units(n) / max(t - unique_fixed, 0.1 * t)))
    return RateCurve(tuple(points))


def numpy_select_rate(bench: Bench, quick: bool) -> RateCurve:
    """Keys/s of np.partition at the k-th of n int64 keys (k = n/4, about a victim choice's share)."""
    small = [np.arange(16) * (t + 1) for t in range(TABLES)]
    fixed = bench.per_call(lambda t: np.partition(small[t], 4))
    points = []
    for n in SORT_SIZES[not quick]:
        tables = max(1, min(TABLES, 2**16 // n))
        keys = [bench.rng.integers(0, 2**40, n) for _ in range(tables)]
        t = bench.per_call(lambda k: np.partition(keys[k], n // 4), tables)
        points.append((n, n / max(t - fixed, 0.1 * t)))
    return RateCurve(tuple(points))
