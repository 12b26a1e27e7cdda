import pytest

from scratchkit.config import CacheParams, DataConfig, ModelConfig, OptimizerConfig, OptimizerKind
from scratchkit.profiles import criteo_like, get_profile, CRITEO_KAGGLE_CARDINALITIES


@pytest.mark.parametrize("kwargs, message", [
    (dict(table_sizes=(10, 0)), "table 1: size must be positive"),
    (dict(table_sizes=(10, -5)), "table 1: size must be positive"),
    (dict(table_sizes=()), "at least one embedding table"),
    (dict(batch_size=0), "batch_size must be positive"),
    (dict(pooling=-1), "pooling must be positive"),
    (dict(zipf=-0.1), "zipf exponent must be >= 0"),
])
def test_bad_data_config_says_what(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataConfig(**kwargs)


def test_bad_model_cache_and_optimizer_configs():
    with pytest.raises(ValueError, match="must end in the embedding dim 8"):
        ModelConfig(dim=8, bottom_mlp=(16, 4))
    with pytest.raises(ValueError, match="capacity must be positive"):
        CacheParams(capacity=0)
    with pytest.raises(ValueError, match="not both"):
        CacheParams(capacity=10, load_factor=0.5)
    with pytest.raises(ValueError, match="depth must be >= 1"):
        CacheParams(depth=0)
    with pytest.raises(ValueError, match="learning rate must be > 0"):
        OptimizerConfig(lr=0)
    with pytest.raises(ValueError, match="unknown optimizer 'adam'; choose one of sgd, adagrad"):
        OptimizerKind.parse("adam")
    assert OptimizerKind.parse("rowwise-adagrad") is OptimizerKind.ROWWISE_ADAGRAD


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown profile 'huge'; choose one of tiny, small, criteo-like"):
        get_profile("huge")


def test_capacity_from_load_factor_and_cap():
    assert CacheParams(load_factor=0.25).capacity_for(1000) == 250
    assert CacheParams(capacity=5000).capacity_for(1000) == 1000
    assert CacheParams().capacity_for(1000) == 100


def test_criteo_like_scales_the_real_cardinalities():
    full = criteo_like(1.0).data.table_sizes
    assert full == tuple(max(4, c) for c in CRITEO_KAGGLE_CARDINALITIES)
    small = criteo_like(0.001).data.table_sizes
    assert len(small) == 26 and max(small) == 10132 and min(small) == 4
    with pytest.raises(ValueError, match="scale must be > 0"):
        criteo_like(0)
