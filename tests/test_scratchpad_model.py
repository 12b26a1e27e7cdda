"""Random operation sequences: the host-build scratchpad, the twin scratchpad and a dict model
must agree after every step, down to the hash table's buckets and the rows' bits."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from scratchkit.kernels.scratchpad import Scratchpad

NUM_ROWS, CAPACITY, DIM = 40, 8, 3

operation = st.one_of(
    st.tuples(st.just("insert"), st.lists(st.integers(0, NUM_ROWS - 1), max_size=6, unique=True)),
    st.tuples(st.just("erase"), st.integers(0, 6)),
    st.tuples(st.just("hold"), st.integers(0, 3)),
    st.tuples(st.just("release"), st.integers(0, 3)),
    st.tuples(st.just("train"), st.lists(st.integers(0, NUM_ROWS - 1), min_size=1, max_size=8)),
)


class Model:
    """What a scratchpad must contain, kept with plain Python containers."""

    def __init__(self):
        self.slot_of = {}  # id -> slot
        self.holds = {}  # slot -> count


def apply(op, arg, pads, model, rng):
    """Run one operation on every pad (skipping the ones the model says must be refused)."""
    if op == "insert":
        new = [i for i in arg if i not in model.slot_of]
        free = sorted(set(range(CAPACITY)) - set(model.slot_of.values()))
        if len(new) > len(free):
            for pad in pads:
                with pytest.raises(ValueError, match="only .* slots are free"):
                    pad.insert(new, free[: len(new)] + [0] * (len(new) - len(free)))
            return
        slots = rng.permutation(free)[: len(new)].tolist()
        rows = rng.standard_normal((len(new), DIM)).astype(np.float32)
        state = rng.uniform(0, 1, (len(new), 1)).astype(np.float32)
        for pad in pads:
            pad.insert(new, slots)
            pad.scatter(slots, rows, state)
        model.slot_of.update(zip(new, slots))
    elif op == "erase":
        unheld = sorted(i for i, s in model.slot_of.items() if not model.holds.get(s))
        victims = rng.permutation(unheld)[:arg].tolist()
        for pad in pads:
            np.testing.assert_array_equal(pad.erase(victims).slots, [model.slot_of[v] for v in victims])
        for v in victims:
            del model.slot_of[v]
    elif op == "hold":
        used = sorted(model.slot_of.values())
        slots = rng.permutation(used)[:arg].tolist()
        for pad in pads:
            pad.hold(slots)
        for s in slots:
            model.holds[s] = model.holds.get(s, 0) + 1
    elif op == "release":
        held = sorted(s for s, c in model.holds.items() if c)
        slots = rng.permutation(held)[:arg].tolist()
        for pad in pads:
            pad.release(slots)
        for s in slots:
            model.holds[s] -= 1
    elif op == "train":
        present = [model.slot_of[i] for i in arg if i in model.slot_of]
        if not present:
            return
        offsets = np.unique(np.concatenate([[0], rng.integers(0, len(present), 2)]))
        grad = rng.standard_normal((len(offsets), DIM)).astype(np.float32)
        pooled = [pad.embedding_bag_forward(present, offsets) for pad in pads]
        np.testing.assert_array_equal(pooled[0], pooled[1])
        for pad in pads:
            pad.backward_update(present, offsets, grad, "rowwise_adagrad", lr=0.1)


def check(pads, model):
    probe = np.arange(NUM_ROWS)
    want = [model.slot_of.get(i, -1) for i in probe]
    for pad in pads:
        np.testing.assert_array_equal(pad.query(probe), want)
        assert len(pad) == len(model.slot_of)
        np.testing.assert_array_equal(pad.hold_counts, [model.holds.get(s, 0) for s in range(CAPACITY)])
    twin_pad, host_pad = pads
    np.testing.assert_array_equal(twin_pad.map.keys, host_pad.map.keys)  # same buckets
    np.testing.assert_array_equal(twin_pad.map.values, host_pad.map.values)
    np.testing.assert_array_equal(twin_pad.rows.numpy(), host_pad.rows.numpy())  # same bits
    np.testing.assert_array_equal(twin_pad.state.numpy(), host_pad.state.numpy())
    np.testing.assert_array_equal(twin_pad.dirty_mask(), host_pad.dirty_mask())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, min_size=1, max_size=25), seed=st.integers(0, 2**16))
def test_twin_and_host_scratchpads_agree_with_the_model(ops, seed):
    rng = np.random.default_rng(seed)
    pads = [Scratchpad(NUM_ROWS, CAPACITY, DIM, state_width=1, engine=e, device="cpu") for e in ("twin", "host")]
    model = Model()
    for op, arg in ops:
        apply(op, arg, pads, model, rng)
        check(pads, model)


def test_long_churn_rebuilds_and_still_agrees():
    """Many insert/erase rounds (more than hypothesis' short runs) to go through rebuilds."""
    rng = np.random.default_rng(1)
    pads = [Scratchpad(NUM_ROWS, CAPACITY, DIM, state_width=1, engine=e, device="cpu") for e in ("twin", "host")]
    model = Model()
    for _ in range(60):
        apply("insert", rng.choice(NUM_ROWS, 5, replace=False).tolist(), pads, model, rng)
        apply("train", rng.integers(0, NUM_ROWS, 8).tolist(), pads, model, rng)
        apply("erase", 4, pads, model, rng)
        check(pads, model)
    assert pads[0].rebuilds == pads[1].rebuilds > 0
