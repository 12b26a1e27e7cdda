"""`calibrate`'s timings of the table-batched C++ calls (scratchkit/embedding/table_batched.py), the
ones the trainers make on a CPU: one call per stage for every table of a step.

Each call is timed as kit_timings.py times the per-table ops (CPU time, median of fresh inputs,
each after a 4 MiB flush), on 8 tables at once (views of one buffer), at the lookups a step of the
kit's profiles makes (hundreds to tens of thousands), and its time on 2 lookups a table (its fixed
cost, saved as host_calls' "tbe_forward", "tbe_backward", "tbe_sgd" per call and "tbe_*_table" per
table, from 2 and 8 tables: each table's pointers and sizes are marshalled) is taken out:

    host_tbe_lookup     pooled_lookup_tables, bags of 8, random rows of the table: seconds per
                        lookup by (row bytes, table bytes, lookups of the call)
    host_tbe_backward   embedding_backward_tables, ids drawn from 4x a table's lookups (most
                        distinct) and from 1/8 of them (each repeated ~8x, as a skewed step's):
                        seconds per lookup by (row bytes, lookups per distinct id, lookups of a
                        table). Repeats sort faster and add into rows already written; into a
                        workspace, as the trainers' (no page faulted in per call). Its lookups
                        reach past RADIX_MIN a table, where the loop's radix sort takes over
                        from introsort (BACKWARD_LOOKUPS)
    host_tbe_update     apply_updates (SGD) of distinct rows just read, as a step's update follows
                        its lookups: seconds per row by (row bytes, table bytes, density: the
                        share of the table's rows updated). The update walks its rows in
                        ascending order, so a dense one is nearly a stream, about twice as
                        fast a row as a sparse one; a curve by rows of the call priced them all
                        alike
"""

from __future__ import annotations

import numpy as np
import torch

from scratchkit.costmodel.hardware import RowCurve
from scratchkit.calibration.kit_timings import FOOTPRINTS, ROW_BYTES, TABLES, Bench
from scratchkit.designs.work import TBE_BAG

# lookups of one call, all tables together (quick, full)
TBE_LOOKUPS = ((1024, 16384), (512, 2048, 8192, 32768, 262144))
BAG = TBE_BAG  # lookups a bag (the cost model prices other bags apart: designs/work.py)
DENSITIES = ((0.1, 0.6, 0.95), (0.05, 0.25, 0.6, 0.85, 0.98))  # of the update (quick, full)
UPDATE_ROWS = 2**20  # at most this many rows a call: the densest points of big tables are left out
FEW = 2  # tables: a call's fixed cost is timed on FEW and TABLES tables (a part per table)
# the backward's: the same, and in both at least one past RADIX_MIN lookups a table (32,768), where
# torch sorts stably and the loop sorts by its own radix sort instead of introsort (another curve
# for the same call: embedding-bound's 82k lookups a table priced from introsort's 2k cost less)
BACKWARD_LOOKUPS = (TBE_LOOKUPS[0] + (TABLES * 40_960,), TBE_LOOKUPS[1])


def tbe_curves(bench: Bench, quick: bool) -> tuple[dict[str, float], RowCurve, RowCurve, RowCurve]:
    """(fixed costs {"tbe_forward", "tbe_backward", "tbe_sgd"} per call and the same + "_table" per
    table of the call, lookup, backward and update curves)."""
    from scratchkit.config import OptimizerConfig
    from scratchkit.embedding.table_batched import (
        BackwardWorkspace,
        apply_updates,
        embedding_backward_tables,
        pooled_lookup_tables,
    )

    footprints, sizes, sgd = FOOTPRINTS[not quick], TBE_LOOKUPS[not quick], OptimizerConfig()
    buffer = torch.ones(TABLES * footprints[-1] // 4)
    offsets = lambda n: torch.arange(0, n, BAG)

    def lookups(weights, n):  # seconds of one call of n lookups a table, fresh ids each run
        ids = [[bench.randint(weights[0].shape[0], n) for _ in weights] for _ in range(bench.repeats)]
        return bench.median(lambda k: pooled_lookup_tables(weights, ids[k], [offsets(n)] * len(weights)))

    workspace = BackwardWorkspace()

    def backward(dim, n, T=TABLES, spread=4.0):  # -> (seconds, lookups per distinct id)
        ids = [[bench.randint(max(int(spread * n), 1), n) for _ in range(T)] for _ in range(bench.repeats)]
        repeats = n * T * bench.repeats / sum(len(torch.unique(i)) for k in ids for i in k)
        grad = torch.randn(len(offsets(n)), T, dim)
        return bench.median(
            lambda k: embedding_backward_tables(ids[k], [offsets(n)] * T, grad, [4 * n] * T, workspace=workspace)
        ), repeats

    def update(weights, n):  # -> (seconds, rows): up to n distinct rows a table, read just before (untimed)
        rows, T = weights[0].shape[0], len(weights)
        coalesced = [
            embedding_backward_tables(
                [torch.unique(bench.randint(rows, max(n, 1))) for _ in weights],
                [torch.zeros(1, dtype=torch.int64)] * T,
                torch.randn(1, T, weights[0].shape[1]),
                [rows] * T,
            )
            for _ in range(bench.repeats)
        ]
        moved = sum(float(c.flat.counts[t]) for c in coalesced for t in range(T)) / bench.repeats
        warm = lambda k: [w.index_select(0, index) for w, (index, _) in zip(weights, coalesced[k])]
        return bench.median(lambda k: apply_updates(weights, [None] * T, coalesced[k], sgd), warm), moved

    fixed = {}

    def fixed_costs(name, few, many):  # a call's time on 2 lookups a table: at FEW and TABLES tables
        per_table = max((many - few) / (TABLES - FEW), 0.0)
        fixed.setdefault(f"tbe_{name}", []).append(max(few - FEW * per_table, 0.0))
        fixed.setdefault(f"tbe_{name}_table", []).append(per_table)

    lookup_points, backward_points, update_points = [], [], []
    for row in ROW_BYTES[not quick]:
        # a call's time on 2 lookups a table, the part of every call that is not per lookup: the
        # median over the footprints (and three runs of the backward), so one slow run of it does
        # not turn every point measured against it into nothing
        tables = {
            f: [buffer[t * f // 4 : (t + 1) * f // 4].view(-1, row // 4) for t in range(TABLES)] for f in footprints
        }
        fixed_b = float(np.median([backward(row // 4, 2)[0] for _ in range(3)]))
        fixed_l = float(np.median([lookups(tables[f], 2) for f in footprints]))
        fixed_u = float(np.median([update(tables[f], 2)[0] for f in footprints]))
        for spread in (4.0, 1 / 8):  # one axis value per spread (the median repeats), so the grid is whole
            timed = [(n, *backward(row // 4, n // TABLES, spread=spread)) for n in BACKWARD_LOOKUPS[not quick]]
            repeats = float(np.median([r for _, _, r in timed]))
            per = no_cheaper_when_fewer([max(seconds - fixed_b, 1e-3 * fixed_b) / n for n, seconds, _ in timed])
            backward_points += [(row, repeats, n // TABLES, p) for (n, _, _), p in zip(timed, per)]
        for footprint, weights in tables.items():
            per = no_cheaper_when_fewer(
                [max(lookups(weights, n // TABLES) - fixed_l, 1e-3 * fixed_l) / n for n in sizes]
            )
            lookup_points += [(row, footprint, n, p) for n, p in zip(sizes, per)]
            rows, timed = footprint // row, []
            for density in DENSITIES[not quick]:
                if density * rows * TABLES > UPDATE_ROWS:
                    break
                seconds, moved = update(weights, round(-np.log1p(-density) * rows))  # draws for that share
                timed.append((moved / (TABLES * rows), max(seconds - fixed_u, 1e-3 * fixed_u) / moved))
            update_points += sparse_no_cheaper(row, footprint, timed)
            fixed_costs("forward", lookups(weights[:FEW], 2), lookups(weights, 2))
            fixed_costs("sgd", update(weights[:FEW], 2)[0], update(weights, 2)[0])
        fixed_costs("backward", backward(row // 4, 2, FEW)[0], fixed_b)
    fixed_costs = {name: float(np.median(values)) for name, values in fixed.items()}
    return fixed_costs, RowCurve(tuple(lookup_points)), RowCurve(tuple(backward_points)), RowCurve(tuple(update_points))


def sparse_no_cheaper(row: int, footprint: int, timed: list[tuple[float, float]]) -> list[tuple]:
    """The update curve's points of one row size and table, from (density, seconds per row) at
    increasing density: a sparser update costs no less a row than a denser one (its rows are
    farther apart), so each is at least the next one's. Its sparsest point is a call of a few
    hundred rows, timed as a small difference from the call's fixed cost, which a noisy run can
    bring to nothing (the floor): interpolated from such a point, every sparse update of a small
    table would be priced as nearly free."""
    per_row = no_cheaper_when_fewer([seconds for _, seconds in timed])
    return [(row, footprint, density, seconds) for (density, _), seconds in zip(timed, per_row)]


def no_cheaper_when_fewer(per_lookup: list[float]) -> list[float]:
    """Seconds per lookup at increasing lookups a call, each at least the next one's: with the
    call's fixed part taken out, fewer lookups do not cost less each (a smaller call is timed as a
    small difference of two times, and its noise could otherwise make it nearly free)."""
    out = list(per_lookup)
    for i in range(len(out) - 2, -1, -1):
        out[i] = max(out[i], out[i + 1])
    return out
