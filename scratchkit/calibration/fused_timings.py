"""`calibrate`'s timings of the fused SGD path (scratchkit/embedding/fused_sgd.py): how `gpu-only`
trains on a CPU, the backward and the SGD update in one pass, as FBGEMM's CPU TBE does them.

The two calls are timed as tbe_timings.py times `embedding_backward_tables`, on the same grid
(8 tables at BACKWARD_LOOKUPS, ids drawn from 4x and from 1/8 of a table's lookups, tables of 4x
a table's lookups), their time on 2 lookups a table taken out:

    host_tbe_sort       sort_lookups: every table's lookups sorted in summation order and
                        checked (the fused path's backward stage): seconds per lookup by (row
                        bytes, lookups per distinct id, lookups of a table)
    host_tbe_fused      fused_sgd_update on those sorted lookups: each distinct id's gradient
                        summed in registers and applied to its row (the update stage), the same
                        axes. It reads each lookup's gradient row and each distinct row once;
                        the unfused pair writes the summed gradients to a workspace and reads
                        them back, which is what fusing saves

Their fixed costs are priced as the unfused calls' ("tbe_backward", "tbe_sgd"): the same
marshalling of every table's pointers.
"""

from __future__ import annotations

import numpy as np
import torch

from scratchkit.calibration.kit_timings import ROW_BYTES, TABLES, Bench
from scratchkit.calibration.tbe_timings import BACKWARD_LOOKUPS, BAG, no_cheaper_when_fewer
from scratchkit.costmodel.curves import RowCurve

LR = 0.01  # any step size: the update's work does not depend on it


def fused_curves(bench: Bench, quick: bool) -> dict[str, RowCurve]:
    """{"host_tbe_sort": ..., "host_tbe_fused": ...}: seconds per lookup of the fused path's two calls."""
    from scratchkit.embedding.fused_sgd import fused_sgd_update, sort_lookups
    from scratchkit.embedding.table_batched import BackwardWorkspace

    sizes = BACKWARD_LOOKUPS[not quick]
    most = max(sizes) // TABLES
    workspace = BackwardWorkspace()
    points = {"host_tbe_sort": [], "host_tbe_fused": []}
    for row in ROW_BYTES[not quick]:
        dim = row // 4
        slab = torch.zeros(TABLES, 4 * most, dim)  # every table of every size a view of it

        def timed(n, spread=4.0):  # -> (sort seconds, fused seconds, lookups per distinct id), n a table
            rows = 4 * n
            weights = [slab[t, :rows] for t in range(TABLES)]
            offsets = [torch.arange(0, n, BAG)] * TABLES
            ids = [[bench.randint(max(int(spread * n), 1), n) for _ in range(TABLES)] for _ in range(bench.repeats)]
            repeats = n * TABLES * bench.repeats / sum(len(torch.unique(i)) for k in ids for i in k)
            grad = torch.randn(len(offsets[0]), TABLES, dim)
            sort = bench.median(lambda k: sort_lookups(ids[k], offsets, [rows] * TABLES, workspace))
            sorted_ = [sort_lookups(ids[k], offsets, [rows] * TABLES) for k in range(bench.repeats)]
            fused = bench.median(lambda k: fused_sgd_update(weights, sorted_[k], grad, LR))
            return sort, fused, repeats

        fixed = np.median([timed(2)[:2] for _ in range(3)], axis=0)  # the calls' part that is not per lookup
        for spread in (4.0, 1 / 8):  # one axis value per spread (the median repeats), as the backward's
            runs = [(n, *timed(n // TABLES, spread)) for n in sizes]
            repeats = float(np.median([r for *_, r in runs]))
            for k, name in enumerate(points):
                per = no_cheaper_when_fewer([max(run[1 + k] - fixed[k], 1e-3 * fixed[k]) / run[0] for run in runs])
                points[name] += [(row, repeats, n // TABLES, float(p)) for (n, *_), p in zip(runs, per)]
    return {name: RowCurve(tuple(p)) for name, p in points.items()}
