"""embedding_bag.cu against its NumPy twin (bit for bit) and against independent references.

Exact comparisons, and why they can be exact:
- forward: every engine sums a bag's rows in lookup order, in float32, with no atomics;
- backward + update: every engine sums a row's lookup gradients in lookup order (a coalescing
  plan replaces atomicAdd), rounds each product and sum on its own (-ffp-contract=off for g++,
  --fmad=false for NVRTC), and writes the row update as one explicit fused multiply-add; division
  and sqrt are IEEE correctly rounded everywhere. So host build and CuPy must equal the twin.
Toleranced comparisons use references computed another way (torch's embedding_bag, float64 math),
whose summation order or precision differs from ours.
"""

import ctypes
import ctypes.util

import numpy as np
import pytest
import torch

from scratchkit.kernels import make_engine, twin


def host(engine, a):
    return a if engine.xp is np else engine.xp.asnumpy(a)


def make_batch(rng, capacity, num_bags, max_bag, empty_bags=True):
    """Random bags (some empty when asked) of slots with many duplicates."""
    lengths = rng.integers(0 if empty_bags else 1, max_bag + 1, num_bags)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])[:num_bags].astype(np.int64)
    slots = rng.integers(0, capacity, int(lengths.sum())).astype(np.int64)
    return slots, offsets


CASES = {  # name: (capacity, dim, num_bags, max_bag)
    "typical": (40, 8, 30, 12),
    "one_slot_everywhere": (1, 5, 6, 9),
    "wide_rows": (16, 67, 5, 4),
    "no_bags": (10, 4, 0, 0),
    "one_empty_bag": (10, 4, 1, 0),
}


def case(name, seed=0):
    capacity, dim, num_bags, max_bag = CASES[name]
    rng = np.random.default_rng(seed)
    slots, offsets = make_batch(rng, capacity, num_bags, max_bag)
    assert len(offsets) == num_bags
    rows = rng.standard_normal((capacity, dim)).astype(np.float32)
    grad = rng.standard_normal((num_bags, dim)).astype(np.float32)
    return rows, slots, offsets, grad


def on(engine, *arrays):
    return [engine.xp.asarray(a) for a in arrays]


@pytest.mark.parametrize("name", CASES)
def test_forward_equals_twin(engine, name):
    rows, slots, offsets, _ = case(name)
    got = host(engine, engine.embedding_bag_forward(*on(engine, rows, slots, offsets)))
    np.testing.assert_array_equal(got, twin.embedding_bag_forward(rows, slots, offsets))


def test_forward_edge_bags(engine):
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)
    slots = np.array([2, 2, 0, 3], dtype=np.int64)
    offsets = np.array([0, 0, 2, 4], dtype=np.int64)  # bag 0 empty, last bag empty (ends at nnz)
    got = host(engine, engine.embedding_bag_forward(*on(engine, rows, slots, offsets)))
    np.testing.assert_array_equal(got, [[0, 0, 0], rows[2] * 2, rows[0] + rows[3], [0, 0, 0]])


def test_twin_forward_matches_torch_embedding_bag():
    rows, slots, offsets, _ = case("typical", seed=3)
    want = torch.nn.functional.embedding_bag(
        torch.from_numpy(slots), torch.from_numpy(rows), torch.from_numpy(offsets), mode="sum"
    )
    np.testing.assert_allclose(twin.embedding_bag_forward(rows, slots, offsets), want.numpy(), rtol=1e-6, atol=1e-6)


OPTIMIZERS = ("sgd", "rowwise_adagrad", "adagrad")


def run_update(engine, optimizer, rows, state, slots, offsets, grad, lr=0.05, eps=1e-8):
    """Apply one fused update with `engine`; return host copies of (rows, state)."""
    d_rows, d_slots, d_offsets, d_grad = on(engine, rows, slots, offsets, grad)
    if optimizer == "sgd":
        engine.embedding_bag_backward_sgd(d_rows, d_slots, d_offsets, d_grad, lr)
        return host(engine, d_rows), None
    d_state = engine.xp.asarray(state)
    kernel = getattr(engine, f"embedding_bag_backward_{optimizer}")
    kernel(d_rows, d_state, d_slots, d_offsets, d_grad, lr, eps)
    return host(engine, d_rows), host(engine, d_state)


def initial_state(optimizer, rows, rng):
    width = {"sgd": 0, "rowwise_adagrad": 1, "adagrad": rows.shape[1]}[optimizer]
    return rng.uniform(0, 2, (rows.shape[0], width)).astype(np.float32)


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("name", CASES)
def test_backward_update_equals_twin_bitwise(engine, optimizer, name):
    rows, slots, offsets, grad = case(name, seed=1)
    state = initial_state(optimizer, rows, np.random.default_rng(2))
    got_rows, got_state = run_update(engine, optimizer, rows.copy(), state.copy(), slots, offsets, grad)
    want_rows, want_state = run_update(make_engine("twin"), optimizer, rows.copy(), state.copy(), slots, offsets, grad)
    np.testing.assert_array_equal(got_rows, want_rows)
    if want_state is not None:
        np.testing.assert_array_equal(got_state, want_state)
    untouched = np.setdiff1d(np.arange(rows.shape[0]), slots)
    np.testing.assert_array_equal(got_rows[untouched], rows[untouched])


@pytest.mark.parametrize("block", [1, 7, 256])
def test_host_result_does_not_depend_on_block_size(block):
    rows, slots, offsets, grad = case("typical", seed=4)
    state = initial_state("rowwise_adagrad", rows, np.random.default_rng(5))
    got = run_update(
        make_engine("host", threads_per_block=block), "rowwise_adagrad", rows.copy(), state.copy(), slots, offsets, grad
    )
    want = run_update(make_engine("twin"), "rowwise_adagrad", rows.copy(), state.copy(), slots, offsets, grad)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_twin_update_matches_float64_reference(optimizer):
    """Independent reference: dense per-row gradients and the textbook formulas in float64."""
    rows, slots, offsets, grad = case("typical", seed=6)
    state = initial_state(optimizer, rows, np.random.default_rng(7))
    lr, eps = 0.05, 1e-8
    got_rows, got_state = run_update(
        make_engine("twin"), optimizer, rows.copy(), state.copy(), slots, offsets, grad, lr, eps
    )
    g = np.zeros(rows.shape)  # [capacity, dim] float64
    ends = np.append(offsets[1:], len(slots))
    for bag, (begin, end) in enumerate(zip(offsets, ends)):
        for slot in slots[begin:end]:
            g[slot] += grad[bag]
    touched = np.unique(slots)
    want_rows, want_state = rows.astype(np.float64), state.astype(np.float64)
    if optimizer == "sgd":
        want_rows[touched] -= lr * g[touched]
    elif optimizer == "rowwise_adagrad":
        want_state[touched, 0] += (g[touched] ** 2).mean(axis=1)
        want_rows[touched] -= lr * g[touched] / (np.sqrt(want_state[touched]) + eps)
    else:
        want_state[touched] += g[touched] ** 2
        want_rows[touched] -= lr * g[touched] / (np.sqrt(want_state[touched]) + eps)
    np.testing.assert_allclose(got_rows, want_rows, rtol=1e-5, atol=1e-6)
    if optimizer != "sgd":
        np.testing.assert_allclose(got_state, want_state, rtol=1e-5, atol=1e-6)


def torch_add_alpha_is_fused() -> bool:
    """Whether torch's `a.add(b, alpha=s)` rounds once (an FMA) on this CPU, as with AVX2."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(4096).astype(np.float32) for _ in range(2))
    s = np.float32(-0.0123)
    fused = torch.from_numpy(a).add(torch.from_numpy(b), alpha=float(s)).numpy()
    return bool((fused == twin.fma_f32(s, b, a)).all()) and not bool((fused == a + s * b).all())


@pytest.mark.skipif(not torch_add_alpha_is_fused(), reason="torch's add(alpha=) is not fused here")
def test_twin_sgd_matches_torch_index_add_and_add_alpha_bitwise():
    """With lookup-order coalescing (index_add_) and `add(alpha=-lr)`, torch gives our bits.

    (torch's sparse `coalesce()` would not: above 16 entries it sums duplicates in another order.)
    """
    rows, slots, offsets, grad = case("typical", seed=8)
    lr = 0.05
    got, _ = run_update(make_engine("twin"), "sgd", rows.copy(), None, slots, offsets, grad, lr)
    unique, where = np.unique(slots, return_inverse=True)
    bag_of = np.searchsorted(offsets, np.arange(len(slots)), side="right") - 1
    coalesced = torch.zeros(len(unique), rows.shape[1]).index_add_(
        0, torch.from_numpy(where), torch.from_numpy(grad[bag_of])
    )
    want = torch.from_numpy(rows.copy())
    want[torch.from_numpy(unique)] = want[torch.from_numpy(unique)].add(coalesced, alpha=-lr)
    np.testing.assert_array_equal(got, want.numpy())


# ------------------------------------------------------------------------ the twin's fma
def libm_fmaf():
    path = ctypes.util.find_library("m")
    if path is None:
        pytest.skip("no C math library to compare with")
    fmaf = ctypes.CDLL(path).fmaf
    fmaf.restype, fmaf.argtypes = ctypes.c_float, [ctypes.c_float] * 3
    return fmaf


def test_fma_f32_matches_c_fmaf_on_random_values():
    fmaf = libm_fmaf()
    rng = np.random.default_rng(11)
    a = rng.standard_normal(3000).astype(np.float32)
    b = (rng.standard_normal(3000) * 10.0 ** rng.uniform(-8, 3, 3000)).astype(np.float32)
    c = rng.standard_normal(3000).astype(np.float32)
    want = np.array([fmaf(*map(float, abc)) for abc in zip(a, b, c)], dtype=np.float32)
    np.testing.assert_array_equal(twin.fma_f32(a, b, c), want)


def test_fma_f32_rounds_once_where_double_rounding_would_not():
    """a*b + c = 1 + 3*2^-24 - 2^-70: just below a float32 halfway point; float64 first rounds it
    *onto* the halfway point, and ties-to-even then goes the wrong way."""
    fmaf = libm_fmaf()
    a = np.float32((1 + 2**-23) * 2**-12)
    b = np.float32((1 - 2**-23) * 2**-12)
    c = np.float32(1 + 2**-23)
    naive = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    assert naive != np.float32(fmaf(a, b, c))  # the trap is real
    assert twin.fma_f32(a, b, c) == np.float32(fmaf(a, b, c)) == c
    assert twin.fma_f32(-a, b, -c) == np.float32(fmaf(-a, b, -c))
