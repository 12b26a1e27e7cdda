"""ScratchPipe's device planner (scratchpipe/device_plan.py: the map in the kernels' hash map, the
slots' bookkeeping in engine arrays) makes exactly the decisions of the host planner's NumPy twin
(scratchpipe/plan.py), array for array, on every engine a CPU has; its `wait_for_write_back` is
never earlier than the host planner's (it may wait longer: it keeps no per-row array)."""

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from scratchkit.config import DataConfig, VictimPolicy
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.kernels.array_ops import ArrayOps
from scratchkit.kernels.engine import EngineKind, host_build_works, make_engine
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.scratchpipe.device_map import DeviceSlotMap
from scratchkit.scratchpipe.device_plan import DevicePlans
from scratchkit.scratchpipe.plan_ahead import PlanAhead, PlanSetup

FIELDS = ("lookup_slots", "miss_ids", "miss_slots", "victim_ids", "victim_slots")
DECISION = ("unique_ids", "slots", "hit", "victim_ids", "victim_slots", "held_before")
ENGINES = [EngineKind.TWIN] + ([EngineKind.HOST] if host_build_works() else [])


def setup_for(sizes, capacities, depth, policy, holds, horizon, record, resident=None):
    if resident is None:
        resident = (
            tuple(np.full(c, -1, np.int64) for c in capacities),
            tuple(np.zeros(c, bool) for c in capacities),
            tuple(np.full(c, -1, np.int64) for c in capacities),
        )
    return PlanSetup(tuple(sizes), tuple(capacities), depth, policy, holds, horizon, record, *resident, 1, False, 1)


def plans_of(setup, source, start, stop, engine=None):
    """Plans of batches start..stop-1: the host twin (engine None) or the device planner."""
    planner = PlanAhead(setup, source, start)
    if engine is not None:
        planner.plans = DevicePlans(setup, engine if hasattr(engine, "xp") else make_engine(engine))
    return [planner.plan(b) for b in range(start, stop)]


def on_host(array) -> np.ndarray:
    """A planner's array as NumPy (a CuPy array on a GPU is copied back)."""
    return array.get() if hasattr(array, "get") else np.asarray(array)


def assert_same_plans(source, setup, start, stop, engine) -> int:
    evicted = 0
    for host, device in zip(plans_of(setup, source, start, stop), plans_of(setup, source, start, stop, engine)):
        for a, b in zip(host.tables, device.tables):
            for name in FIELDS:
                assert np.array_equal(getattr(a, name), on_host(getattr(b, name))), (host.index, a.decision.table, name)
            for name in DECISION:
                assert np.array_equal(getattr(a.decision, name), on_host(getattr(b.decision, name))), (
                    host.index,
                    a.decision.table,
                    name,
                )
            assert b.wait_for_write_back >= a.wait_for_write_back, (host.index, a.decision.table)
            evicted += len(a.decision.victim_ids)
    return evicted


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(2, 400), min_size=1, max_size=3),
    pooling=st.integers(1, 5),
    batch=st.integers(1, 24),
    zipf=st.floats(0, 1.6),
    depth=st.integers(1, 4),
    horizon=st.integers(0, 8),
    policy=st.sampled_from([VictimPolicy.FURTHEST, VictimPolicy.LRU]),
    holds=st.booleans(),
    record=st.booleans(),
    slack=st.floats(0, 1),
    seed=st.integers(0, 99),
    engine=st.sampled_from(ENGINES),
)
def test_the_device_planner_plans_as_the_host_twin(
    sizes, pooling, batch, zipf, depth, horizon, policy, holds, record, slack, seed, engine
):
    data = DataConfig(table_sizes=tuple(sizes), pooling=pooling, batch_size=batch, zipf=zipf, num_batches=30, seed=seed)
    source = SyntheticSource(data)
    steps = 20
    need = minimum_capacities(source, depth, 0, steps)
    capacities = [min(n, m + int(slack * (n - m))) for n, m in zip(sizes, need)]
    if not holds:  # without holds a batch's own rows may go: give room for one batch at least
        capacities = [max(c, m) for c, m in zip(capacities, minimum_capacities(source, 0, 0, steps))]
    setup = setup_for(sizes, capacities, depth, policy, holds, horizon, record)
    assert_same_plans(source, setup, 0, steps, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_from_a_scratchpad_left_by_an_earlier_call_it_evicts_as_the_twin(engine):
    """A full scratchpad (dirty rows, a clock) at batch 7, near the source's end: many victims."""
    data = DataConfig(table_sizes=(5_000, 90), pooling=6, batch_size=40, zipf=0.7, num_batches=25)
    source = SyntheticSource(data)
    capacities = [max(m, 70) for m in minimum_capacities(source, 2, 7, 25)]
    rng = np.random.default_rng(0)
    resident = (
        tuple(rng.permutation(n)[:c].astype(np.int64) for n, c in zip(data.table_sizes, capacities)),
        tuple(rng.random(c) < 0.5 for c in capacities),
        tuple(rng.integers(-1, 7, c).astype(np.int64) for c in capacities),
    )
    setup = setup_for(data.table_sizes, capacities, 2, VictimPolicy.FURTHEST, True, 12, True, resident)
    assert assert_same_plans(source, setup, 7, 25, engine) > 0


def test_every_engine_plans_as_the_host_twin(engine):
    """The same planner through each kernel engine: the twin, the host build, CuPy's launcher with a
    stand-in GPU (its launch checks and NVRTC build), and on a GPU CuPy itself (scripts/gpu_check.sh
    runs this one there: the device planner's arrays and streams on a real device)."""
    data = DataConfig(table_sizes=(3_000, 90, 700), pooling=5, batch_size=48, zipf=0.9, num_batches=40)
    source = SyntheticSource(data)
    capacities = minimum_capacities(source, 2, 0, 30)
    setup = setup_for(data.table_sizes, capacities, 2, VictimPolicy.FURTHEST, True, 8, True)
    assert assert_same_plans(source, setup, 0, 30, engine) > 0


def test_the_map_rebuilds_before_tombstones_fill_it_and_still_answers():
    """Erase and insert over and over in a small map, settling each round with the counts its
    inserts left on the device: it rebuilds, and every query stays right."""
    engine = make_engine(EngineKind.TWIN)
    capacity, rng = 16, np.random.default_rng(1)
    slot_map, slot_ids = DeviceSlotMap(capacity, engine, ArrayOps(np)), np.full(capacity, -1, np.int64)
    slot_numbers = np.arange(capacity, dtype=np.int64)
    for round_ in range(40):
        gone = np.flatnonzero(slot_ids >= 0)[: rng.integers(0, 6)]
        ids = slot_ids[gone].copy()
        slot_ids[gone] = -1
        slot_map.erase(ids)
        free = np.flatnonzero(slot_ids < 0)[:4]
        new = rng.choice(np.setdiff1d(np.arange(1000), slot_ids), size=len(free), replace=False)
        stats = np.zeros(2, np.uint64)
        slot_map.insert(new.astype(np.int64), free, stats)
        slot_ids[free] = new
        reused, failed = (int(s) for s in stats)
        slot_map.settle(int((slot_ids >= 0).sum()), len(ids), reused, failed, slot_ids, slot_numbers)
        everyone = np.arange(1000, dtype=np.int64)
        expected = np.full(1000, -1, np.int64)
        expected[slot_ids[slot_ids >= 0]] = np.flatnonzero(slot_ids >= 0)
        assert np.array_equal(slot_map.query(everyone), expected), round_
        assert slot_map.live + slot_map.tombstones <= 0.75 * slot_map.table_size
    assert slot_map.rebuilds > 0


def test_plan_stripes_are_refused_with_the_reason():
    setup = dataclasses.replace(setup_for((50,), (20,), 1, VictimPolicy.FURTHEST, True, 4, False), stripes=2)
    with pytest.raises(ValueError, match="plan_stripes must be 1"):
        DevicePlans(setup, make_engine(EngineKind.TWIN))
