"""What one training step touches, the cost model's input: per table its rows, lookups, distinct
ids and cache (`TableWork`), and for the whole model the batch, the dense layers and the rows moved
(`StepWork`). Each design's `count` turns it into each stage's `Work` (designs/work.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from scratchkit.config import OptimizerKind, TrainConfig
from scratchkit.designs.work import FLOAT_BYTES


@dataclass(frozen=True)
class TableWork:
    """One table in one step: its size, its lookups and distinct ids, its cache or scratchpad."""

    rows: int
    lookups: float
    unique: float
    capacity: int  # slots of a cache or scratchpad (capped at the table)
    # its repeats by LRU stack distance within the batch (`reuse_bins`): ((distance in rows, repeats
    # per step), ...) by powers of two, each bin at its upper edge; () not known
    reuse: tuple = ()


def reuse_bins(ids: np.ndarray) -> dict[int, float]:
    """A batch's lookups of one table by how far back their row was last looked up: {d: repeats
    whose LRU stack distance (distinct other rows in between) is below d and at least d/2}, d a
    power of two (the kit's own miss-ratio curve, scratchkit/sim)."""
    from scratchkit.sim.mrc import lru_mrc

    if len(ids) == 0:
        return {}
    curve = lru_mrc(ids)
    edges = 2 ** np.arange(0, int(np.ceil(np.log2(max(curve.unique_ids, 2)))) + 1)
    hits = curve.hits_over(edges)  # repeats at distance below each edge
    counts = np.diff(np.concatenate([[0], hits]))
    return {int(d): float(c) for d, c in zip(edges, counts) if c}


@dataclass(frozen=True)
class StepWork:
    """What one step touches. Build with `from_config`, then set the rows moved (`with_counters`)."""

    batch_size: int
    dim: int
    state_width: int  # optimizer floats per row
    optimizer: OptimizerKind
    num_dense: int
    tables: tuple[TableWork, ...]
    bottom: tuple[int, ...]  # the bottom MLP's widths, its input first
    top: tuple[int, ...]  # the top MLP's widths, its input (dim + pairs) first
    fetched_rows: float = 0.0  # rows host -> device per step (caches, scratchpipe)
    written_back_rows: float = 0.0  # rows device -> host per step
    evicting_tables: float | None = None  # tables whose victim choice runs, per step (None: every
    # table whose cache is smaller than it, every step)
    plan_horizon: int = 0  # batches ScratchPipe's Plan looks ahead for victims' next use
    planners: int | None = None  # tables (or stripes) ScratchPipe plans at once; None: one per table
    host_threads: int | None = None  # the run's threads for the host's embedding loops (TrainConfig.threads)

    # ---- totals over the tables
    @property
    def num_tables(self) -> int:
        return len(self.tables)

    @property
    def lookups(self) -> float:
        return float(sum(t.lookups for t in self.tables))

    @property
    def unique_rows(self) -> float:
        return float(sum(t.unique for t in self.tables))

    @property
    def table_rows(self) -> int:
        return int(sum(t.rows for t in self.tables))

    @property
    def row_bytes(self) -> int:
        return self.dim * FLOAT_BYTES

    @property
    def moved_row_bytes(self) -> int:
        """A row travels with its optimizer state."""
        return (self.dim + self.state_width) * FLOAT_BYTES

    @property
    def plan_parallelism(self) -> int:
        return self.planners if self.planners is not None else self.num_tables

    def share(self, total: float, evicting_only: bool = False) -> list[float]:
        """`total` rows of the step split over the tables by their distinct ids (the measured
        counters are totals); `evicting_only`: only tables whose cache is smaller than the table."""
        weights = [t.unique if (t.capacity < t.rows or not evicting_only) else 0.0 for t in self.tables]
        whole = sum(weights)
        return [total * w / whole if whole else 0.0 for w in weights]

    @classmethod
    def from_config(cls, config: TrainConfig, source=None, batches: int = 4, start: int = 0) -> "StepWork":
        """Lookups and working sets averaged over batches start .. start+batches-1."""
        if source is None:
            from scratchkit.data.synthetic import SyntheticSource

            source = SyntheticSource(config.data)
        if batches <= 0:
            raise ValueError(f"batches must be positive, got {batches}")
        taken = [source.batch(b) for b in range(start, min(start + batches, len(source)))]
        if not taken:
            raise ValueError(f"the source has {len(source)} batches; none from batch {start}")
        sizes = config.data.table_sizes

        def reuse(t: int) -> tuple:  # the batches' repeats by distance, averaged
            total: dict[int, float] = {}
            for b in taken:
                for d, c in reuse_bins(np.asarray(b.ids[t])).items():
                    total[d] = total.get(d, 0.0) + c / len(taken)
            return tuple(sorted(total.items()))

        tables = tuple(
            TableWork(
                rows=n,
                lookups=float(np.mean([len(b.ids[t]) for b in taken])),
                unique=float(np.mean([len(np.unique(b.ids[t])) for b in taken])),
                capacity=config.cache.capacity_for(n),
                reuse=reuse(t),
            )
            for t, n in enumerate(sizes)
        )
        m, num_dense, T = config.model, source.num_dense, len(sizes)
        horizon = 4 * (config.cache.depth + 1) if config.cache.victim_policy == "furthest" else 0
        return cls(
            batch_size=config.data.batch_size,
            dim=m.dim,
            state_width=config.optimizer.state_width(m.dim),
            optimizer=config.optimizer.kind,
            num_dense=num_dense,
            tables=tables,
            bottom=(max(num_dense, 1), *m.bottom_mlp),
            top=(m.dim + (T + 1) * T // 2, *m.top_mlp),
            plan_horizon=horizon,
            planners=T * config.cache.plan_stripes,  # each table's stripes plan at once
            host_threads=config.host_threads(),
        )

    def with_counters(
        self, fetched_rows: float, written_back_rows: float, evicting_tables: float | None = None
    ) -> "StepWork":
        """The measured rows moved per step (a bench run's StepRecord counters), and the tables
        that chose victims (a cache still filling chooses none)."""
        return replace(
            self,
            fetched_rows=float(fetched_rows),
            written_back_rows=float(written_back_rows),
            evicting_tables=None if evicting_tables is None else float(evicting_tables),
        )

    @property
    def victim_share(self) -> float:
        """The share of the step's evicting tables (cache smaller than table) whose victim choice
        runs: the measured count over them, or 1."""
        able = sum(t.capacity < t.rows for t in self.tables)
        if self.evicting_tables is None or not able:
            return 1.0
        return min(1.0, self.evicting_tables / able)

    def with_hit_rate(self, hit_rate: float) -> "StepWork":
        """Rows moved per step for a demand cache with this per-lookup hit rate, when no counters
        were measured: each missed lookup of a cold row is roughly one missed distinct row, so
        fetched = min(working set, missed lookups); in steady state every fetch evicts a victim."""
        if not 0.0 <= hit_rate <= 1.0:
            raise ValueError(f"hit_rate must be in [0, 1], got {hit_rate}")
        rows = min(self.unique_rows, (1.0 - hit_rate) * self.lookups)
        return self.with_counters(rows, rows)


def mlp_flops(config: TrainConfig, num_dense: int, num_tables: int) -> tuple[float, int]:
    """(forward + backward FLOPs per step, number of Linear layers) of the dense model.

    A Linear of `i -> o` on B samples costs 2*B*i*o FLOPs forward and twice that backward (input
    and weight gradients), except the first layer, whose input (the dense features) needs no
    gradient; the interaction's batched dot products cost 2*B*(T+1)^2*dim, and twice that backward.
    """
    m, B = config.model, config.data.batch_size
    vectors = num_tables + 1
    top_in = m.dim + vectors * (vectors - 1) // 2
    widths = [(max(num_dense, 1), *m.bottom_mlp), (top_in, *m.top_mlp)]
    forward = sum(2 * B * i * o for w in widths for i, o in zip(w[:-1], w[1:]))
    forward += 2 * B * vectors * vectors * m.dim
    layers = sum(len(w) - 1 for w in widths)
    first = widths[0]
    return 3.0 * forward - 2 * B * first[0] * first[1], layers
