"""Rows fetched and written back per step, without training: what a projection of a full-size
model needs when a laptop cannot run it.

`bench --project` prices the rows a *measured* run moved. A model too big to train here (tables
of millions of rows, a cache of a quarter of each) gets its counters from the kit's own
decisions on its batches instead: each design's `moves` (ScratchPipe's planner for the
ScratchPipes, sim/'s caches served a batch at a time for the caches; nothing for gpu-only and
hybrid: designs/, a family a module), run with the cache the design runs (`Design.config_for`:
prefetch-lru-device plans at depth 1, LRU victims). Each is the mean over the second half of
`batches` batches (past the filling of the cache).
"""

from __future__ import annotations

from dataclasses import replace

from scratchkit.config import TrainConfig
from scratchkit.designs import Design, design_of
from scratchkit.projection.project import project_all, works_of


def simulated_counters(
    config: TrainConfig, design: str | Design, batches: int = 16, source=None, sample_tables: int | None = None
) -> tuple[float, float]:
    """(rows fetched, rows written back) per step of `design` on `config`'s batches.
    `sample_tables`: count only the first k tables and scale up by tables / k (for models whose
    tables are alike, as the embedding-bound profiles' are: faster)."""
    from scratchkit.data.synthetic import SyntheticSource

    d = design_of(design)
    if d.moves is None:
        return 0.0, 0.0
    config = d.config_for(config)
    if batches < 2:
        raise ValueError(f"batches must be at least 2, got {batches}")
    tables = len(config.data.table_sizes)
    if sample_tables is not None and sample_tables < tables:
        fetched, written = simulated_counters(first_tables(config, sample_tables), d, batches)
        return fetched * tables / sample_tables, written * tables / sample_tables
    return d.moves(config, source if source is not None else SyntheticSource(config.data), batches)


def first_tables(config: TrainConfig, k: int) -> TrainConfig:
    """`config` with only its first `k` tables."""
    data = config.data
    return config.replace(
        data=replace(
            data,
            table_sizes=data.table_sizes[:k],
            rank_rows=data.rank_rows[:k] if data.rank_rows else None,
            zipf=data.zipf[:k] if isinstance(data.zipf, tuple) else data.zipf,
        )
    )


def project_config(
    config: TrainConfig,
    designs: list[str],
    machines: list[str],
    batches: int = 16,
    source=None,
    sample_tables: int | None = None,
) -> list[dict]:
    """Projections of `designs` on `config` without training it: the working sets of its first
    batches and the counters above. Per design, {machine: Projection}."""
    from scratchkit.data.synthetic import SyntheticSource

    source = source if source is not None else SyntheticSource(config.data)
    bases = works_of(config, designs, source, batches=min(batches, 2))
    works = [
        base.with_counters(*simulated_counters(config, d, batches, None if sample_tables else source, sample_tables))
        for d, base in zip(designs, bases)
    ]
    return project_all(designs, works, machines)
