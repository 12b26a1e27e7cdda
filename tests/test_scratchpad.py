"""Scratchpad: its operations, the torch views, hold / dirty bookkeeping, and bad input."""

import numpy as np
import pytest
import torch

from scratchkit.backend import detect
from scratchkit.kernels import twin
from scratchkit.config import OptimizerKind
from scratchkit.kernels.scratchpad import Scratchpad


@pytest.fixture(params=["twin", "host", pytest.param("cupy", marks=pytest.mark.gpu)])
def engine(request):
    if request.param == "cupy" and not detect().cupy_gpu:
        pytest.skip("needs an NVIDIA GPU with CuPy")
    return request.param


def make(engine, num_rows=1000, capacity=16, dim=4, state_width=0):
    device = "cuda" if engine == "cupy" else "cpu"
    return Scratchpad(num_rows, capacity, dim, state_width=state_width, engine=engine, device=device)


def np_(pad, a):
    return a if pad.xp is np else pad.xp.asnumpy(a)


def snapshot(pad):
    """Everything an operation could change, as host copies."""
    return (
        np_(pad, pad.map.keys).copy(),
        np_(pad, pad.map.values).copy(),
        pad.rows.cpu().clone(),
        pad.slot_ids.copy(),
        pad.hold_counts.copy(),
        pad.dirty_mask(),
        len(pad),
    )


def assert_unchanged(pad, before):
    after = snapshot(pad)
    for a, b in zip(before, after):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b)
        else:
            np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------- operations
def test_insert_query_erase_roundtrip(engine):
    pad = make(engine)
    ids = np.array([5, 999, 0, 42])
    pad.insert(ids, [3, 0, 15, 7])
    np.testing.assert_array_equal(np_(pad, pad.query([42, 5, 6, 0, 999, 5])), [7, 3, -1, 15, 0, 3])
    assert len(pad) == 4 and pad.slot_ids[7] == 42
    erased = pad.erase([5, 0])
    np.testing.assert_array_equal(erased.slots, [3, 15])
    np.testing.assert_array_equal(np_(pad, pad.query(ids)), [-1, 0, -1, 7])
    assert set(pad.free_slots().tolist()) == set(range(16)) - {0, 7}
    pad.insert([5], [15])  # a freed id and slot are usable again
    assert np_(pad, pad.query([5])).tolist() == [15]


def test_table_is_a_power_of_two_at_least_twice_the_capacity():
    for capacity, size in [(1, 2), (8, 16), (9, 32), (1000, 2048)]:
        assert Scratchpad(10, capacity, 2, engine="twin", device="cpu").table_size == size


def test_gather_scatter_with_state(engine):
    pad = make(engine, state_width=1)
    rows = np.arange(12, dtype=np.float32).reshape(3, 4)
    state = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
    pad.scatter([9, 2, 4], rows, state)
    got_rows, got_state = pad.gather([4, 9, 4])
    np.testing.assert_array_equal(np_(pad, got_rows), rows[[2, 0, 2]])
    np.testing.assert_array_equal(np_(pad, got_state), state[[2, 0, 2]])
    empty_rows, empty_state = pad.gather([])
    assert empty_rows.shape == (0, 4) and empty_state.shape == (0, 1)


def test_rows_and_state_are_shared_torch_tensors(engine):
    pad = make(engine, state_width=1)
    assert pad.rows.shape == (16, 4) and pad.rows.dtype == torch.float32
    assert pad.state.shape == (16, 1)
    assert pad.rows.device.type == ("cuda" if engine == "cupy" else "cpu")
    pad.rows[3] = torch.tensor([1.0, 2.0, 3.0, 4.0])  # torch write, kernel read
    pad.state[3] = 7.0
    rows, state = pad.gather([3])
    np.testing.assert_array_equal(np_(pad, rows), [[1, 2, 3, 4]])
    assert np_(pad, state).item() == 7.0
    pad.scatter([5], np.full((1, 4), 9.0, np.float32), np.ones((1, 1), np.float32))  # kernel write
    assert pad.rows[5].tolist() == [9.0] * 4 and pad.state[5].item() == 1.0
    assert Scratchpad(10, 4, 2, engine="twin", device="cpu").state is None


def test_forward_and_backward_update_act_on_the_shared_rows(engine):
    pad = make(engine, state_width=1)
    pad.rows.copy_(torch.arange(64, dtype=torch.float32).reshape(16, 4) / 10)
    slots, offsets = np.array([1, 2, 1, 5]), np.array([0, 3])
    pooled = np_(pad, pad.embedding_bag_forward(slots, offsets))
    want = twin.embedding_bag_forward(pad.rows.cpu().numpy(), slots, offsets)
    np.testing.assert_array_equal(pooled, want)
    grad = np.ones((2, 4), np.float32)
    rows, state = pad.rows.cpu().numpy().copy(), pad.state.cpu().numpy().copy()
    pad.backward_update(slots, offsets, torch.from_numpy(grad), OptimizerKind.ROWWISE_ADAGRAD, lr=0.1, eps=1e-8)
    twin.embedding_bag_backward_rowwise_adagrad(rows, state, slots, offsets, grad, 0.1, 1e-8)
    np.testing.assert_array_equal(pad.rows.cpu().numpy(), rows)
    np.testing.assert_array_equal(pad.state.cpu().numpy(), state)
    np.testing.assert_array_equal(pad.dirty_slots(), [1, 2, 5])


def test_sgd_and_adagrad_need_matching_state(engine):
    sgd = make(engine)
    sgd.backward_update([1, 1], [0], np.ones((1, 4), np.float32), "sgd", lr=0.5)
    assert sgd.rows[1].tolist() == [-1.0] * 4  # two lookups, coalesced
    adagrad = make(engine, state_width=4)
    adagrad.backward_update([2], [0], np.full((1, 4), 2.0, np.float32), "adagrad", lr=1.0, eps=0.0)
    assert adagrad.state[2].tolist() == [4.0] * 4 and adagrad.rows[2].tolist() == [-1.0] * 4
    with pytest.raises(ValueError, match="rowwise_adagrad needs state_width 1, but this scratchpad has state_width 0"):
        sgd.backward_update([1], [0], np.ones((1, 4), np.float32), "rowwise_adagrad", lr=0.1)
    with pytest.raises(ValueError, match="adagrad needs state_width 4"):
        make(engine, state_width=1).backward_update([1], [0], np.ones((1, 4)), "adagrad", lr=0.1)


def test_empty_batch_is_fine_everywhere(engine):
    pad = make(engine, state_width=1)
    pad.insert([], [])
    assert np_(pad, pad.query([])).shape == (0,)
    assert pad.erase([]).slots.shape == (0,)
    pad.scatter([], np.zeros((0, 4), np.float32), np.zeros((0, 1), np.float32))
    assert np_(pad, pad.embedding_bag_forward([], [])).shape == (0, 4)
    assert np_(pad, pad.embedding_bag_forward([], [0, 0])).tolist() == [[0.0] * 4] * 2
    pad.backward_update([], [0], np.ones((1, 4), np.float32), "rowwise_adagrad", lr=0.1)
    assert not pad.dirty_mask().any() and not pad.rows.any()


# ------------------------------------------------------------------------------- bookkeeping
def test_holds_count_batches_and_block_erase(engine):
    pad = make(engine)
    pad.insert([10, 11, 12], [0, 1, 2])
    pad.hold([0, 1, 1])  # a slot listed twice is held once by this batch
    pad.hold([1])
    np.testing.assert_array_equal(pad.hold_counts[:3], [1, 2, 0])
    np.testing.assert_array_equal(np.flatnonzero(pad.held_mask()), [0, 1])
    with pytest.raises(ValueError, match=r"ids\[1\] = 11 lives in slot 1, which is held by 2"):
        pad.erase([12, 11])
    pad.release([0, 1])
    pad.release([1])
    assert not pad.held_mask().any()
    pad.erase([12, 11])
    with pytest.raises(ValueError, match="slot 0 is not held"):
        pad.release([0])
    with pytest.raises(ValueError, match="slot 1 is free"):
        pad.hold([1])


def test_dirty_bits(engine):
    pad = make(engine)
    pad.insert([10, 11, 12], [0, 1, 2])
    pad.scatter([0, 1], np.ones((2, 4), np.float32))  # fresh copies: clean
    assert not pad.dirty_mask().any()
    pad.backward_update([1], [0], np.ones((1, 4), np.float32), "sgd", lr=0.1)
    pad.mark_dirty([2])
    np.testing.assert_array_equal(pad.dirty_slots(), [1, 2])
    pad.clear_dirty([2])
    erased = pad.erase([11, 10])
    np.testing.assert_array_equal(erased.slots, [1, 0])
    np.testing.assert_array_equal(erased.was_dirty, [True, False])
    assert not pad.dirty_mask().any()  # erase clears them
    pad.scatter([2], np.ones((1, 4), np.float32), dirty=True)
    np.testing.assert_array_equal(pad.dirty_slots(), [2])


def test_bookkeeping_views_are_read_only(engine):
    pad = make(engine)
    with pytest.raises(ValueError):
        pad.slot_ids[0] = 5
    with pytest.raises(ValueError):
        pad.hold_counts[0] = 5


def test_tombstones_trigger_a_rebuild_and_queries_stay_right(engine):
    pad = make(engine, capacity=8)  # table of 16 buckets
    rng = np.random.default_rng(0)
    model = {}
    for step in range(40):
        new = [i for i in rng.choice(1000, 4, replace=False).tolist() if i not in model][: len(pad.free_slots())]
        slots = pad.free_slots()[: len(new)]
        pad.insert(new, slots)
        model.update(zip(new, slots.tolist()))
        victims = rng.choice(sorted(model), size=min(3, len(model)), replace=False).tolist()
        pad.erase(victims)
        for v in victims:
            del model[v]
        assert len(pad) + pad.tombstones <= 0.75 * pad.table_size
        probe = np.arange(1000)
        np.testing.assert_array_equal(np_(pad, pad.query(probe)), [model.get(i, -1) for i in probe])
    assert pad.rebuilds > 0


def test_must_hit_names_the_first_miss(engine):
    pad = make(engine)
    pad.insert([1, 2], [0, 1])
    assert np_(pad, pad.query([2, 1], must_hit=True)).tolist() == [1, 0]
    with pytest.raises(ValueError, match=r"ids\[1\] = 3 is not in the scratchpad \(2 of 3 ids miss\)"):
        pad.query([1, 3, 4], must_hit=True)


# ------------------------------------------------------------------------------- bad input
BAD_INPUT = [  # (operation, expected message); each runs on a pad with ids 10..13 in slots 0..3
    (lambda p: p.query([1, -1]), r"ids\[1\] = -1 is out of range \[0, 1000\)"),
    (lambda p: p.query([1000]), r"ids\[0\] = 1000 is out of range \[0, 1000\)"),
    (lambda p: p.query([[1, 2]]), r"ids must be 1-D, got shape \(1, 2\)"),
    (lambda p: p.query([1.5]), "ids must hold integers, got dtype float64"),
    (lambda p: p.query(np.array([True])), "ids must hold integers, got dtype bool"),
    (lambda p: p.insert([20, 21], [5]), "ids and slots differ in length: 2 vs 1"),
    (lambda p: p.insert([20, 1000], [5, 6]), r"ids\[1\] = 1000 is out of range"),
    (lambda p: p.insert([20, 21, 20], [5, 6, 7]), r"ids\[2\] = 20 repeats ids\[0\]"),
    (
        lambda p: p.insert(list(range(20, 33)), list(range(4, 16)) + [0]),
        "cannot insert 13 ids: only 12 of 16 slots are free",
    ),
    (lambda p: p.insert([20, 21], [5, 16]), r"slots\[1\] = 16 is out of range \[0, 16\)"),
    (lambda p: p.insert([20, 21], [-1, 5]), r"slots\[0\] = -1 is out of range"),
    (lambda p: p.insert([20, 21], [5, 5]), r"slots\[1\] = 5 repeats slots\[0\]"),
    (lambda p: p.insert([20, 21], [5, 2]), r"slots\[1\] = 2 is already used by id 12"),
    (lambda p: p.insert([20, 11], [5, 6]), r"ids\[1\] = 11 is already in the scratchpad"),
    (lambda p: p.erase([10, 99]), r"ids\[1\] = 99 is not in the scratchpad: nothing to erase"),
    (lambda p: p.erase([10, 10]), r"ids\[1\] = 10 repeats ids\[0\]"),
    (lambda p: p.gather([0, 16]), r"slots\[1\] = 16 is out of range \[0, 16\)"),
    (lambda p: p.scatter([0, 0], np.zeros((2, 4))), r"slots\[1\] = 0 repeats slots\[0\]"),
    (lambda p: p.scatter([0], np.zeros((1, 5))), r"rows must have shape \(1, 4\), got \(1, 5\)"),
    (lambda p: p.scatter([0], np.zeros((1, 4), np.int32)), "rows must hold floats, got dtype int32"),
    (
        lambda p: p.scatter([0], np.zeros((1, 4)), np.zeros((1, 1))),
        "state given, but this scratchpad has state_width 0",
    ),
    (lambda p: p.embedding_bag_forward([0, -1], [0]), r"slots\[1\] = -1 is out of range"),
    (lambda p: p.embedding_bag_forward([0, 1], [1]), r"offsets\[0\] = 1 must be 0"),
    (lambda p: p.embedding_bag_forward([0, 1, 2], [0, 2, 1]), r"offsets\[2\] = 1 is smaller than offsets\[1\] = 2"),
    (lambda p: p.embedding_bag_forward([0, 1], [0, 3]), r"offsets\[1\] = 3 is beyond the 2 lookups"),
    (lambda p: p.embedding_bag_forward([0, 1], []), "offsets is empty but there are 2 lookups"),
    (
        lambda p: p.backward_update([0, 1], [0], np.ones((2, 4)), "sgd", lr=0.1),
        r"grad_pooled must have shape \(1, 4\), got \(2, 4\)",
    ),
    (lambda p: p.backward_update([0], [0], np.ones((1, 4)), "sgd", lr=float("nan")), "lr must be a finite number"),
    (lambda p: p.backward_update([0], [0], np.ones((1, 4)), "adam", lr=0.1), "unknown optimizer 'adam'"),
    (lambda p: p.mark_dirty([16]), r"slots\[0\] = 16 is out of range"),
]


@pytest.mark.parametrize("operation, message", BAD_INPUT, ids=[m for _, m in BAD_INPUT])
def test_bad_input_is_refused_before_anything_changes(engine, operation, message):
    pad = make(engine)
    pad.insert([10, 11, 12, 13], [0, 1, 2, 3])
    pad.rows.copy_(torch.arange(64, dtype=torch.float32).reshape(16, 4))
    before = snapshot(pad)
    with pytest.raises(ValueError, match=message):
        operation(pad)
    assert_unchanged(pad, before)


def test_state_is_required_when_the_pad_keeps_state(engine):
    pad = make(engine, state_width=1)
    with pytest.raises(ValueError, match="state is required: this scratchpad keeps 1 optimizer float"):
        pad.scatter([0], np.zeros((1, 4), np.float32))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_rows=0, capacity=4, dim=2), "num_rows must be an integer >= 1, got 0"),
        (dict(num_rows=10, capacity=0, dim=2), "capacity must be an integer >= 1, got 0"),
        (dict(num_rows=10, capacity=4, dim=2.5), "dim must be an integer >= 1, got 2.5"),
        (dict(num_rows=10, capacity=4, dim=2, state_width=-1), "state_width must be an integer >= 0"),
        (
            dict(num_rows=10, capacity=4, dim=2, engine="host", device="cuda"),
            "engine 'host' cannot serve device 'cuda'",
        ),
        (dict(num_rows=10, capacity=4, dim=2, engine="cupy", device="cpu"), "engine 'cupy' cannot serve device 'cpu'"),
    ],
)
def test_bad_construction(kwargs, message):
    num_rows, capacity, dim = kwargs.pop("num_rows"), kwargs.pop("capacity"), kwargs.pop("dim")
    with pytest.raises(ValueError, match=message):
        Scratchpad(num_rows, capacity, dim, **kwargs)


@pytest.mark.skipif(detect().cupy_gpu, reason="checks the message given when there is no GPU")
def test_cupy_engine_without_gpu_explains_why():
    with pytest.raises(RuntimeError, match="CuPy"):
        Scratchpad(10, 4, 2, engine="cupy", device="cuda")


def test_results_live_where_the_input_came_from(engine):
    pad = make(engine)
    pad.insert([7, 8], [2, 3])
    for host_input in ([7, 9], np.array([7, 9]), torch.tensor([7, 9])):
        slots = pad.query(host_input)
        assert isinstance(slots, np.ndarray) and slots.tolist() == [2, -1]
    assert isinstance(pad.gather([2])[0], np.ndarray)
    assert isinstance(pad.embedding_bag_forward([2, 3], [0]), np.ndarray)
    if engine == "cupy":
        cp = pad.xp
        slots = pad.query(cp.asarray([7, 9]))
        assert isinstance(slots, cp.ndarray) and slots.tolist() == [2, -1]
        assert isinstance(pad.query(torch.tensor([7], device="cuda")), cp.ndarray)
        assert isinstance(pad.gather(cp.asarray([2]))[0], cp.ndarray)
        assert isinstance(pad.embedding_bag_forward(cp.asarray([2, 3]), [0]), cp.ndarray)
