"""ScratchPipe's C++ planner (plan_loop.cpp) makes exactly the decisions of its NumPy twin
(scratchpipe/plan.py): every array of every plan, over random data, capacities and settings."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from scratchkit.config import DataConfig, VictimPolicy
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.scratchpipe.plan_ahead import PlanAhead, PlanSetup
from scratchkit.scratchpipe.plan_native import native_planner_available

pytestmark = pytest.mark.skipif(not native_planner_available(), reason="no C++ compiler here")
FIELDS = ("lookup_slots", "miss_ids", "miss_slots", "victim_ids", "victim_slots")
DECISION = ("unique_ids", "slots", "hit", "victim_ids", "victim_slots", "held_before")


def empty_setup(sizes, capacities, depth, policy, holds, horizon, record, native, threads=1, stripes=1):
    return PlanSetup(
        tuple(sizes),
        tuple(capacities),
        depth,
        policy,
        holds,
        horizon,
        record,
        tuple(np.full(c, -1, np.int64) for c in capacities),
        tuple(np.zeros(c, bool) for c in capacities),
        tuple(np.full(c, -1, np.int64) for c in capacities),
        threads,
        native,
        stripes,
    )


def assert_same_plans(source, setup_args, start, stop, resident=None, stripes=1, threads=1):
    """Plan batches start..stop-1 with both planners from the same start; compare everything."""
    plans = []
    for native in (True, False):
        setup = empty_setup(*setup_args, native=native, stripes=stripes, threads=threads)
        if resident is not None:  # a scratchpad that is not empty (a later train() call)
            slot_ids, dirty, clock = resident
            setup = PlanSetup(
                *[
                    getattr(setup, f)
                    for f in ("table_sizes", "capacities", "depth", "policy", "holds", "horizon", "record_events")
                ],
                slot_ids,
                dirty,
                clock,
                threads,
                native,
                stripes,
            )
        planner = PlanAhead(setup, source, start)
        plans.append([planner.plan(b) for b in range(start, stop)])
    evicted = 0
    for native, twin in zip(*plans):
        for a, b in zip(native.tables, twin.tables):
            for name in FIELDS:
                assert np.array_equal(getattr(a, name), getattr(b, name)), (native.index, name)
            for name in DECISION:
                assert np.array_equal(getattr(a.decision, name), getattr(b.decision, name)), (native.index, name)
            assert a.wait_for_write_back == b.wait_for_write_back
            evicted += len(a.decision.victim_ids)
    return evicted


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(2, 400), min_size=1, max_size=3),
    pooling=st.integers(1, 5),
    batch=st.integers(1, 24),
    zipf=st.floats(0, 1.6),
    depth=st.integers(1, 4),
    horizon=st.integers(0, 8),
    policy=st.sampled_from(list(VictimPolicy)[:2]),
    holds=st.booleans(),
    record=st.booleans(),
    slack=st.floats(0, 1),
    seed=st.integers(0, 99),
    stripes=st.sampled_from([1, 1, 2, 3]),
)
def test_the_loop_plans_as_its_twin(
    sizes, pooling, batch, zipf, depth, horizon, policy, holds, record, slack, seed, stripes
):
    data = DataConfig(table_sizes=tuple(sizes), pooling=pooling, batch_size=batch, zipf=zipf, num_batches=30, seed=seed)
    source = SyntheticSource(data)
    steps = 20
    need = minimum_capacities(source, depth, 0, steps, stripes)
    capacities = [min(n, m + int(slack * (n - m))) for n, m in zip(sizes, need)]
    if not holds:  # without holds a batch's own rows may go: give room for one batch at least
        capacities = [max(c, m) for c, m in zip(capacities, minimum_capacities(source, 0, 0, steps, stripes))]
    assert_same_plans(
        source,
        (sizes, capacities, depth, policy, holds, horizon, record),
        0,
        steps,
        stripes=stripes,
        threads=1 + seed % 3,
    )


def test_both_evict_from_a_scratchpad_left_by_an_earlier_call():
    """Starting from a full scratchpad (dirty rows, a clock), at batch 7, near the source's end."""
    data = DataConfig(table_sizes=(5_000, 90), pooling=6, batch_size=40, zipf=0.7, num_batches=25)
    source = SyntheticSource(data)
    capacities = [max(m, 70) for m in minimum_capacities(source, 2, 7, 25)]
    rng = np.random.default_rng(0)
    resident = (
        [rng.permutation(n)[:c].astype(np.int64) for n, c in zip(data.table_sizes, capacities)],
        [rng.random(c) < 0.5 for c in capacities],
        [rng.integers(-1, 7, c).astype(np.int64) for c in capacities],
    )
    setup = (data.table_sizes, capacities, 2, VictimPolicy.FURTHEST, True, 12, True)
    assert assert_same_plans(source, setup, 7, 25, resident) > 0
