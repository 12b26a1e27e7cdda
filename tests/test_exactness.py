"""Every trainer must reproduce plain PyTorch (nn.EmbeddingBag + torch.optim) bit for bit on CPU."""

from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings, strategies as st

from scratchkit.config import DataConfig, ModelConfig, OptimizerConfig, OptimizerKind, TrainConfig
from scratchkit.embedding.optim import coalesce
from scratchkit.measure.reference import ReferenceRun
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.embedding.tables import init_embedding_weights
from scratchkit.trainers import make_trainer
from scratchkit.measure.verify import verify

FOUNDATION_TRAINERS = ["gpu-only", "hybrid"]


@pytest.mark.parametrize("kind", list(OptimizerKind))
def test_trainers_equal_reference_bitwise(tiny_config, kind):
    config = tiny_config.replace(optimizer=OptimizerConfig(kind=kind, lr=0.1))
    for result in verify(config, FOUNDATION_TRAINERS, steps=15):
        assert result.max_abs_diff == 0.0, result
        assert result.tolerance == 0.0


def test_training_moves_the_parameters(tiny_config):
    """Guards the test above: a run that changed nothing would also 'agree'."""
    with make_trainer("hybrid", tiny_config) as trainer:
        list(trainer.train(15))
        initial = init_embedding_weights(tiny_config.data.table_sizes, tiny_config.model.dim, tiny_config.seed)
        moved = [float((w - w0).abs().max()) for w, w0 in zip(trainer.embedding_weights(), initial)]
    assert all(m > 1e-5 for m in moved), moved


def test_coalesce_order_depends_on_the_index_array_so_we_coalesce_on_ids():
    """Coalescing the same grouping under other labels (slots) can change the last bits.

    This is the hazard the module note in scratchkit.embedding.optim describes; the caches and ScratchPipe
    therefore coalesce on table ids and map to slots afterwards (slots_of_unique).
    """
    generator = torch.Generator().manual_seed(0)
    grads = torch.randn(500, 8, generator=generator) * 1e3
    ids = torch.randint(0, 20, (500,), generator=generator)
    relabel = torch.randperm(20, generator=generator)  # a bijection id -> slot
    slots = relabel[ids]
    rows, by_id = coalesce(ids, grads, 20)
    slot_rows, by_slot = coalesce(slots, grads, 20)
    by_slot_in_id_order = by_slot[torch.searchsorted(slot_rows, relabel[rows])]
    assert torch.allclose(by_id, by_slot_in_id_order, rtol=1e-5, atol=1e-2)
    assert not torch.equal(by_id, by_slot_in_id_order)
    from scratchkit.embedding.optim import slots_of_unique

    assert torch.equal(slots_of_unique(rows, ids, slots), relabel[rows])


def test_verify_detects_another_reduction_order(tiny_config, monkeypatch):
    """Accumulating with index_add_ (another order) must show up as a non-zero difference."""
    import scratchkit.embedding.optim as optim

    def coalesce_by_index_add(index, grads, num_rows):
        rows = torch.unique(index)
        return rows, torch.zeros(num_rows, grads.shape[1]).index_add_(0, index, grads)[rows]

    monkeypatch.setattr(optim, "coalesce", coalesce_by_index_add)
    monkeypatch.setenv("SCRATCHKIT_NATIVE", "0")  # the per-table twins, which call coalesce
    config = tiny_config.replace(data=replace(tiny_config.data, pooling=8, zipf=1.5))
    (result,) = verify(config, ["hybrid"], steps=15)
    assert result.embedding_max_abs_diff > 0 and not result.passed


def test_verify_detects_the_table_batched_loop_adding_in_another_order(tiny_config, monkeypatch):
    """The C++ backward (scratchkit/embedding/table_batched.py, fused with SGD in fused_sgd.py)
    given a stable sort's permutation instead of the order torch's coalesce adds in: verify must
    see it (so its 0.0 is not luck)."""
    from scratchkit.embedding import table_batched, tbe_native

    if not table_batched.native_available():
        pytest.skip("no C++ compiler here")
    sort = torch.sort
    monkeypatch.setattr(tbe_native, "sorts_like_torch", lambda: False)  # take the permutation below
    monkeypatch.setattr(torch, "sort", lambda ids: sort(ids, stable=True))  # coalesce sorts in C++, untouched
    config = tiny_config.replace(data=replace(tiny_config.data, pooling=8, zipf=1.5))
    (result,) = verify(config, ["gpu-only"], steps=15)
    assert result.embedding_max_abs_diff > 0 and not result.passed


def test_verify_reports_a_real_difference(tiny_config):
    """A trainer whose optimizer differs (another lr) must be reported as different."""
    source = SyntheticSource(tiny_config.data)
    other = tiny_config.replace(optimizer=OptimizerConfig(lr=0.0500001))
    reference = ReferenceRun(tiny_config, source)
    reference.train(5)
    with make_trainer("gpu-only", other, source=source) as trainer:
        list(trainer.train(5))
    diff = max(float((a - b).abs().max()) for a, b in zip(reference.embedding_weights(), trainer.embedding_weights()))
    assert diff > 0


@settings(max_examples=12, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 60), min_size=1, max_size=4),
    pooling=st.integers(1, 5),
    batch=st.integers(1, 12),
    zipf=st.floats(0, 2),
    kind=st.sampled_from(list(OptimizerKind)),
    seed=st.integers(0, 1000),
)
def test_property_any_config_is_bit_exact(sizes, pooling, batch, zipf, kind, seed):
    config = TrainConfig(
        data=DataConfig(table_sizes=tuple(sizes), pooling=pooling, batch_size=batch, num_dense=2, zipf=zipf, seed=seed),
        model=ModelConfig(dim=4, bottom_mlp=(4,), top_mlp=(1,)),
        optimizer=OptimizerConfig(kind=kind, lr=0.2),
        seed=seed,
    )
    for result in verify(config, FOUNDATION_TRAINERS, steps=4):
        assert result.max_abs_diff == 0.0, result


def test_out_of_range_ids_are_refused_before_training(tiny_config):
    class BadSource(SyntheticSource):
        def batch(self, index):
            b = super().batch(index)
            ids = list(b.ids)
            ids[1] = ids[1].copy()
            ids[1][3] = 10_000
            return replace(b, ids=tuple(ids))

    for name in FOUNDATION_TRAINERS:
        with make_trainer(name, tiny_config, source=BadSource(tiny_config.data)) as trainer:
            with pytest.raises(ValueError, match=r"table 1: id 10000 at position 3 is out of range \[0, 300\)"):
                next(iter(trainer.train(1)))


def test_source_with_other_table_sizes_is_refused(tiny_config):
    source = SyntheticSource(DataConfig(table_sizes=(5, 5)))
    with pytest.raises(ValueError, match="table sizes"):
        make_trainer("hybrid", tiny_config, source=source)
    with pytest.raises(ValueError, match="unknown trainer 'fast'"):
        make_trainer("fast", tiny_config)


def test_the_reference_runs_on_the_trainers_thread_count():
    """The dense matmuls of a 512-sample batch split their sums by thread: a reference trained on
    torch's default threads and a trainer on `cpu_threads` = 1 differ in the last bits (found on
    embedding-bound: 7e-9). The reference must use the config's thread count, as trainers do."""
    from scratchkit.profiles import get_profile

    config = get_profile("embedding-bound", scale=0.001)
    config = config.replace(data=replace(config.data, batch_size=512))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # what a 2-core machine starts with
    try:
        (result,) = verify(config, ["gpu-only"], 1)
    finally:
        torch.set_num_threads(threads)
    assert result.max_abs_diff == 0.0


def test_the_by_id_summation_order_is_verified_against_its_stated_tolerance(tiny_config):
    """`summation_order="by-id"` (the C++ backward sums each id's gradients in lookup order, not
    torch's): not bit-exact, so verify states BY_ID_TOLERANCE and holds every trainer to it; the
    difference is real (not 0) and small. Offered with SGD only (Adagrad turns rounding into steps)."""
    from scratchkit.measure.verify import BY_ID_TOLERANCE

    config = tiny_config.replace(summation_order="by-id")
    results = list(verify(config, ["gpu-only", "hybrid", "lru", "scratchpipe", "scratchpipe-device"], steps=30))
    assert all(r.tolerance == BY_ID_TOLERANCE and r.passed for r in results), results
    assert max(r.max_abs_diff for r in results) > 0.0
    with pytest.raises(ValueError, match="by-id' is offered with SGD only, not adagrad"):
        tiny_config.replace(summation_order="by-id", optimizer=OptimizerConfig(kind=OptimizerKind.ADAGRAD))


def test_the_command_line_says_why_a_by_id_run_is_not_held_to_zero(capsys):
    from scratchkit.commands.cli import main

    assert (
        main(["verify", "--profile", "tiny", "--trainers", "gpu-only", "--steps", "5", "--summation-order", "by-id"])
        == 0
    )
    out = capsys.readouterr().out
    assert "(tolerance 1e-05): OK" in out and "lookup order, not in torch's" in out
    assert "must be exactly 0.0" not in out
