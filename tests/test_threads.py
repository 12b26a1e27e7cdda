"""`TrainConfig.threads` (`--threads N`): the host's embedding loops on N threads, every trainer
still bit for bit plain PyTorch (nn.EmbeddingBag + torch.optim, measure/reference.py) at each N."""

import pytest

from scratchkit.config import CacheParams, DataConfig, TrainConfig, default_threads
from scratchkit.embedding import table_batched as tb, tbe_native
from scratchkit.measure.verify import verify
from scratchkit.designs import DESIGNS
from scratchkit.trainers import make_trainer

EVERY_TRAINER = list(DESIGNS)


@pytest.fixture(autouse=True)
def restore_host_threads():
    yield
    tbe_native.set_host_threads(None)


def few_tables_many_bags(threads: int | None) -> TrainConfig:
    """2 tables of 256-sample batches: at 4 threads the forward cuts each table's bags in two."""
    return TrainConfig(
        data=DataConfig(table_sizes=(3000, 5000), batch_size=256, pooling=3, num_batches=50),
        cache=CacheParams(capacity=2500),
        threads=threads,
    )


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_every_trainer_is_plain_pytorch_at_every_thread_count(threads):
    config = few_tables_many_bags(threads)
    results = list(verify(config, EVERY_TRAINER, steps=6))
    assert [r.trainer for r in results] == EVERY_TRAINER
    for r in results:
        assert r.extras["threads"] == threads, r
        assert r.max_abs_diff == 0.0 and r.tolerance == 0.0, r


def test_verify_would_see_a_wrong_sum(monkeypatch):
    """The check above can fail: a forward that drops one row of one bag is caught against PyTorch."""
    real = tb.pooled_lookup_tables

    def off_by_a_row(weights, indices, offsets):
        pooled = real(weights, indices, offsets)
        pooled[0, 0] -= weights[0][indices[0][0]]
        return pooled

    monkeypatch.setattr("scratchkit.trainers.hybrid.pooled_lookup_tables", off_by_a_row)
    (result,) = verify(few_tables_many_bags(4), ["hybrid"], steps=3)
    assert result.max_abs_diff > 0.0 and not result.passed


def test_the_default_is_every_core_less_the_loaders_and_scratchpipes_host_stages():
    config = few_tables_many_bags(None)
    with make_trainer("hybrid", config) as hybrid:  # a core for the batch loader's thread
        assert hybrid.host_threads == max(1, default_threads() - 1)
        assert tbe_native.host_threads() == hybrid.host_threads
    with make_trainer("hybrid", config.replace(batches_ahead=0)) as on_the_path:
        assert on_the_path.host_threads == default_threads()
    with make_trainer("scratchpipe", config) as scratchpipe:
        assert scratchpipe.host_threads == max(1, default_threads() - 2)
    with make_trainer("hybrid", config.replace(threads=3)) as three:
        assert three.host_threads == 3


def test_each_step_runs_on_its_own_trainers_threads():
    """Thread counts are process-wide; trainers stepping in turn (bench's rounds) each set theirs."""
    config = few_tables_many_bags(3)
    with make_trainer("hybrid", config) as hybrid, make_trainer("gpu-only", config.replace(threads=1)) as other:
        list(other.train(1))
        seen = []
        real = tb.pooled_lookup_tables
        hybrid_module = __import__("scratchkit.trainers.hybrid", fromlist=["x"])
        hybrid_module.pooled_lookup_tables = lambda *a: (seen.append(tbe_native.host_threads()), real(*a))[1]
        try:
            list(hybrid.train(1))
        finally:
            hybrid_module.pooled_lookup_tables = real
        assert seen == [3]


@pytest.mark.parametrize("bad", [0, -2, True, 1.5])
def test_a_thread_count_is_a_positive_integer(bad):
    with pytest.raises(ValueError, match="threads must be an integer >= 1 or None"):
        TrainConfig(threads=bad)


def test_the_command_line_takes_threads(capsys):
    from scratchkit.commands.cli import main

    assert main(["verify", "--profile", "tiny", "--trainers", "hybrid", "--steps", "3", "--threads", "2"]) == 0
    assert "2 host threads (tolerance 0): OK" in capsys.readouterr().out
    assert main(["verify", "--profile", "tiny", "--trainers", "hybrid", "--steps", "3", "--threads", "0"]) != 0
    assert "--threads must be >= 1, got 0" in capsys.readouterr().err
