"""The table-batched C++ loops (scratchkit/embedding/table_batched.cpp) against their torch twins,
the per-table ops of scratchkit/embedding/optim.py that plain PyTorch's `embedding_bag` + sparse
`coalesce` + `add_` define: bit for bit, over random tables, bags, duplicates and widths, on one
thread and on two; and their sort against torch.sort itself, adversarial inputs included."""

import ctypes
import multiprocessing
import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from scratchkit.config import OptimizerConfig, OptimizerKind, SummationOrder
from scratchkit.embedding import table_batched as tb, tbe_native
from scratchkit.native import CLibrary

pytestmark = pytest.mark.skipif(not tb.native_available(), reason="no C++ compiler here")


def make_tables(seed, num_tables, max_rows, dim, max_bag, batch):
    """Random weights, ids (many repeats) and offsets (empty bags too) of `num_tables` tables."""
    g = torch.Generator().manual_seed(seed)
    rows = [int(torch.randint(1, max_rows + 1, (), generator=g)) for _ in range(num_tables)]
    weights = [torch.randn(n, dim, generator=g) for n in rows]
    ids, offsets = [], []
    for n in rows:
        sizes = torch.randint(0, max_bag + 1, (batch,), generator=g)
        hot = torch.randint(0, n, (3,), generator=g)  # a few hot ids: groups of 3 and more
        draw = torch.randint(0, n, (int(sizes.sum()),), generator=g)
        pick = torch.rand(len(draw), generator=g) < 0.4
        ids.append(torch.where(pick, hot[torch.randint(0, 3, draw.shape, generator=g)], draw))
        offsets.append(torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)[:-1]]))
    return rows, weights, ids, offsets


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def assert_same(coalesced, twin):
    assert coalesced.flat is not None  # the C++ loop ran
    assert len(coalesced) == len(twin)
    for (index, grad_sum), (twin_index, twin_sum) in zip(coalesced, twin):
        assert torch.equal(index, twin_index)
        assert torch.equal(grad_sum, twin_sum)


tables = dict(
    seed=st.integers(0, 10**6),
    num_tables=st.integers(1, 5),
    max_rows=st.integers(1, 80),
    dim=st.sampled_from([1, 3, 4, 8, 13, 16, 32, 64]),
    max_bag=st.integers(0, 7),
    batch=st.integers(1, 40),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**tables)
def test_forward_backward_and_sgd_equal_the_torch_ops(threads, seed, num_tables, max_rows, dim, max_bag, batch):
    rows, weights, ids, offsets = make_tables(seed, num_tables, max_rows, dim, max_bag, batch)
    pooled = tb.pooled_lookup_tables(weights, ids, offsets)
    assert torch.equal(pooled, tb.pooled_lookup_tables_twin(weights, ids, offsets))
    grad = torch.randn(batch, num_tables, dim, generator=torch.Generator().manual_seed(seed))
    coalesced = tb.embedding_backward_tables(ids, offsets, grad, rows)
    twin = tb.embedding_backward_tables_twin(ids, offsets, grad, rows)
    assert_same(coalesced, twin)
    sgd = OptimizerConfig(OptimizerKind.SGD, lr=0.37)
    fast, slow = [w.clone() for w in weights], [w.clone() for w in weights]
    tb.apply_updates(fast, [None] * num_tables, coalesced, sgd)
    tb.apply_updates_twin(slow, [None] * num_tables, twin, sgd)
    for a, b in zip(fast, slow):
        assert torch.equal(a, b)


@pytest.fixture(params=[4, 8], ids=["4-float-vectors", "8-float-vectors"])
def vector_floats(request):
    """The forward's vector width (8: AVX2's, on an x86-64 CPU that has it), set for the test."""
    set_width = tbe_native.LOOPS.library.sk_tbe_vector_floats
    if set_width(request.param) != request.param:
        set_width(0)
        pytest.skip(f"this CPU has no {request.param}-float vectors")
    yield request.param
    set_width(0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10**6),
    num_tables=st.integers(1, 4),
    max_rows=st.integers(1, 300),
    dim=st.sampled_from([1, 3, 16, 24, 32, 64, 128, 200]),
    max_bag=st.integers(0, 60),
    batch=st.integers(1, 30),
)
def test_the_forward_is_torchs_to_the_bit_at_every_vector_width(
    vector_floats, seed, num_tables, max_rows, dim, max_bag, batch
):
    """The forward sums a bag in registers, 64 floats of it a pass, 4 or 8 floats a vector (dims
    16-128; others in memory): each element's adds are still torch's, in its order. Bags longer
    than the prefetch distance, rows of several blocks (128) and a width known only at run time
    (24, 200) each take their own path."""
    rows, weights, ids, offsets = make_tables(seed, num_tables, max_rows, dim, max_bag, batch)
    weights[0][0] = -0.0  # a bag of -0.0 alone sums to +0.0
    pooled = tb.pooled_lookup_tables(weights, ids, offsets)
    twin = tb.pooled_lookup_tables_twin(weights, ids, offsets)
    assert torch.equal(pooled.view(torch.int32), twin.view(torch.int32))


@settings(max_examples=30, deadline=None)
@given(**tables)
def test_addresses_name_each_ids_slot(seed, num_tables, max_rows, dim, max_bag, batch):
    """A cache's lookups: coalesced on the ids, each id's sum addressed by its slot."""
    rows, weights, ids, offsets = make_tables(seed, num_tables, max_rows, dim, max_bag, batch)
    g = torch.Generator().manual_seed(seed + 1)
    slot_of = [torch.randperm(3 * n, generator=g)[:n] for n in rows]  # a slot per id
    slots = [s[i] for s, i in zip(slot_of, ids)]
    grad = torch.randn(batch, num_tables, dim, generator=g)
    assert_same(
        tb.embedding_backward_tables(ids, offsets, grad, rows, addresses=slots),
        tb.embedding_backward_tables_twin(ids, offsets, grad, rows, addresses=slots),
    )


def adversarial_ids():
    """Arrays that stress introsort's choices: sorted, reversed, organ pipes, few distinct ids,
    lengths either side of its thresholds, and McIlroy's "killer adversary" input, which drives
    libstdc++'s std::sort to its depth limit and so into its heapsort fallback."""
    g = torch.Generator().manual_seed(7)
    for n in (0, 1, 2, 3, 16, 17, 18, 33, 64, 65, 100, 1000, 2048, tbe_native.RADIX_MIN - 1):
        for rows in (1, 2, 50, 100_000, 2**32 - 1):
            ids = torch.randint(0, rows, (n,), generator=g)
            yield ids
            yield ids.sort().values
            yield ids.sort(descending=True).values
            yield (torch.rand(n, generator=g) ** 4 * rows).long().clamp(max=rows - 1)  # skewed
    for n in (100, 1000, 5000):
        half = torch.arange(n // 2)
        yield torch.cat([half, half.flip(0)])
        yield torch.arange(n) % 7
        yield (torch.arange(n) * 7919) % 101


KILLER = r"""
// McIlroy (1999), "A killer adversary for quicksort", run against std::sort: ids that make every
// pivot a bad one. Same library as torch's sort: introsort then hits its depth limit.
#include <algorithm>
#include <cstdint>
#include <vector>
static std::vector<int64_t> val;
static int64_t gas, solid, candidate;
static bool less(int64_t x, int64_t y) {
    if (val[x] == gas && val[y] == gas) val[x == candidate ? x : y] = solid++;
    if (val[x] == gas) candidate = x;
    else if (val[y] == gas) candidate = y;
    return val[x] < val[y];
}
extern "C" void killer(int64_t n, int64_t* out) {
    val.assign(n, n - 1), gas = n - 1, solid = 0, candidate = 0;
    std::vector<int64_t> order(n);
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), less);
    std::copy(val.begin(), val.end(), out);
}
"""


def killer_ids(tmp_path, n):
    (tmp_path / "killer.cpp").write_text(KILLER)
    lib = CLibrary("killer-test", tmp_path, ("killer.cpp",), {"killer": (None, [ctypes.c_int64, ctypes.c_void_p])})
    out = torch.empty(n, dtype=torch.int64)
    lib.library.killer(n, out.data_ptr())
    return out


def test_the_loop_sorts_in_torchs_order(tmp_path, monkeypatch):
    monkeypatch.setenv("SCRATCHKIT_CACHE_DIR", str(tmp_path / "cache"))
    arrays = list(adversarial_ids())
    for n in (100, 2048, 20_000):
        killer = killer_ids(tmp_path, n)
        arrays += [killer, killer // 3, killer % 17]
    for ids in arrays:
        assert torch.equal(tbe_native.torch_sort_order(ids), torch.sort(ids).indices), (len(ids), ids[:20])
    assert tbe_native.sorts_like_torch()


def test_long_tables_sort_in_the_loop_and_a_failed_sort_check_takes_torchs_permutation(monkeypatch):
    """Past RADIX_MIN lookups torch sorts by a stable radix sort, the order the loop's sort by id
    gives; a table whose first-use check found another order takes torch.sort's permutation."""
    rows, weights, ids, offsets = make_tables(3, 2, 50, 4, 3, 30)
    ids[0] = torch.randint(0, 40, (tbe_native.RADIX_MIN + 5,), generator=torch.Generator().manual_seed(0))
    offsets[0] = torch.arange(0, tbe_native.RADIX_MIN + 5, (tbe_native.RADIX_MIN + 5) // 30 + 1)[:30]
    rows[0] = 40
    grad = torch.randn(30, 2, 4)
    for short, long in ((True, True), (False, False), (True, False), (False, True)):
        monkeypatch.setattr(tbe_native, "sorts_like_torch", lambda: short)
        monkeypatch.setattr(tbe_native, "sorts_stably_like_torch", lambda: long)
        perms, by_id = tbe_native.loop_orders(ids, rows, SummationOrder.TORCH)
        assert [p is None for p in perms] == [long, short] and by_id == [int(long), 0]
        assert_same(
            tb.embedding_backward_tables(ids, offsets, grad, rows),
            tb.embedding_backward_tables_twin(ids, offsets, grad, rows),
        )


def test_twins_run_where_the_loops_cannot(monkeypatch):
    rows, weights, ids, offsets = make_tables(5, 3, 30, 8, 4, 12)
    grad = torch.randn(12, 3, 8)
    adagrad = OptimizerConfig(OptimizerKind.ADAGRAD, lr=0.1)
    states = [torch.rand(n, 8) for n in rows]
    expected = [w.clone() for w in weights], [s.clone() for s in states]
    tb.apply_updates_twin(*expected, tb.embedding_backward_tables_twin(ids, offsets, grad, rows), adagrad)
    fast = tb.embedding_backward_tables(ids, offsets, grad, rows)
    assert fast.flat is not None  # Adagrad: batched backward,
    got = [w.clone() for w in weights], [s.clone() for s in states]
    tb.apply_updates(*got, fast, adagrad)  # torch's update
    assert all(torch.equal(a, b) for a, b in zip(got[0] + got[1], expected[0] + expected[1]))
    monkeypatch.setenv("SCRATCHKIT_NATIVE", "0")  # no loops at all
    assert tb.embedding_backward_tables(ids, offsets, grad, rows).flat is None
    assert torch.equal(
        tb.pooled_lookup_tables(weights, ids, offsets), tb.pooled_lookup_tables_twin(weights, ids, offsets)
    )


def test_bad_input_is_refused_before_anything_changes():
    rows, weights, ids, offsets = make_tables(9, 2, 20, 4, 3, 6)
    bad = [ids[0], ids[1].clone()]
    bad[1][0] = rows[1]  # one past the last row
    with pytest.raises(ValueError, match=r"indices\[1\] holds a row outside weights\[1\]"):
        tb.pooled_lookup_tables(weights, bad, offsets)
    with pytest.raises(ValueError, match=r"offsets\[1\] has shape \(5,\)"):
        tb.pooled_lookup_tables(weights, ids, [offsets[0], offsets[1][:5]])
    grad = torch.randn(6, 2, 4)
    coalesced = tb.embedding_backward_tables(ids, offsets, grad, rows)
    before = [w.clone() for w in weights]
    with pytest.raises(ValueError, match=r"coalesced\[1\] names a row outside weights\[1\]"):
        tb.apply_updates([weights[0], weights[1][:1]], [None, None], coalesced, OptimizerConfig())
    assert all(torch.equal(a, b) for a, b in zip(weights, before))  # table 0 untouched too
    negative = [ids[0], ids[1].clone()]
    negative[1][-1] = -1
    with pytest.raises(ValueError, match=r"ids\[1\] holds an id outside"):
        tb.embedding_backward_tables(negative, offsets, grad, rows)


def _forward_in_child(queue, weights, ids, offsets):
    """The C++ forward in a forked child, its result sent back as a list (the twin runs in the
    parent: torch's own OpenMP pool does not survive a fork, and would hang the child)."""
    queue.put(tb.pooled_lookup_tables(weights, ids, offsets).tolist())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_gets_its_own_threads(threads):
    """The parent's worker threads do not exist in a forked child (ScratchPipe forks its host
    stages): the child must start its own, not wait for the parent's forever."""
    rows, weights, ids, offsets = make_tables(11, 4, 30, 16, 4, 20)
    expected = tb.pooled_lookup_tables_twin(weights, ids, offsets)
    assert torch.equal(tb.pooled_lookup_tables(weights, ids, offsets), expected)  # the pool runs
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_forward_in_child, args=(queue, weights, ids, offsets))
    child.start()
    child.join(timeout=60)
    if child.exitcode is None:
        child.kill()
    assert child.exitcode == 0
    assert torch.equal(torch.tensor(queue.get(timeout=5)), expected)


def test_the_whole_step_on_real_batches_matches(threads):
    """`small`'s real batches (Zipf ids, 8 tables of 2048 lookups): every piece equal to the twin."""
    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.profiles import get_profile

    config = get_profile("small")
    source = SyntheticSource(config.data)
    rows = list(config.data.table_sizes)
    weights = [torch.randn(n, config.model.dim) for n in rows]
    for b in range(3):
        batch = source.batch(b)
        ids = [torch.from_numpy(i) for i in batch.ids]
        offsets = [torch.from_numpy(o) for o in batch.offsets]
        assert torch.equal(
            tb.pooled_lookup_tables(weights, ids, offsets), tb.pooled_lookup_tables_twin(weights, ids, offsets)
        )
        grad = torch.from_numpy(
            np.random.default_rng(b).standard_normal(
                (config.data.batch_size, len(rows), config.model.dim), dtype=np.float32
            )
        )
        assert_same(
            tb.embedding_backward_tables(ids, offsets, grad, rows),
            tb.embedding_backward_tables_twin(ids, offsets, grad, rows),
        )


def by_id_in_lookup_order(ids, offsets, grad, rows) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The slow obvious twin of SummationOrder.BY_ID: per table, each distinct id (ascending) and
    its gradients summed in lookup order, the first copied, each later one added."""
    out = []
    for t, (table_ids, starts) in enumerate(zip(ids, offsets)):
        bag_of = torch.bucketize(torch.arange(len(table_ids)), starts, right=True) - 1  # [n]
        sums = {}
        for j, i in enumerate(table_ids.tolist()):  # lookup order
            g = grad[bag_of[j], t]
            sums[i] = g.clone() if i not in sums else sums[i] + g
        unique = sorted(sums)
        out.append(
            (
                torch.tensor(unique, dtype=torch.int64),
                torch.stack([sums[i] for i in unique]) if unique else torch.empty(0, grad.shape[2]),
            )
        )
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**tables)
def test_by_id_order_sums_each_ids_gradients_in_lookup_order(threads, seed, num_tables, max_rows, dim, max_bag, batch):
    """SummationOrder.BY_ID (an option, SGD only): the C++ radix sort keeps equal ids in lookup
    order, so each id's sum is exactly the lookup-order sum, whatever torch.sort would do."""
    rows, _, ids, offsets = make_tables(seed, num_tables, max_rows, dim, max_bag, batch)
    grad = torch.randn(batch, num_tables, dim, generator=torch.Generator().manual_seed(seed))
    coalesced = tb.embedding_backward_tables(ids, offsets, grad, rows, order=SummationOrder.BY_ID)
    assert coalesced.flat is not None  # the C++ loop ran
    for (index, grad_sum), (want_index, want_sum) in zip(coalesced, by_id_in_lookup_order(ids, offsets, grad, rows)):
        assert torch.equal(index, want_index) and torch.equal(grad_sum, want_sum)


def test_by_id_order_sorts_long_tables_and_large_ids_itself():
    """Past RADIX_MIN lookups and with ids needing three radix passes, still lookup order."""
    g, bags = torch.Generator().manual_seed(5), tbe_native.RADIX_MIN + 10  # one lookup a bag
    ids = [
        torch.randint(0, 3, (bags,), generator=g) * 2**30 // 3,  # 3 passes of 11 bits
        torch.randint(0, 50, (200,), generator=g),
    ]
    offsets = [torch.arange(bags), torch.arange(bags).clamp(max=200)]  # then empty bags
    grad = torch.randn(bags, 2, 4, generator=g)
    coalesced = tb.embedding_backward_tables(ids, offsets, grad, [2**30, 50], order=SummationOrder.BY_ID)
    for (index, grad_sum), (want_index, want_sum) in zip(coalesced, by_id_in_lookup_order(ids, offsets, grad, None)):
        assert torch.equal(index, want_index) and torch.equal(grad_sum, want_sum)


@pytest.mark.parametrize("threads", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("num_tables", [1, 2, 5])
def test_more_threads_than_tables_cut_the_bags_and_change_no_bit(threads, num_tables):
    """With more threads than tables the forward cuts each table's bags into runs, one thread a
    run (host_threads: set_host_threads, as a trainer sets TrainConfig.threads); every bag is
    still one thread's sum in lookup order, so the pooled rows equal torch's at every count."""
    rows, weights, ids, offsets = make_tables(threads * 10 + num_tables, num_tables, 500, 16, 9, 1000)
    tbe_native.set_host_threads(threads)
    try:
        assert tbe_native.host_threads() == threads
        pooled = tb.pooled_lookup_tables(weights, ids, offsets)
        bad = [i.clone() for i in ids]
        bad[-1][-1] = rows[-1]  # the last bag's last lookup: in the last run
        with pytest.raises(ValueError, match=rf"indices\[{num_tables - 1}\] holds a row outside"):
            tb.pooled_lookup_tables(weights, bad, offsets)
        disordered = [o.clone() for o in offsets]
        disordered[0][700] = disordered[0][699] - 1  # a bag that ends before it starts, mid-table
        with pytest.raises(ValueError, match=r"offsets\[0\] is not a list of bag starts"):
            tb.pooled_lookup_tables(weights, ids, disordered)
    finally:
        tbe_native.set_host_threads(None)
    twin = tb.pooled_lookup_tables_twin(weights, ids, offsets)
    assert torch.equal(pooled.view(torch.int32), twin.view(torch.int32))


def test_host_threads_are_a_positive_count():
    with pytest.raises(ValueError, match="host threads must be an integer >= 1"):
        tbe_native.set_host_threads(0)
    with pytest.raises(ValueError, match="host threads must be an integer >= 1"):
        tbe_native.set_host_threads(True)


@pytest.mark.parametrize("threads", [1, 2, 3, 4, 7])
def test_more_threads_than_tables_cut_the_updated_rows_and_change_no_bit(threads):
    """SGD with more threads than tables cuts each table's distinct rows into runs: each row is
    still one fma per element, so the tables equal the twin's at every count."""
    rows, weights, ids, offsets = make_tables(threads, 2, 5000, 16, 9, 1000)
    grad = torch.randn(1000, 2, 16, generator=torch.Generator().manual_seed(threads))
    coalesced = tb.embedding_backward_tables(ids, offsets, grad, rows)
    assert min(coalesced.flat.counts) >= 2 * 256  # enough rows that the runs are cut
    sgd = OptimizerConfig(OptimizerKind.SGD, lr=0.37)
    fast, slow = [w.clone() for w in weights], [w.clone() for w in weights]
    tbe_native.set_host_threads(threads)
    try:
        tb.apply_updates(fast, [None] * 2, coalesced, sgd)
    finally:
        tbe_native.set_host_threads(None)
    tb.apply_updates_twin(slow, [None] * 2, tb.embedding_backward_tables_twin(ids, offsets, grad, rows), sgd)
    for a, b in zip(fast, slow):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))
