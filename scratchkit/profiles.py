"""Named configurations: `tiny` for tests, `small` for the notebooks, `criteo-like` for Criteo's
table sizes, and the embedding-bound family: models in ScratchPipe's regime, where the embeddings,
not the MLPs, set the speed (dim 64-128, pooling 20-40, tables of a million rows, 655k lookups a
step).

`--scale` (the `scale` argument) shrinks the tables to fit a laptop and keeps the work per step and
the locality: batch, pooling and dim stay, and the ids come from the full-size Zipf law, its ranks
folded into the smaller tables (data/synthetic.py), so a scaled batch's working set and its
look-ahead window stay close to the full size's (the head of the law, where most lookups land,
stays whole; only the tail folds onto it). The cache and scratchpad sizes are rows per table, capped at the
table, so a scaled run keeps the full-size capacity where the table allows."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from scratchkit.choices import Registry
from scratchkit.config import CacheParams, DataConfig, ModelConfig, TrainConfig
from scratchkit.measured import measured

# Cardinalities of the 26 categorical features of Criteo Kaggle (Display Advertising Challenge),
# as the DLRM reference implementation counts them.
CRITEO_KAGGLE_CARDINALITIES = (
    1460,
    583,
    10131227,
    2202608,
    305,
    24,
    12517,
    633,
    3,
    93145,
    5683,
    8351593,
    3194,
    27,
    14992,
    5461306,
    10,
    5652,
    2173,
    4,
    7046547,
    18,
    15,
    286181,
    105,
    142572,
)


def _tiny() -> TrainConfig:
    # Trains in well under a second: small enough for property tests over many random cases.
    return TrainConfig(
        data=DataConfig(table_sizes=(500, 300, 200), pooling=2, batch_size=32, num_dense=4, zipf=1.0),
        model=ModelConfig(dim=8, bottom_mlp=(16, 8), top_mlp=(16, 1)),
        # (D+1)*B*L = 192 rows at D=2: every trainer fits at any locality; the last table is whole
        cache=CacheParams(capacity=200),
    )


def _small() -> TrainConfig:
    # The notebooks' default: a few seconds for a few hundred steps on a laptop CPU, yet big enough
    # that embedding work dominates the step as it does in production.
    return TrainConfig(
        data=DataConfig(table_sizes=(20_000,) * 8, pooling=8, batch_size=256, num_dense=13, zipf=1.05),
        model=ModelConfig(dim=16, bottom_mlp=(64, 16), top_mlp=(64, 1)),
        # 41% of each table: (D+1)*B*L = 6144 rows at D=2, so ScratchPipe fits at any locality
        cache=CacheParams(capacity=8192),
    )


def criteo_like(scale: float = 0.01) -> TrainConfig:
    """26 tables with Criteo Kaggle's cardinalities times `scale` (1.0 = the real sizes, ~34M rows)."""
    if not scale > 0:
        raise ValueError(f"criteo-like scale must be > 0, got {scale}")
    sizes = tuple(max(4, math.ceil(c * scale)) for c in CRITEO_KAGGLE_CARDINALITIES)
    return TrainConfig(
        data=DataConfig(table_sizes=sizes, pooling=1, batch_size=512, num_dense=13, zipf=1.1),
        model=ModelConfig(dim=16, bottom_mlp=(64, 16), top_mlp=(64, 1)),
        # (D+1)*B*L = 4096 rows covers D <= 7 at any locality; small tables are held whole
        cache=CacheParams(capacity=4096),
    )


# Zipf exponents of Criteo Kaggle's 26 features, fitted to real rows of it by maximum likelihood
# (scripts/fit_criteo_locality.py; the rows are not part of the kit; measured.json says which)
CRITEO_KAGGLE_EXPONENTS = tuple(measured("criteo_kaggle_exponents"))
EMBEDDING_ROWS = 1_000_000  # rows of each full-size table of the embedding-bound profiles


def _scaled(rows: tuple[int, ...], scale: float, what: str) -> tuple[int, ...]:
    if not scale > 0:
        raise ValueError(f"{what} scale must be > 0, got {scale}")
    return tuple(min(n, max(4, math.ceil(n * scale))) for n in rows)  # never above full size


def _embedding_bound(
    scale: float, zipf: float, dim: int = 64, pooling: int = 40, batch_size: int = 2048, capacity: int = 250_000
) -> TrainConfig:
    full = (EMBEDDING_ROWS,) * 8
    return TrainConfig(
        data=DataConfig(
            table_sizes=_scaled(full, scale, "embedding-bound"),
            pooling=pooling,
            batch_size=batch_size,
            num_dense=13,
            zipf=zipf,
            rank_rows=full,
        ),
        model=ModelConfig(dim=dim, bottom_mlp=(128, dim), top_mlp=(128, 1)),
        cache=CacheParams(capacity=capacity),
    )


def embedding_bound(scale: float = 1.0) -> TrainConfig:
    """8 tables of 1M rows, dim 64, pooling 40, batch 2048, low locality (Zipf 0.8): 56k distinct
    rows per table per batch, 141k in a depth-2 window; the scratchpad holds 25% of each table."""
    return _embedding_bound(scale, zipf=0.8)


def embedding_bound_skewed(scale: float = 1.0) -> TrainConfig:
    """As `embedding-bound` with high locality (Zipf 1.2): 12k distinct rows per table per batch,
    29k in a depth-2 window; the scratchpad holds 10% of each table."""
    return _embedding_bound(scale, zipf=1.2, capacity=100_000)


def embedding_bound_wide(scale: float = 1.0) -> TrainConfig:
    """Wider rows (dim 128), shorter bags (pooling 20), bigger batches (4096), Zipf 0.8."""
    return _embedding_bound(scale, zipf=0.8, dim=128, pooling=20, batch_size=4096)


def criteo_skew(scale: float = 0.25) -> TrainConfig:
    """Criteo Kaggle's 26 tables (times `scale`), each as skewed as the real log's feature
    (CRITEO_KAGGLE_EXPONENTS), dim 64, one id per feature, batch 4096."""
    full = CRITEO_KAGGLE_CARDINALITIES
    return TrainConfig(
        data=DataConfig(
            table_sizes=_scaled(full, scale, "criteo-skew"),
            pooling=1,
            batch_size=4096,
            num_dense=13,
            zipf=CRITEO_KAGGLE_EXPONENTS,
            rank_rows=full,
        ),
        model=ModelConfig(dim=64, bottom_mlp=(128, 64), top_mlp=(128, 1)),
        cache=CacheParams(capacity=65_536),
    )


@dataclass(frozen=True)
class Workload:
    """A named configuration: `make()` builds it; a `scalable` one's `make(scale)` shrinks its
    tables (the module note; `make()` is its default scale)."""

    make: Callable[..., TrainConfig]
    scalable: bool = False


# Every command's --profile, the benchmarks and the scripts read this registry; a workload of your
# own is one `PROFILES.register(name, Workload(make))` away.
PROFILES: Registry[Workload] = Registry(
    "profile ",
    {
        "tiny": Workload(_tiny),
        "small": Workload(_small),
        "criteo-like": Workload(criteo_like, scalable=True),
        "embedding-bound": Workload(embedding_bound, scalable=True),
        "embedding-bound-skewed": Workload(embedding_bound_skewed, scalable=True),
        "embedding-bound-wide": Workload(embedding_bound_wide, scalable=True),
        "criteo-skew": Workload(criteo_skew, scalable=True),
    },
)


def scalable_profiles() -> tuple[str, ...]:
    """The registered workloads that take a scale."""
    return tuple(name for name, workload in PROFILES.items() if workload.scalable)


def get_profile(name: str, scale: float | None = None, **data_overrides) -> TrainConfig:
    """The named profile, at `scale` (the scalable profiles only; None: the profile's default),
    with optional DataConfig fields overridden (e.g. zipf=0.5)."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
    workload = PROFILES[name]
    if scale is not None and not workload.scalable:
        raise ValueError(f"profile {name!r} has no scale; the scalable ones are {', '.join(scalable_profiles())}")
    config = workload.make() if scale is None else workload.make(scale)
    if data_overrides:
        config = config.replace(data=replace(config.data, **data_overrides))
    return config
