"""Rows fetched and written back per step, without training: what a projection of a full-size
model needs when a laptop cannot run it.

`bench --project` prices the rows a *measured* run moved. A model too big to train here (tables
of millions of rows, a cache of a quarter of each) gets its counters from the kit's own
decisions on its batches instead:

    scratchpipe(-device), ScratchPipe's planner itself (`PlanAhead`, the C++ loop where it
    prefetch-lru-device builds) plans the batches at the trainer's depth and victim policy:
                        its misses are the rows fetched, its dirty victims the rows written back
    lru, prefetch-lru,  a demand cache per table at batch granularity, as trainers/cached.py
    lfu                 serves it: a batch's distinct ids not resident are fetched; past the
                        capacity the least recently used rows the batch does not use are evicted
                        (LFU is counted as LRU: same fills, other victims)
    static              the hottest rows of the first batches pinned; a batch's other distinct
                        ids are fetched and written back
    gpu-only, hybrid    nothing moves

Each is the mean over the second half of `batches` batches (past the filling of the cache).
"""

from __future__ import annotations

import numpy as np

from scratchkit.config import TrainConfig
from scratchkit.trainers import TrainerKind, pipelined, priced_as, trainer_config


def simulated_counters(
    config: TrainConfig, trainer: str, batches: int = 16, source=None, sample_tables: int | None = None
) -> tuple[float, float]:
    """(rows fetched, rows written back) per step of `trainer` on `config`'s batches, with the
    cache the trainer runs (`trainer_config`: prefetch-lru-device plans at depth 1, LRU victims).
    `sample_tables`: count only the first k tables and scale up by tables / k (for models whose
    tables are alike, as the embedding-bound profiles' are: faster)."""
    from dataclasses import replace

    from scratchkit.data.synthetic import SyntheticSource

    if not priced_as(trainer).caches:
        return 0.0, 0.0
    config = trainer_config(trainer, config)
    if batches < 2:
        raise ValueError(f"batches must be at least 2, got {batches}")
    tables = len(config.data.table_sizes)
    if sample_tables is not None and sample_tables < tables:
        data = config.data
        config = config.replace(
            data=replace(
                data,
                table_sizes=data.table_sizes[:sample_tables],
                rank_rows=data.rank_rows[:sample_tables] if data.rank_rows else None,
                zipf=data.zipf[:sample_tables] if isinstance(data.zipf, tuple) else data.zipf,
            )
        )
        fetched, written = simulated_counters(config, trainer, batches)
        return fetched * tables / sample_tables, written * tables / sample_tables
    source = source if source is not None else SyntheticSource(config.data)
    if pipelined(trainer):  # both make the same plans
        return _planned(config, source, batches)
    ids = [source.batch(b).ids for b in range(batches)]  # [batch][table] ids
    sizes, totals = config.data.table_sizes, np.zeros(2)
    for t, rows in enumerate(sizes):
        capacity = config.cache.capacity_for(rows)
        sets = [np.unique(batch[t]) for batch in ids]
        count = _static if priced_as(trainer) is TrainerKind.STATIC else _demand_lru
        totals += count(sets, rows, capacity)
    return float(totals[0]), float(totals[1])


def _demand_lru(sets: list[np.ndarray], rows: int, capacity: int) -> np.ndarray:
    """(fetched, written back) per batch, mean over the second half, of a batch-granular LRU."""
    last = np.full(rows, -1, dtype=np.int64)  # batch that last used each resident id, -1 = not
    resident = 0
    moved = []
    for b, unique in enumerate(sets):
        missed = unique[last[unique] < 0]
        resident += len(missed)
        evicted = 0
        if resident > capacity:  # the least recent rows this batch does not use
            others = np.flatnonzero(last >= 0)
            others = others[~np.isin(others, unique, assume_unique=True)]
            evicted = resident - capacity
            victims = others[np.argpartition(last[others], evicted - 1)[:evicted]]
            last[victims] = -1
            resident = capacity
        last[unique] = b
        moved.append((len(missed), evicted))
    return np.mean(moved[len(moved) // 2 :], axis=0)


def _static(sets: list[np.ndarray], rows: int, capacity: int) -> np.ndarray:
    """The hottest ids of the first half pinned; each batch's other ids fetched and returned."""
    half = len(sets) // 2
    counts = np.bincount(np.concatenate(sets[:half]), minlength=rows)
    pinned = np.zeros(rows, dtype=bool)
    pinned[np.argsort(-counts, kind="stable")[:capacity]] = True
    misses = [np.count_nonzero(~pinned[s]) for s in sets[half:]]
    return np.array([np.mean(misses), np.mean(misses)])


def _planned(config: TrainConfig, source, batches: int) -> tuple[float, float]:
    """ScratchPipe's planner on empty scratchpads, batch after batch, as a `train()` call plans."""
    from scratchkit.costmodel.planning import fresh_planner

    planner = fresh_planner(config, source)
    moved = []
    for b in range(batches):
        planned = planner.plan(b)
        moved.append((sum(p.fetched_rows for p in planned.tables), sum(p.written_back_rows for p in planned.tables)))
    fetched, written = np.mean(moved[batches // 2 :], axis=0)
    return float(fetched), float(written)


def project_config(
    config: TrainConfig,
    trainers: list[str],
    machines: list[str],
    batches: int = 16,
    source=None,
    sample_tables: int | None = None,
) -> list[dict]:
    """Projections of `trainers` on `config` without training it: the working sets of its first
    batches and the counters above. Per trainer, {machine: costmodel.Projection}."""
    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.projection.costmodel import project_all, works_of

    source = source if source is not None else SyntheticSource(config.data)
    bases = works_of(config, trainers, source, batches=min(batches, 2))
    works = [
        base.with_counters(*simulated_counters(config, t, batches, None if sample_tables else source, sample_tables))
        for t, base in zip(trainers, bases)
    ]
    return project_all(trainers, works, machines)
