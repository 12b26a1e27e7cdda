"""ScratchPipe's planner runs ahead, in a process or a thread: the same plans either way, whatever
Train's timing, errors that name their batch, and a fast victim choice equal to its slow twin."""
import os
import signal
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scratchkit.config import CacheParams, OptimizerConfig
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.events import Stage
from scratchkit.planner import NEVER, _smallest
from scratchkit.reference import ReferenceRun
from scratchkit.scratchpad import Scratchpad
from scratchkit.trainers.plan_ahead import MIN_STEPS_FOR_PROCESS, PlanAhead, PlanFeed, PlanIn
from scratchkit.trainers.scratchpipe import PipelineError, ScratchPipeTrainer


def small_scratchpad_config(tiny_config, depth=2):
    probe = ScratchPipeTrainer(tiny_config.replace(cache=CacheParams(capacity=500, depth=depth)))
    minimum = max(probe.minimum_capacities(0, 30))
    return tiny_config.replace(cache=CacheParams(capacity=minimum, depth=depth),
                               optimizer=OptimizerConfig(lr=0.1))


def max_diff_to_reference(trainer, source, steps):
    reference = ReferenceRun(trainer.config, source)
    reference.train(steps)
    return max(float((a - b).abs().max())
                for a, b in zip(trainer.embedding_weights(), reference.embedding_weights()))


def plans_of(config, where: PlanIn, stop: int) -> list:
    trainer = ScratchPipeTrainer(config)
    feed = PlanFeed(PlanAhead(trainer.plan_setup(), trainer.source), 0, stop, where, threading.Event())
    try:
        return [feed.next(b) for b in range(stop)]
    finally:
        feed.close()


# --- the victim choice: one partial sort on a packed key, against the three-key lexsort ------------
@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.data())
def test_fast_victim_choice_equals_the_lexsort(n, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    slots = np.sort(rng.choice(500, n, replace=False)).astype(np.int64)
    last_trained = rng.integers(-1, 6, n).astype(np.int64)          # ties are common
    use = rng.integers(1, 5, n).astype(np.int64)
    use[rng.random(n) < data.draw(st.floats(0, 1))] = NEVER
    count = data.draw(st.integers(1, n))
    expected = np.lexsort((slots, last_trained, -use))[:count]
    assert set(_smallest(count, slots, last_trained, use).tolist()) == set(expected.tolist())
    lru = np.lexsort((slots, last_trained))[:count]
    assert set(_smallest(count, slots, last_trained, None).tolist()) == set(lru.tolist())


# --- the same plans in a process and in a thread, whatever Train's pace ----------------------------
def test_a_planner_process_makes_the_plans_a_thread_makes(tiny_config):
    config = small_scratchpad_config(tiny_config)
    in_process, in_thread = (plans_of(config, where, 25) for where in (PlanIn.PROCESS, PlanIn.THREAD))
    evicted = 0
    for p, t in zip(in_process, in_thread):
        assert p.index == t.index
        for a, b in zip(p.tables, t.tables):
            for field in ("lookup_slots", "miss_ids", "miss_slots", "victim_ids", "victim_slots"):
                assert np.array_equal(getattr(a, field), getattr(b, field)), (p.index, field)
            assert a.wait_for_write_back == b.wait_for_write_back
            assert np.array_equal(a.decision.held_before, b.decision.held_before)
            evicted += len(a.decision.victim_ids)
    assert evicted > 0   # the scratchpad is at its minimum: the plans really evict


@pytest.mark.parametrize("planner", ["process", "thread"])
def test_plans_do_not_depend_on_how_fast_train_goes(tiny_config, planner):
    config = small_scratchpad_config(tiny_config)
    source = SyntheticSource(config.data)
    counts = []
    for hook in (None, lambda stage, b: time.sleep(0.02) if stage is Stage.TRAIN and b % 3 == 0 else None):
        trainer = ScratchPipeTrainer(config, source, planner=planner, stage_hook=hook)
        records = list(trainer.train(20))
        assert max_diff_to_reference(trainer, source, 20) == 0.0
        assert all(r.hits == r.lookups for r in records)
        counts.append([(r.fetched_rows, r.written_back_rows) for r in records])
    assert counts[0] == counts[1]


def test_where_plan_runs_is_chosen_and_checked():
    assert PlanIn.AUTO.resolve(MIN_STEPS_FOR_PROCESS - 1) is PlanIn.THREAD
    assert PlanIn.THREAD.resolve(10_000) is PlanIn.THREAD
    assert PlanIn.PROCESS.resolve(1) is PlanIn.PROCESS
    with pytest.raises(ValueError, match="unknown planner place 'gpu'; choose from auto, process, thread"):
        PlanIn.parse("gpu")


# --- errors in the planner process come back, naming the batch --------------------------------------
class BrokenSource(SyntheticSource):
    """Synthetic batches, except that batch `bad` fails, in the planner process only (the
    trainer's own size check reads every batch first, in the trainer's process)."""

    def __init__(self, data, bad: int, how: str):
        super().__init__(data)
        self.bad, self.how, self.parent = bad, how, os.getpid()

    def batch(self, index):
        if index == self.bad and os.getpid() != self.parent:
            if self.how == "exit":
                os._exit(3)
            raise ValueError(f"corrupt record in batch {index}")
        return super().batch(index)


def test_an_error_in_the_planner_process_names_plan_and_batch(tiny_config):
    config = small_scratchpad_config(tiny_config)
    source = BrokenSource(config.data, bad=14, how="raise")
    trainer = ScratchPipeTrainer(config, source, planner="process")
    # Plan(b) reads batches b+1 .. b+horizon to find next uses, so an earlier Plan meets batch 14
    with pytest.raises(PipelineError, match=r"stage plan failed on batch (\d+): ValueError: corrupt "
                                            r"record in batch 14") as failure:
        list(trainer.train(20))
    assert 14 - trainer.horizon <= failure.value.batch <= 14
    assert trainer.next_batch <= failure.value.batch
    assert max_diff_to_reference(trainer, SyntheticSource(config.data), trainer.next_batch) == 0.0


def test_a_planner_process_that_dies_is_reported(tiny_config):
    config = small_scratchpad_config(tiny_config)
    source = BrokenSource(config.data, bad=9, how="exit")
    trainer = ScratchPipeTrainer(config, source, planner="process")
    with pytest.raises(PipelineError, match=r"planner process exited \(code 3\) before sending batch \d+"):
        list(trainer.train(20))
    assert trainer.next_batch <= 9
    assert max_diff_to_reference(trainer, SyntheticSource(config.data), trainer.next_batch) == 0.0


def test_the_planner_process_leaves_ctrl_c_to_the_trainer(tiny_config):
    config = small_scratchpad_config(tiny_config)
    trainer = ScratchPipeTrainer(config)
    # far more batches than the pipe holds: the planner is still at work when Ctrl-C comes
    feed = PlanFeed(PlanAhead(trainer.plan_setup(), trainer.source), 0, 5_000, PlanIn.PROCESS,
                    threading.Event())
    try:
        first = feed.next(0)
        os.kill(feed.process.pid, signal.SIGINT)   # a terminal's Ctrl-C reaches the whole group
        time.sleep(0.1)
        assert feed.process.is_alive()
        assert [feed.next(b).index for b in range(1, 10)] == list(range(1, 10))
        assert first.index == 0
    finally:
        feed.close()
    assert feed.process is None


# --- a scratchpad whose map is the planner's ---------------------------------------------------------
def test_a_scratchpad_without_a_map_records_placements():
    pad = Scratchpad(100, 8, 4, engine="twin", device="cpu", keeps_map=False)
    pad.place([3, 5], [42, 7])
    assert pad.slot_ids[[3, 5]].tolist() == [42, 7] and len(pad) == 2
    pad.place([3, 6], [-1, 9])            # slot 3 freed, slot 6 filled
    assert pad.slot_ids[[3, 5, 6]].tolist() == [-1, 7, 9] and len(pad) == 2
    for call in (lambda: pad.query([7]), lambda: pad.insert([1], [0]), lambda: pad.erase([7])):
        with pytest.raises(RuntimeError, match="keeps no id -> slot map"):
            call()
    with pytest.raises(ValueError, match=r"ids\[0\] = 100 is out of range \[-1, 100\)"):
        pad.place([0], [100])
    with pytest.raises(ValueError, match=r"slots\[1\] = 2 repeats slots\[0\]"):
        pad.place([2, 2], [1, 2])
    with pytest.raises(RuntimeError, match="keeps its own map"):
        Scratchpad(100, 8, 4, engine="twin", device="cpu").place([0], [1])
