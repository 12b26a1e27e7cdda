"""The fused backward + SGD update (fused_sgd.sort_lookups + fused_sgd_update, gpu-only's path
with SGD on the CPU) against the unfused C++ backward then update, and against plain PyTorch
(nn.EmbeddingBag(sparse=True), its gradient coalesced, + torch.optim.SGD): bit for bit, over random tables, bags,
duplicates and widths (the AVX2 build's and the generic loop's), on one thread and two, with
tables past RADIX_MIN lookups; bad input refused before any row changes."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from torch import nn

from scratchkit.config import OptimizerConfig, OptimizerKind, SummationOrder
from scratchkit.embedding import fused_sgd, table_batched as tb, tbe_native

from test_table_batched import make_tables, threads  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(not tb.native_available(), reason="no C++ compiler here")
LR = 0.37


def unfused(weights, ids, offsets, grad, rows, order):
    out = [w.clone() for w in weights]
    coalesced = tb.embedding_backward_tables(ids, offsets, grad, rows, order=order)
    tb.apply_updates(out, [None] * len(out), coalesced, OptimizerConfig(OptimizerKind.SGD, lr=LR))
    return out


def fused(weights, ids, offsets, grad, rows, order, workspace=None):
    out = [w.clone() for w in weights]
    assert fused_sgd.fused_sgd_fits(out, OptimizerConfig(OptimizerKind.SGD, lr=LR))
    fused_sgd.fused_sgd_update(out, fused_sgd.sort_lookups(ids, offsets, rows, workspace, order), grad, LR)
    return out


def plain_pytorch(weights, ids, offsets, grad):
    """Each table an nn.EmbeddingBag(sum, sparse) trained one SGD step by torch.optim.SGD, its
    sparse gradient coalesced first (as scratchkit.measure.reference does: duplicates summed once)."""
    out = []
    for t, (w, i, o) in enumerate(zip(weights, ids, offsets)):
        bag = nn.EmbeddingBag(*w.shape, mode="sum", sparse=True)
        with torch.no_grad():
            bag.weight.copy_(w)
        bag.weight.register_hook(lambda g: g.coalesce())
        bag(i, o).backward(grad[:, t])
        torch.optim.SGD(bag.parameters(), lr=LR).step()
        out.append(bag.weight.detach())
    return out


def assert_equal(a, b):
    assert all(torch.equal(x, y) for x, y in zip(a, b))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10**6),
    num_tables=st.integers(1, 5),
    max_rows=st.integers(1, 80),
    dim=st.sampled_from([1, 3, 4, 8, 13, 16, 24, 32, 64, 128]),
    max_bag=st.integers(0, 7),
    batch=st.integers(1, 40),
    order=st.sampled_from(list(SummationOrder)),
)
def test_fused_equals_backward_then_update(threads, seed, num_tables, max_rows, dim, max_bag, batch, order):
    rows, weights, ids, offsets = make_tables(seed, num_tables, max_rows, dim, max_bag, batch)
    grad = torch.randn(batch, num_tables, dim, generator=torch.Generator().manual_seed(seed))
    mine = fused(weights, ids, offsets, grad, rows, order)
    assert_equal(mine, unfused(weights, ids, offsets, grad, rows, order))
    assert not all(torch.equal(a, b) for a, b in zip(mine, weights)) or sum(map(len, ids)) == 0
    if order is SummationOrder.TORCH:
        assert_equal(mine, plain_pytorch(weights, ids, offsets, grad))


@pytest.mark.parametrize("order", list(SummationOrder))
def test_long_tables_sort_in_the_loop_as_torch_does(threads, order):
    """Past RADIX_MIN lookups torch.sort is stable: the loop's radix sort gives its permutation,
    and a grad that is a strided view of a larger tensor is read in place."""
    g = torch.Generator().manual_seed(4)
    rows, batch, dim = [300, 70_000, 9], 1024, 64
    lengths = [tbe_native.RADIX_MIN + 17, 3 * tbe_native.RADIX_MIN, 100]
    ids = [torch.randint(0, r, (n,), generator=g) for r, n in zip(rows, lengths)]
    offsets = [torch.sort(torch.randint(0, n + 1, (batch,), generator=g)).values for n in lengths]
    for o in offsets:
        o[0] = 0
    weights = [torch.randn(r, dim, generator=g) for r in rows]
    grad = torch.randn(batch, 5, dim, generator=g)[:, 1:4]  # strides (5 dim, dim, 1)
    workspace = tb.BackwardWorkspace()
    mine = fused(weights, ids, offsets, grad, rows, order, workspace)
    assert_equal(mine, unfused(weights, ids, offsets, grad, rows, order))
    if order is SummationOrder.TORCH:
        assert_equal(mine, plain_pytorch(weights, ids, offsets, grad))
    assert_equal(fused(weights, ids, offsets, grad, rows, order, workspace), mine)  # the buffer reused


def test_a_torch_sort_of_another_order_is_taken_as_is(monkeypatch):
    """Where the first-use checks found torch sorting otherwise, its own permutation is packed."""
    rows, weights, ids, offsets = make_tables(8, 3, 40, 16, 6, 30)
    grad = torch.randn(30, 3, 16)
    expected = unfused(weights, ids, offsets, grad, rows, SummationOrder.TORCH)
    monkeypatch.setattr(tbe_native, "sorts_like_torch", lambda: False)
    monkeypatch.setattr(tbe_native, "sorts_stably_like_torch", lambda: False)
    assert_equal(fused(weights, ids, offsets, grad, rows, SummationOrder.TORCH), expected)


def test_bad_input_is_refused_before_any_row_changes():
    rows, weights, ids, offsets = make_tables(9, 2, 20, 4, 3, 6)
    bad = [ids[0], ids[1].clone()]
    bad[1][0] = rows[1]  # one past the last row
    with pytest.raises(ValueError, match=r"ids\[1\] holds an id outside its table"):
        fused_sgd.sort_lookups(bad, offsets, rows)
    with pytest.raises(ValueError, match=r"offsets\[1\] is not a list of bag starts"):
        fused_sgd.sort_lookups(ids, [offsets[0], offsets[1] + 1], rows)
    lookups = fused_sgd.sort_lookups(ids, offsets, rows)
    before = [w.clone() for w in weights]
    with pytest.raises(ValueError, match=r"weights of \[\d+, 1\] rows, sorted for tables of"):
        fused_sgd.fused_sgd_update([weights[0], weights[1][:1]], lookups, torch.randn(6, 2, 4), LR)
    with pytest.raises(ValueError, match=r"grad has shape \(6, 3, 4\)"):
        fused_sgd.fused_sgd_update(weights, lookups, torch.randn(6, 3, 4), LR)
    assert_equal(weights, before)


def test_fused_fits_sgd_on_cpu_tables_only():
    rows, weights, ids, offsets = make_tables(1, 2, 20, 4, 3, 6)
    assert fused_sgd.fused_sgd_fits(weights, OptimizerConfig(OptimizerKind.SGD))
    assert not fused_sgd.fused_sgd_fits(weights, OptimizerConfig(OptimizerKind.ADAGRAD))
    assert not fused_sgd.fused_sgd_fits([w.double() for w in weights], OptimizerConfig(OptimizerKind.SGD))
    assert not fused_sgd.fused_sgd_fits([w.t() for w in weights], OptimizerConfig(OptimizerKind.SGD))
