"""The C++ backward with tables cut into runs (table_batched.cpp: more threads than tables): each
long table's radix sort and sums spread over the threads, and still bit for bit plain PyTorch's
coalesce (the torch twin) at every thread count; BY_ID still each id's lookup-order sum."""

import pytest
import torch

from scratchkit.config import DataConfig, ModelConfig, SummationOrder, TrainConfig
from scratchkit.device import Device
from scratchkit.embedding import table_batched as tb, tbe_native
from scratchkit.measure.verify import verify
from scratchkit.trainers import make_trainer

from stand_ins import StandInCuda
from test_table_batched import assert_same, by_id_in_lookup_order

pytestmark = pytest.mark.skipif(not tb.native_available(), reason="no C++ compiler here")
LONG = tbe_native.RADIX_MIN  # torch sorts this many lookups and more stably: by id, then lookup


@pytest.fixture(autouse=True)
def restore_host_threads():
    yield
    tbe_native.set_host_threads(None)


def long_tables(seed: int, lengths, rows, batch: int = 512, dim: int = 16):
    """Tables of `lengths` lookups of Zipf-like ids (hot ids repeated thousands of times, so some
    runs hold one id only), bags of every size (empty ones too), and the pooled grads."""
    g = torch.Generator().manual_seed(seed)
    ids, offsets = [], []
    for n, r in zip(lengths, rows):
        weights = torch.arange(1, min(r, 50_000) + 1, dtype=torch.float64) ** -1.1
        ranks = torch.multinomial(weights, n, replacement=True, generator=g)
        ids.append(ranks * (r // min(r, 50_000)))  # spread over the table: large ids, 3 radix passes
        cuts = torch.sort(torch.randint(0, n + 1, (batch,), generator=g)).values
        cuts[0] = 0
        offsets.append(cuts)
    return ids, offsets, torch.randn(batch, len(lengths), dim, generator=g)


@pytest.mark.parametrize("threads", [1, 2, 5, 7, 16])
def test_cut_tables_sum_as_torch_at_every_thread_count(threads):
    lengths, rows = [LONG + 1, 3 * LONG + 7, 500, 2 * LONG], [40, 2**32, 300, 100_000]
    ids, offsets, grad = long_tables(threads, lengths, rows)
    tbe_native.set_host_threads(threads)
    fast = tb.embedding_backward_tables(ids, offsets, grad, rows)
    assert_same(fast, tb.embedding_backward_tables_twin(ids, offsets, grad, rows))
    again = tb.embedding_backward_tables(ids, offsets, grad, rows, workspace=tb.BackwardWorkspace())
    assert_same(again, tb.embedding_backward_tables_twin(ids, offsets, grad, rows))


@pytest.mark.parametrize("threads", [2, 5])
def test_cut_tables_give_each_ids_address_and_read_a_strided_grad(threads):
    lengths, rows = [2 * LONG, LONG + 3], [5000, 70]
    ids, offsets, _ = long_tables(7, lengths, rows)
    grad = torch.randn(512, 4, 16, generator=torch.Generator().manual_seed(1))[:, 1:3]
    slots = [torch.randperm(r, generator=torch.Generator().manual_seed(r))[i] for i, r in zip(ids, rows)]
    tbe_native.set_host_threads(threads)
    fast = tb.embedding_backward_tables(ids, offsets, grad, rows, addresses=slots)
    assert_same(fast, tb.embedding_backward_tables_twin(ids, offsets, grad, rows, slots))


@pytest.mark.parametrize("threads", [1, 3, 8])
def test_by_id_cuts_shorter_tables_and_sums_in_lookup_order(threads):
    lengths, rows = [20_000, 9000, 40], [3000, 2**31, 10]
    ids, offsets, grad = long_tables(threads + 20, lengths, rows, batch=300, dim=5)
    tbe_native.set_host_threads(threads)
    fast = tb.embedding_backward_tables(ids, offsets, grad, rows, order=SummationOrder.BY_ID)
    for (index, grad_sum), (want_index, want_sum) in zip(fast, by_id_in_lookup_order(ids, offsets, grad, rows)):
        assert torch.equal(index, want_index) and torch.equal(grad_sum, want_sum)


def test_long_tables_are_sorted_in_the_loop_not_by_torch(monkeypatch):
    """Where this torch sorts long arrays stably, the loop's own radix sort gives its order: no
    torch.sort a table on the step's path (one took as long as the C++ sums of its table)."""
    ids, offsets, grad = long_tables(3, [LONG, 2 * LONG], [1000, 1000])
    expected = tb.embedding_backward_tables_twin(ids, offsets, grad, [1000, 1000])
    sorts = []
    real = torch.sort
    monkeypatch.setattr(torch, "sort", lambda *a, **k: (sorts.append(1), real(*a, **k))[1])
    tbe_native.set_host_threads(4)
    assert_same(tb.embedding_backward_tables(ids, offsets, grad, [1000, 1000]), expected)
    assert sorts == []


@pytest.mark.parametrize("threads", [1, 4])
def test_bad_input_in_a_cut_table_names_it(threads):
    lengths, rows = [LONG + 5, 2 * LONG], [100, 100]
    ids, offsets, grad = long_tables(9, lengths, rows)
    tbe_native.set_host_threads(threads)
    negative = [ids[0], ids[1].clone()]
    negative[1][LONG + 11] = -1  # in a later run of the table
    with pytest.raises(ValueError, match=r"ids\[1\] holds an id outside"):
        tb.embedding_backward_tables(negative, offsets, grad, rows)
    disordered = [offsets[0], offsets[1].clone()]
    disordered[1][400] = disordered[1][399] - 1  # a bag that ends before it starts, late in the table
    with pytest.raises(ValueError, match=r"offsets\[1\] is not a list of bag starts"):
        tb.embedding_backward_tables(ids, disordered, grad, rows)


def one_long_table(threads: int) -> TrainConfig:
    """One table of 36,864 lookups a batch (past RADIX_MIN): on 2 threads and more, cut into runs."""
    return TrainConfig(
        data=DataConfig(table_sizes=(5000,), batch_size=4096, pooling=9, num_batches=20),
        model=ModelConfig(dim=8, bottom_mlp=(16, 8), top_mlp=(16, 1)),
        threads=threads,
    )


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_hybrid_and_gpu_only_are_plain_pytorch_with_the_table_cut(threads):
    for r in verify(one_long_table(threads), ["hybrid", "gpu-only"], steps=3):
        assert r.max_abs_diff == 0.0 and r.tolerance == 0.0, r


def test_hybrid_on_a_gpu_runs_every_host_stage_in_the_loops(monkeypatch):
    """Through its CUDA lines (tests/stand_ins.py: pinned tables, the pooled gradients copied back
    from the device), hybrid's host stages are the three C++ calls and no torch.sort a table."""
    real = tbe_native.LOOPS.library
    called, sorts = [], []

    class Spy:
        def __getattr__(self, name):
            function = getattr(real, name)
            return lambda *args: (called.append(name), function(*args))[1]

    with make_trainer("hybrid", one_long_table(4), device=Device("cpu", StandInCuda())) as hybrid:
        list(hybrid.train(1))
        monkeypatch.setitem(tbe_native.LOOPS.__dict__, "library", Spy())
        real_sort = torch.sort
        monkeypatch.setattr(torch, "sort", lambda *a, **k: (sorts.append(1), real_sort(*a, **k))[1])
        hybrid.train_step()
    assert [c for c in called if c != "sk_tbe_runs_per_table"] == ["sk_tbe_forward", "sk_tbe_backward", "sk_tbe_sgd"]
    assert sorts == []


def test_the_cost_model_cuts_tables_as_the_loops_do():
    """designs/host_threads.py prices the loops' pieces by a Python copy of their rule and
    constants (the cost model runs without the loops): both held to the C++ ones here."""
    import re
    from pathlib import Path

    from scratchkit.designs import host_threads as model

    for threads, tables, size, least in [
        (1, 8, 10**5, 64),
        (8, 8, 10**5, 64),
        (14, 8, 81_920, 8192),
        (14, 8, 2048, 64),
    ]:
        for t in (threads, threads + 1, 3 * threads):
            assert model.runs_per_table(t, tables, size, least) == tbe_native.LOOPS.library.sk_tbe_runs_per_table(
                t, tables, size, least
            )
    folder = Path(tb.__file__).parent
    source = (folder / "table_batched.cpp").read_text() + (folder / "thread_pool.h").read_text()
    for name in ("RUNS_A_THREAD", "MIN_BAGS", "MIN_ROWS", "MIN_LOOKUPS"):
        (value,) = re.findall(rf"constexpr int64_t {name} = (\d+);", source)
        assert int(value) == getattr(model, name), name
    assert model.SORTED_STABLY_FROM == tbe_native.RADIX_MIN
