"""Named configurations: `tiny` for tests, `small` for the notebooks, `criteo-like` for scale."""
from __future__ import annotations

import math
from dataclasses import replace

from scratchkit.config import CacheParams, DataConfig, ModelConfig, TrainConfig

# Cardinalities of the 26 categorical features of Criteo Kaggle (Display Advertising Challenge),
# as the DLRM reference implementation counts them.
CRITEO_KAGGLE_CARDINALITIES = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27, 14992,
    5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572)


def _tiny() -> TrainConfig:
    # Trains in well under a second: small enough for property tests over many random cases.
    return TrainConfig(
        data=DataConfig(table_sizes=(500, 300, 200), pooling=2, batch_size=32, num_dense=4, zipf=1.0),
        model=ModelConfig(dim=8, bottom_mlp=(16, 8), top_mlp=(16, 1)),
        # (D+1)*B*L = 192 rows at D=2: every trainer fits at any locality; the last table is whole
        cache=CacheParams(capacity=200))


def _small() -> TrainConfig:
    # The notebooks' default: a few seconds for a few hundred steps on a laptop CPU, yet big enough
    # that embedding work dominates the step as it does in production.
    return TrainConfig(
        data=DataConfig(table_sizes=(20_000,) * 8, pooling=8, batch_size=256, num_dense=13, zipf=1.05),
        model=ModelConfig(dim=16, bottom_mlp=(64, 16), top_mlp=(64, 1)),
        # 41% of each table: (D+1)*B*L = 6144 rows at D=2, so ScratchPipe fits at any locality
        cache=CacheParams(capacity=8192))


def criteo_like(scale: float = 0.01) -> TrainConfig:
    """26 tables with Criteo Kaggle's cardinalities times `scale` (1.0 = the real sizes, ~34M rows)."""
    if not scale > 0:
        raise ValueError(f"criteo-like scale must be > 0, got {scale}")
    sizes = tuple(max(4, math.ceil(c * scale)) for c in CRITEO_KAGGLE_CARDINALITIES)
    return TrainConfig(
        data=DataConfig(table_sizes=sizes, pooling=1, batch_size=512, num_dense=13, zipf=1.1),
        model=ModelConfig(dim=16, bottom_mlp=(64, 16), top_mlp=(64, 1)),
        # (D+1)*B*L = 4096 rows covers D <= 7 at any locality; small tables are held whole
        cache=CacheParams(capacity=4096))


PROFILES = {"tiny": _tiny, "small": _small, "criteo-like": criteo_like}


def get_profile(name: str, **data_overrides) -> TrainConfig:
    """The named profile, with optional DataConfig fields overridden (e.g. zipf=0.5)."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
    config = PROFILES[name]()
    if data_overrides:
        config = config.replace(data=replace(config.data, **data_overrides))
    return config
