"""A --capacity (or --load-factor) too small for a trainer of the run, refused before anything
trains, with the one capacity that fits every trainer and table over every batch the run trains.

A trainer finds out mid-run: `lru` refuses at the first batch whose working set does not fit, so
its message can only name that batch's need, and a later batch may need more. Here the need is
counted over the whole run at once, from the windows each cache must hold
(`scratchkit.scratchpipe.capacity.minimum_capacities`, the kit's one count of them):

    lru, lfu       one batch's working set (a window of depth 0); lru-device likewise
    prefetch-lru   two consecutive batches' (depth 1: it fetches b+1 while b holds its rows)
    scratchpipe    the D+1 batches in flight (--depth D, per plan stripe)
    prefetch-lru-device   two (ScratchPipe on the device at the depth 1 its entry fixes)

each design's `window` (scratchkit/designs). `--capacity min` (ScratchPipe's minimum at --depth
>= 1) is never below any of them.
"""

from __future__ import annotations

from scratchkit.designs import DESIGNS
from scratchkit.scratchpipe.capacity import minimum_capacities


def check_capacity(training, trainers: list[str], source, config, batches: int, run: str) -> None:
    """Refuse a cache smaller than a trainer needs over batches 0..batches-1 (`training`: the
    run's TrainingRequest, --capacity and --load-factor), naming the fewest
    rows that fit every trainer here and `--capacity min`; `run` says which batches, in words."""
    if training.capacity == "min" or (training.capacity is None and training.load_factor is None):
        return  # the minimum itself, or the data's or profile's own cache size
    needs, depths = {}, {}  # trainer -> rows per table it needs, the depth of its window
    for name in trainers:
        window = DESIGNS[name].window(config)
        if window is not None:
            depths[name], stripes = window
            needs[name] = minimum_capacities(source, depths[name], 0, batches, stripes)
    if not needs:
        return
    fits = max(max(per_table) for per_table in needs.values())
    short = [
        (need, name, t, have)
        for name, per_table in needs.items()
        for t, need in enumerate(per_table)
        if need > (have := config.cache.capacity_for(int(source.table_sizes[t])))
    ]
    if short:
        need, name, t, have = max(short)  # the most any of them needs: say that one
        instead = " instead of --load-factor" if training.capacity is None else ""
        raise ValueError(
            f"{_asked(training, t, have)} is too small for {name} on {run}: "
            f"{_window(depths[name])} up to {need} distinct rows of table {t}; "
            f"use --capacity {fits}{instead} (the fewest every trainer and table here "
            f"accept) or --capacity min"
        )


def _window(depth: int) -> str:
    """What holds the rows at once, and its verb: one batch, or the batches in flight."""
    if depth == 0:
        return "a batch touches"
    return f"{depth + 1} batches in flight (look-ahead depth {depth}) touch"


def _asked(training, table: int, rows: int) -> str:
    if training.capacity is not None:
        return f"--capacity {training.capacity}"
    return f"--load-factor {training.load_factor} (table {table}: {rows} rows)"
