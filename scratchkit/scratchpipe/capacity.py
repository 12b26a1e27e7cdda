"""Invariant 5: the scratchpad must hold every batch in flight, or Train could miss.

Plan(b) counts batches b-D .. b-1 as in flight, so batches b-D .. b hold slots together: a table's
scratchpad needs at least the largest union of D+1 consecutive working sets of the run
(`scratchkit.sim.window`, the kit's one computation of it). `train()` checks it before the first
step, over every batch of the call, and refuses a scratchpad that is too small, naming the one
capacity that fits every table.
"""

from __future__ import annotations

import numpy as np

from scratchkit.data.checks import check_batch
from scratchkit.scratchpipe.stripes import striped_minimum
from scratchkit.sim.window import minimum_capacity


def minimum_capacities(source, depth: int = 2, start: int = 0, stop: int | None = None, stripes: int = 1) -> list[int]:
    """Per table, the fewest scratchpad rows ScratchPipe needs at look-ahead `depth` to train
    batches start..stop-1 of `source` (stop None: to its end). `max()` of them is the one
    capacity that fits every table: `CacheParams(capacity=max(...), depth=depth)`, what the CLI's
    `--capacity min` asks for. Each batch is checked at the door first (an id out of range
    would corrupt the count). With plan stripes (`CacheParams.plan_stripes`, stripes.py) each
    stripe's slots must hold its own ids' window. Depth 0 (no batch ahead) gives one batch's own
    working set: what a scratchpad needs when nothing is held (the planner's tests use it)."""
    if depth < 0:
        raise ValueError(f"look-ahead depth must be >= 0, got {depth}")
    stop = len(source) if stop is None else stop
    if not 0 <= start < stop <= len(source):
        raise ValueError(
            f"batches start={start} .. stop={stop} must lie in 0 .. {len(source)}, "
            f"the source's batches, with start < stop"
        )
    sets = []  # [batches][tables] the distinct ids
    for b in range(start, stop):
        batch = source.batch(b)
        check_batch(batch, source.table_sizes, b, num_dense=source.num_dense)
        sets.append([np.unique(ids) for ids in batch.ids])
    if stripes == 1:
        return [minimum_capacity([s[t] for s in sets], depth) for t in range(len(source.table_sizes))]
    return [
        striped_minimum(
            [minimum_capacity([u[u % stripes == k] for u in (s[t] for s in sets)], depth) for k in range(stripes)],
            stripes,
        )
        for t in range(len(source.table_sizes))
    ]


class ScratchpadTooSmall(ValueError):
    """A scratchpad smaller than the batches in flight need (invariant 5). `fits_all` is the
    smallest capacity that fits every table: the one number to ask for."""

    def __init__(self, table: int, have: int, need: int, depth: int, worst: int, fits_all: int, stripes: int = 1):
        self.table, self.have, self.need, self.depth, self.worst, self.fits_all, self.stripes = (
            table,
            have,
            need,
            depth,
            worst,
            fits_all,
            stripes,
        )
        super().__init__(
            f"{self.problem()} A capacity of {fits_all} rows fits every table: "
            f"CacheParams(capacity={fits_all}), or a smaller depth."
        )

    def problem(self) -> str:
        """What is wrong, in words that name no parameter (callers add how to ask for more)."""
        if self.stripes > 1:
            return (
                f"table {self.table}: a scratchpad of {self.have} rows is too small for look-ahead "
                f"depth {self.depth} in {self.stripes} plan stripes: each stripe's slots must hold "
                f"the rows its ids touch in the {self.depth + 1} batches in flight, {self.need} "
                f"rows in all (the minimum for this data and these stripes)."
            )
        return (
            f"table {self.table}: a scratchpad of {self.have} rows is too small for look-ahead "
            f"depth {self.depth}: the {self.depth + 1} batches in flight touch up to {self.need} "
            f"distinct rows of it (the minimum for this data; (D+1)*B*L = {self.worst} is the "
            f"worst case with no reuse)."
        )

    def __reduce__(self):  # crosses process boundaries whole
        return type(self), (self.table, self.have, self.need, self.depth, self.worst, self.fits_all, self.stripes)


def check_capacities(minimums: list[int], capacities: list[int], depth: int, worst: int, stripes: int = 1) -> None:
    """Raise ScratchpadTooSmall for the first table whose capacity is below its minimum. A table's
    capacity is capped at its size, so the capacity that fits all is the largest minimum."""
    for t, (need, have) in enumerate(zip(minimums, capacities)):
        if have < need:
            raise ScratchpadTooSmall(t, have, need, depth, worst, max(minimums), stripes)
