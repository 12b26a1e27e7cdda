import pytest

from scratchkit.config import CacheParams, DataConfig, ModelConfig, OptimizerConfig, OptimizerKind
from scratchkit.profiles import criteo_like, get_profile, CRITEO_KAGGLE_CARDINALITIES


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(table_sizes=(10, 0)), "table 1: size must be positive"),
        (dict(table_sizes=(10, -5)), "table 1: size must be positive"),
        (dict(table_sizes=()), "at least one embedding table"),
        (dict(batch_size=0), "batch_size must be positive"),
        (dict(pooling=-1), "pooling must be positive"),
        (dict(zipf=-0.1), "zipf exponent must be >= 0"),
    ],
)
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


def test_the_embedding_bound_profiles_keep_their_work_per_step_when_scaled():
    """Scaled down, a profile keeps batch, pooling and dim, and its ids come from the full-size
    Zipf law folded into the smaller tables: the working sets stay close to full size."""
    import numpy as np

    from scratchkit.data.synthetic import SyntheticSource

    full, scaled = get_profile("embedding-bound"), get_profile("embedding-bound", scale=0.25)
    assert scaled.data.table_sizes == (250_000,) * 8 and full.data.table_sizes == (1_000_000,) * 8
    for a, b in ((full.data, scaled.data), (full.model, scaled.model)):
        assert {k: v for k, v in vars(a).items() if k != "table_sizes"} == {
            k: v for k, v in vars(b).items() if k != "table_sizes"
        }
    sizes = [len(np.unique(SyntheticSource(c.data).batch(0).ids[0])) for c in (full, scaled)]
    assert 0.85 < sizes[1] / sizes[0] <= 1.0
    with pytest.raises(ValueError, match="profile 'small' has no scale"):
        get_profile("small", scale=0.5)
    assert get_profile("criteo-skew", scale=1.0).data.table_sizes == CRITEO_KAGGLE_CARDINALITIES


def test_a_law_of_millions_of_ranks_samples_its_head_exactly():
    """Above EXACT_RANKS the sampler keeps the head's CDF and draws the tail from the continuous law:
    the head's share of draws is the exact law's."""
    import numpy as np

    from scratchkit.data.synthetic import ZipfSampler, zipf_cdf

    sampler = ZipfSampler(3_000_000, 0.9)
    exact_head = zipf_cdf(3_000_000, 0.9)[ZipfSampler.EXACT_RANKS - 1]
    assert abs(sampler.p_head - exact_head) < 1e-6
    ranks = sampler.ranks(np.random.default_rng(0).random(400_000))
    assert ranks.min() >= 0 and ranks.max() < 3_000_000
    assert abs((ranks < ZipfSampler.EXACT_RANKS).mean() - exact_head) < 0.005
    # the tail follows the law: ranks in [2^20, 2^21) against [2^21, 3M), as the exact CDF says
    cdf = zipf_cdf(3_000_000, 0.9)
    expected = (cdf[(1 << 21) - 1] - cdf[(1 << 20) - 1]) / (1 - cdf[(1 << 20) - 1])
    tail = ranks[ranks >= ZipfSampler.EXACT_RANKS]
    assert abs((tail < 1 << 21).mean() - expected) < 0.01
