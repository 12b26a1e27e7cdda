"""tbe.cu (every table at once, the backward fused with the update) against its NumPy twin, bit for
bit, and the twin against plain PyTorch (embedding_bag, sparse gradients coalesced, the optimizers'
rules of scratchkit/embedding/optim.py), to float rounding.

The kernels and the twin add each bag's rows and each id's gradients in lookup order and round
every operation on its own (embedding_bag.cu says how), so every engine must equal the twin
exactly. PyTorch sums an id's gradients in the order its coalesce sorts them, so it agrees to
rounding only.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from scratchkit.config import OptimizerConfig, OptimizerKind
from scratchkit.embedding.optim import apply_update, embedding_backward
from scratchkit.kernels import twin_tbe as twin

CASES = {  # name: (rows of each table, dim, bags, longest bag)
    "three_tables": ((7, 30, 1), 8, 9, 6),
    "wide_rows": ((5, 12), 67, 4, 5),
    "one_bag": ((3, 3, 3, 3), 4, 1, 7),
    "empty_bags": ((20, 9), 3, 6, 1),
}


def make_batch(name: str, seed: int = 0, by_slot: bool = False):
    """A batch of `name`'s shape: tables, and the kernels' arrays (host NumPy). by_slot: the rows
    are a scratchpad's, each id in a slot of its own (index = slots, base 0), as a cache trains."""
    sizes, dim, num_bags, longest = CASES[name]
    rng = np.random.default_rng(seed)
    tables, index, keys, offsets, starts, slots_of = [], [], [], [], [0], []
    row_base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    for t, rows in enumerate(sizes):
        lengths = rng.integers(0, longest + 1, num_bags)
        ids = rng.integers(0, rows, int(lengths.sum())).astype(np.int64)  # many repeats
        slot_of = rng.permutation(rows + 3).astype(np.int64)  # a slot per id, some spare
        tables.append(rng.standard_normal((rows + 3 if by_slot else rows, dim)).astype(np.float32))
        index.append(slot_of[ids] if by_slot else ids + row_base[t])
        keys.append(ids + row_base[t])
        offsets.append(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64))
        starts.append(starts[-1] + len(ids))
        slots_of.append(slot_of)
    base = np.zeros(len(sizes), np.int64) if by_slot else row_base[:-1]
    arrays = dict(
        index=np.concatenate(index),
        index_base=base,
        starts=np.array(starts, np.int64),
        offsets=np.concatenate(offsets),
    )
    grad = rng.standard_normal((num_bags, len(sizes), dim)).astype(np.float32)
    return tables, arrays, np.concatenate(keys), grad, (row_base, slots_of)


def sorted_lookups(keys):
    at = np.argsort(keys, kind="stable").astype(np.int64)
    return keys[at], at


def host(engine, a):
    return a if engine.xp is np else engine.xp.asnumpy(a)


def on(engine, a):
    return engine.xp.asarray(a)


def run_backward(engine, kind, tables, states, grad, keys, arrays, lr=0.05, eps=1e-8):
    sorted_keys, at = sorted_lookups(keys)
    dev = lambda a: on(engine, a)
    tables = [dev(t.copy()) for t in tables]  # the caller's arrays stay as they were
    states = [dev(s.copy()) for s in states] if states is not None else None
    batch = [dev(arrays[k]) for k in ("index", "index_base", "starts", "offsets")]
    if kind is OptimizerKind.SGD:
        engine.tbe_backward_sgd(tables, dev(grad), dev(sorted_keys), dev(at), *batch, lr)
    else:
        call = getattr(engine, f"tbe_backward_{kind.value}")
        call(tables, states, dev(grad), dev(sorted_keys), dev(at), *batch, lr, eps)
    return [host(engine, t) for t in tables], [host(engine, s) for s in states or []]


def state_for(kind, tables):
    width = {OptimizerKind.SGD: 0, OptimizerKind.ADAGRAD: None, OptimizerKind.ROWWISE_ADAGRAD: 1}[kind]
    if width == 0:
        return None
    rng = np.random.default_rng(7)
    return [rng.uniform(0, 1, (t.shape[0], t.shape[1] if width is None else 1)).astype(np.float32) for t in tables]


@pytest.mark.parametrize("by_slot", [False, True])
@pytest.mark.parametrize("name", CASES)
def test_forward_equals_twin(engine, name, by_slot):
    tables, arrays, _, grad, _ = make_batch(name, by_slot=by_slot)
    want = np.empty_like(grad)
    twin.tbe_forward(tables, arrays["index"], arrays["index_base"], arrays["starts"], arrays["offsets"], want)
    pooled = on(engine, np.full_like(grad, np.nan))
    args = [on(engine, arrays[k]) for k in ("index", "index_base", "starts", "offsets")]
    engine.tbe_forward([on(engine, t) for t in tables], *args, pooled)
    np.testing.assert_array_equal(host(engine, pooled), want)


@pytest.mark.parametrize("kind", list(OptimizerKind))
@pytest.mark.parametrize("by_slot", [False, True])
@pytest.mark.parametrize("name", CASES)
def test_backward_and_update_equal_twin(engine, name, by_slot, kind):
    tables, arrays, keys, grad, _ = make_batch(name, seed=1, by_slot=by_slot)
    states = state_for(kind, tables)
    want_tables, want_states = [t.copy() for t in tables], [s.copy() for s in states or []]
    sorted_keys, at = sorted_lookups(keys)
    batch = [arrays[k] for k in ("index", "index_base", "starts", "offsets")]
    if kind is OptimizerKind.SGD:
        twin.tbe_backward_sgd(want_tables, grad, sorted_keys, at, *batch, 0.05)
    else:
        call = getattr(twin, f"tbe_backward_{kind.value}")
        call(want_tables, want_states, grad, sorted_keys, at, *batch, 0.05, 1e-8)
    got_tables, got_states = run_backward(engine, kind, tables, states, grad, keys, arrays)
    for got, want in zip(got_tables + got_states, want_tables + want_states):
        np.testing.assert_array_equal(got, want)
    assert any(not np.array_equal(a, b) for a, b in zip(want_tables, tables))  # it did update


def torch_reference(tables, states, arrays, keys, grad, kind, by_slot, slot_info, lr=0.05, eps=1e-8):
    """Plain PyTorch per table: embedding_bag forward; the backward as optim.py coalesces it (on
    the table ids), then optim.py's update at each id's row (or its slot)."""
    row_base, slots_of = slot_info
    starts, offsets, num_bags = arrays["starts"], arrays["offsets"], grad.shape[0]
    config = OptimizerConfig(kind=kind, lr=lr, eps=eps)
    pooled, new_tables, new_states = [], [], []
    for t, table in enumerate(tables):
        ids = torch.from_numpy(keys[starts[t] : starts[t + 1]] - row_base[t])
        bag_starts = torch.from_numpy(offsets[t * num_bags : (t + 1) * num_bags])
        rows = torch.from_numpy(table.copy())
        where = torch.from_numpy(slots_of[t])[ids] if by_slot else ids
        pooled.append(F.embedding_bag(where, rows, bag_starts, mode="sum"))
        unique, grad_sum = embedding_backward(ids, bag_starts, torch.from_numpy(grad[:, t]), int(row_base[t + 1]))
        state = None if states is None else torch.from_numpy(states[t].copy())
        apply_update(rows, state, torch.from_numpy(slots_of[t])[unique] if by_slot else unique, grad_sum, config)
        new_tables.append(rows.numpy())
        new_states += [] if state is None else [state.numpy()]
    return np.stack([p.numpy() for p in pooled], axis=1), new_tables, new_states


@pytest.mark.parametrize("kind", list(OptimizerKind))
@pytest.mark.parametrize("by_slot", [False, True])
def test_twin_matches_plain_pytorch(kind, by_slot):
    tables, arrays, keys, grad, slot_info = make_batch("three_tables", seed=2, by_slot=by_slot)
    states = state_for(kind, tables)
    want_pooled, want_tables, want_states = torch_reference(
        tables, states, arrays, keys, grad, kind, by_slot, slot_info
    )
    pooled = np.empty_like(grad)
    batch = [arrays[k] for k in ("index", "index_base", "starts", "offsets")]
    twin.tbe_forward(tables, *batch, pooled)
    np.testing.assert_allclose(pooled, want_pooled, rtol=1e-6, atol=1e-6)
    got_tables, got_states = run_backward(twin_engine(), kind, tables, states, grad, keys, arrays)
    for got, want in zip(got_tables + got_states, want_tables + want_states):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def twin_engine():
    from scratchkit.kernels import make_engine

    return make_engine("twin")


def test_hits_are_counted_per_lookup(engine):
    tables, arrays, keys, _, (row_base, slots_of) = make_batch("three_tables", seed=3, by_slot=True)
    slot_ids = []
    for t, slot_of in enumerate(slots_of):
        held = np.full(len(slot_of), -1, np.int64)
        held[slot_of[: row_base[t + 1] - row_base[t]]] = np.arange(row_base[t + 1] - row_base[t])
        slot_ids.append(held)
    starts = arrays["starts"]
    lookups = int(starts[-1])
    slot_ids[1][arrays["index"][starts[1]]] = -1  # one slot lost its id: its lookups miss
    first = arrays["index"][starts[1]]
    missed = int(np.count_nonzero(arrays["index"][starts[1] : starts[2]] == first))
    hits = on(engine, np.zeros(1, np.uint64))
    args = [on(engine, a) for a in (arrays["index"], keys, row_base[:-1], starts)]
    engine.tbe_count_hits([on(engine, s) for s in slot_ids], *args, hits)
    assert int(host(engine, hits)[0]) == lookups - missed and missed > 0
