"""Replaying an event trace into slot states, checked against a toy planner's own bookkeeping."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scratchkit.scratchpipe.events import EventLog, Stage
from scratchkit.course.pipeline_replay import SlotState, describe_stages, replay
from toy_pipeline import toy_log


def batches_of(seed, n=8, size=10, universe=30):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, universe, size) for _ in range(n)]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 3))
def test_replay_matches_the_toy_planner(seed, depth):
    batches = batches_of(seed)
    capacity = (depth + 1) * 10 + 5
    log, final_slots, held_at = toy_log(batches, capacity, depth)
    moments = replay(log, table=0, capacity=capacity)
    assert len(moments) == len(log.stages) == 6 * len(batches)
    for m in moments:
        expected = held_at[(m.event.stage, m.event.batch)]
        holders = {s: int(b) for s, b in enumerate(m.holders) if b >= 0}
        assert holders == expected, f"holders at {m.event}"
        assert m.count(SlotState.CONFLICT) == 0  # holds on: never a held victim
        # every state is consistent with the slot's content
        assert np.all((m.slot_ids < 0) == (m.states == SlotState.FREE))
    last = moments[-1]
    np.testing.assert_array_equal(last.slot_ids, final_slots)


def test_marks_of_plan_insert_and_write_back():
    batches = [np.array([1, 2, 3]), np.array([4, 5, 6]), np.array([1, 7])]
    log, _, _ = toy_log(batches, capacity=6, depth=1)
    moments = {(m.event.stage, m.event.batch): m for m in replay(log, capacity=6)}
    plan2, d2 = moments[(Stage.PLAN, 2)], log.plans[2]
    # batch 2: id 1 hits (slot 0); id 7 misses and must evict an unheld slot: batch 1's slots are held
    assert d2.hits == 1 and d2.victim_slots.size == 1 and d2.victim_slots[0] in (1, 2)
    assert np.flatnonzero(plan2.states == SlotState.VICTIM).tolist() == d2.victim_slots.tolist()
    assert "1 hits, 1 misses" in plan2.words and "evict" in plan2.words
    insert2 = moments[(Stage.INSERT, 2)]
    assert np.flatnonzero(insert2.states == SlotState.INSERTED).tolist() == d2.slots[~d2.hit].tolist()
    wb2 = moments[(Stage.WRITE_BACK, 2)]
    assert np.flatnonzero(wb2.states == SlotState.VICTIM).tolist() == d2.victim_slots.tolist()
    assert "Write-back(2)" in wb2.words and str(int(d2.victim_ids[0])) in wb2.words
    train0 = moments[(Stage.TRAIN, 0)]
    assert "Train(0)" in train0.words
    assert "plan: batch 1" in describe_stages(train0) and "train: batch 0 (running)" in describe_stages(train0)


def test_holds_off_shows_the_hazard():
    # capacity for one batch only: with holds off the planner evicts rows batch b-1 still needs
    batches = [np.array([1, 2, 3]), np.array([4, 5, 6]), np.array([7, 8, 9])]
    log, _, _ = toy_log(batches, capacity=3, depth=1, holds=False)
    moments = replay(log, capacity=3)
    hazards = [m for m in moments if m.count(SlotState.CONFLICT)]
    assert hazards and hazards[0].event.stage is Stage.PLAN
    assert "HAZARD" in hazards[0].words and "invariant 4" in hazards[0].words


def test_replay_refuses_bad_input():
    log, _, _ = toy_log(batches_of(1, n=3), capacity=40, depth=1)
    with pytest.raises(ValueError, match="outside the capacity"):
        replay(log, capacity=5)
    with pytest.raises(ValueError, match="no plan decisions for table 2"):
        replay(log, table=2)
    with pytest.raises(ValueError, match="capacity must be positive"):
        replay(EventLog(), capacity=0)


def test_capacity_defaults_to_the_largest_slot_used():
    log, _, _ = toy_log(batches_of(2, n=3), capacity=40, depth=1)
    used = max(int(d.slots.max()) for d in log.plans) + 1
    assert replay(log)[0].states.size == used
