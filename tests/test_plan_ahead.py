"""ScratchPipe's planner runs ahead, in a process or a thread, or with every host stage in a process:
the same plans and results each way, whatever Train's timing, errors that name their batch, and
fast paths (victim choice, working sets, the plan ring) equal to their slow twins."""

import multiprocessing
import os
import signal
import threading
import time

import numpy as np
from functools import partial

import pytest
from hypothesis import given, settings, strategies as st

from scratchkit.config import CacheParams, OptimizerConfig
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.embedding.shared_memory import shared_array
from scratchkit.embedding.victims import first_by_keys
from scratchkit.measure.reference import ReferenceRun
from scratchkit.scratchpipe.drivers import MIN_STEPS_FOR_PROCESS, ForkedPlans, LocalPlans, PlanIn
from scratchkit.scratchpipe.events import EventLog, Stage, StageClock
from scratchkit.embedding.working_sets import WorkingSets
from scratchkit.scratchpipe.lookahead import NextUses
from scratchkit.scratchpipe.plan import least_urgent
from scratchkit.scratchpipe.plan_ahead import PlanAhead
from scratchkit.scratchpipe.ring import PlanRing
from scratchkit.trainers.scratchpipe import PipelineError, ScratchPipeTrainer
from stand_ins import scratchpipe_at


def small_scratchpad_config(tiny_config, depth=2):
    probe = ScratchPipeTrainer(tiny_config.replace(cache=CacheParams(capacity=500, depth=depth)))
    minimum = max(probe.minimum_capacities(0, 30))
    return tiny_config.replace(cache=CacheParams(capacity=minimum, depth=depth), optimizer=OptimizerConfig(lr=0.1))


def max_diff_to_reference(trainer, source, steps):
    reference = ReferenceRun(trainer.config, source)
    reference.train(steps)
    return max(float((a - b).abs().max()) for a, b in zip(trainer.embedding_weights(), reference.embedding_weights()))


def plans_of(config, where: PlanIn, stop: int) -> list:
    """Plans 0..stop-1 as the planner makes them in a forked process, or right here."""
    trainer = ScratchPipeTrainer(config)
    plan_ahead = PlanAhead(trainer.plan_setup(), trainer.source)
    clock = StageClock(EventLog(enabled=False))
    plans = ForkedPlans(plan_ahead, 0, stop, clock) if where is PlanIn.PROCESS else LocalPlans(plan_ahead, clock)
    try:
        return [plans.next(b, lambda: False) for b in range(stop)]
    finally:
        plans.close()


# --- the victim choice: a count per urgency and one partial sort, against the three-key lexsort ------
@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.data())
def test_fast_victim_choice_equals_the_lexsort(n, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    slots = np.sort(rng.choice(500, n, replace=False)).astype(np.int64)
    last_trained = rng.integers(-1, 6, n).astype(np.int64)  # ties are common
    urgency = rng.integers(1, 5, n).astype(np.int64)
    urgency[rng.random(n) < data.draw(st.floats(0, 1))] = 0  # never used again: first
    count = data.draw(st.integers(1, n))
    positions = np.arange(n)
    expected = first_by_keys((slots, last_trained, urgency), positions, count)  # the slow twin
    assert set(least_urgent(count, slots, last_trained, urgency).tolist()) == set(expected.tolist())
    lru = first_by_keys((slots, last_trained), positions, count)
    assert set(least_urgent(count, slots, last_trained, None).tolist()) == set(lru.tolist())


def test_next_uses_of_all_tables_at_once_equal_each_tables_own():
    rng = np.random.default_rng(3)
    sizes = (30, 7, 50)
    next_uses = NextUses(sizes)
    future = [[np.unique(rng.integers(0, n, 6)) for n in sizes] for _ in range(5)]  # batches b+1..b+5
    urgencies = next_uses([next_uses.joined(sets) for sets in future])
    for t, n in enumerate(sizes):
        for i in range(n):
            first = next((k for k in range(1, 6) if i in future[k - 1][t]), None)
            assert urgencies[t][i] == (0 if first is None else 5 + 1 - first), (t, i)


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
    assert evicted > 0  # the scratchpad is at its minimum: the plans really evict


@pytest.mark.parametrize("planner", ["host-process", "process", "thread", "device"])
def test_plans_do_not_depend_on_how_fast_train_goes(tiny_config, planner):
    config = small_scratchpad_config(tiny_config)
    source = SyntheticSource(config.data)
    counts = []
    for hook in (None, lambda stage, b: time.sleep(0.02) if stage is Stage.TRAIN and b % 3 == 0 else None):
        trainer = scratchpipe_at(planner, config, source, stage_hook=hook)
        records = list(trainer.train(20))
        assert max_diff_to_reference(trainer, source, 20) == 0.0
        assert all(r.hits == r.lookups for r in records)
        counts.append([(r.fetched_rows, r.written_back_rows) for r in records])
    assert counts[0] == counts[1]


def test_where_the_host_stages_run_is_chosen_and_checked():
    many = MIN_STEPS_FOR_PROCESS
    resolve = partial(PlanIn.AUTO.resolve, fork_safe=True)
    assert resolve(many - 1, host_rows=True, ordered=True) is PlanIn.THREAD  # forking costs more
    assert resolve(many, host_rows=True, ordered=True) is PlanIn.HOST_PROCESS
    assert resolve(many, host_rows=False, ordered=True) is PlanIn.PROCESS  # rows on a GPU
    assert resolve(many, host_rows=True, ordered=False) is PlanIn.PROCESS  # the hazard lab
    assert PlanIn.THREAD.resolve(10_000, host_rows=True, ordered=True) is PlanIn.THREAD
    assert PlanIn.PROCESS.resolve(1, host_rows=True, ordered=True, fork_safe=True) is PlanIn.PROCESS
    with pytest.raises(ValueError, match="needs the scratchpad in host memory"):
        PlanIn.HOST_PROCESS.resolve(many, host_rows=False, ordered=True, fork_safe=True)
    with pytest.raises(ValueError, match="write-back-order hazard cannot happen there"):
        PlanIn.HOST_PROCESS.resolve(many, host_rows=True, ordered=False, fork_safe=True)
    # the device planner: from threads on a GPU, inline where its "device" is the CPU (inline.py),
    # on threads for the hazard lab there too (Collect must run apart from the Write-backs)
    assert PlanIn.DEVICE.resolve(many, host_rows=False, ordered=True, on_gpu=True) is PlanIn.DEVICE
    assert PlanIn.DEVICE.resolve(many, host_rows=False, ordered=True) is PlanIn.INLINE
    assert PlanIn.DEVICE.resolve(many, host_rows=False, ordered=False) is PlanIn.DEVICE
    assert PlanIn.INLINE.resolve(1, host_rows=True, ordered=True, on_gpu=True) is PlanIn.INLINE
    with pytest.raises(ValueError, match="write-back-order hazard cannot happen there"):
        PlanIn.INLINE.resolve(many, host_rows=False, ordered=False)
    with pytest.raises(ValueError, match="unknown place 'gpu'; choose from auto, host-process, process, thread"):
        PlanIn.parse("gpu")


def test_with_the_host_stages_in_a_process_the_trainer_runs_no_threads(tiny_config):
    config = small_scratchpad_config(tiny_config)
    trainer = ScratchPipeTrainer(config)
    assert trainer.where_host_stages_run(20) is PlanIn.HOST_PROCESS
    before = threading.active_count()
    during = [threading.active_count() for _ in trainer.train(20)]
    assert set(during) == {before}
    threaded = ScratchPipeTrainer(config, where="process")
    assert max(threading.active_count() for _ in threaded.train(20)) > before


def test_the_device_planner_on_a_cpu_runs_inline_in_the_trainers_thread(tiny_config):
    """Its stages are NumPy calls there: on threads they only took turns with Train for the GIL.
    The one thread beside Train is the batch loader's, making the batches Plan reads."""
    from scratchkit.trainers.scratchpipe import DeviceScratchPipeTrainer

    trainer = DeviceScratchPipeTrainer(small_scratchpad_config(tiny_config))
    assert trainer.where_host_stages_run(20) is PlanIn.INLINE
    before, records, during = {t.name for t in threading.enumerate()}, [], set()
    for record in trainer.train(20):
        records.append(record)
        during |= {t.name for t in threading.enumerate()} - before
    assert during == {"batch-loader"} and all(r.hits == r.lookups for r in records)
    assert max_diff_to_reference(trainer, trainer.source, 20) == 0.0
    assert all(r.stage_seconds["plan"] > 0 and r.stage_seconds["insert"] > 0 for r in records)


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


@pytest.mark.parametrize("planner", ["process", "host-process"])
def test_an_error_in_the_planner_process_names_plan_and_batch(tiny_config, planner):
    config = small_scratchpad_config(tiny_config)
    source = BrokenSource(config.data, bad=14, how="raise")
    trainer = ScratchPipeTrainer(config, source, where=planner)
    # Plan(b) reads batches b+1 .. b+horizon to find next uses, so an earlier Plan meets batch 14
    with pytest.raises(
        PipelineError,
        match=r"stage plan failed on batch (\d+): ValueError: corrupt "
        r"record in batch 14",
    ) as failure:
        list(trainer.train(20))
    assert 14 - trainer.horizon <= failure.value.batch <= 14
    assert trainer.next_batch <= failure.value.batch
    assert max_diff_to_reference(trainer, SyntheticSource(config.data), trainer.next_batch) == 0.0


@pytest.mark.parametrize("planner,name", [("process", "planner"), ("host-process", "host")])
def test_a_planner_process_that_dies_is_reported(tiny_config, planner, name):
    config = small_scratchpad_config(tiny_config)
    source = BrokenSource(config.data, bad=9, how="exit")
    trainer = ScratchPipeTrainer(config, source, where=planner)
    with pytest.raises(
        PipelineError,
        match=r"stage plan failed on batch \d+: RuntimeError: the "
        + name
        + r" process exited with code 3 (before sending|while the trainer waited for) batch \d+",
    ):
        list(trainer.train(20))
    assert trainer.next_batch <= 9
    assert max_diff_to_reference(trainer, SyntheticSource(config.data), trainer.next_batch) == 0.0


def test_the_planner_process_leaves_ctrl_c_to_the_trainer(tiny_config):
    config = small_scratchpad_config(tiny_config)
    trainer = ScratchPipeTrainer(config)
    # far more batches than the ring holds: the planner is still at work when Ctrl-C comes
    plans = ForkedPlans(PlanAhead(trainer.plan_setup(), trainer.source), 0, 5_000, StageClock(EventLog(enabled=False)))
    try:
        first = plans.next(0, lambda: False)
        process = plans.forked.process
        os.kill(process.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
        time.sleep(0.1)
        assert process.is_alive()
        assert [plans.next(b, lambda: False).index for b in range(1, 10)] == list(range(1, 10))
        assert first.index == 0
    finally:
        plans.close()
    assert not process.is_alive()


def test_the_host_process_leaves_ctrl_c_to_the_trainer(tiny_config):
    config = small_scratchpad_config(tiny_config)
    source = SyntheticSource(config.data)
    trainer = ScratchPipeTrainer(config, source, where="host-process")
    records = trainer.train(40)
    next(records)
    (host,) = multiprocessing.active_children()
    os.kill(host.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole process group
    time.sleep(0.1)
    assert host.is_alive()
    assert [r.step for r in records] == list(range(1, 40))
    assert max_diff_to_reference(trainer, source, 40) == 0.0


# --- the host process's fast paths against their slow twins ---------------------------------------
@settings(max_examples=100, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 300), st.integers(0, 2**32 - 1))
def test_working_sets_equal_np_unique(num_rows, n, seed):
    ids = np.random.default_rng(seed).integers(0, num_rows, n)
    working_sets = WorkingSets(num_rows)
    for _ in range(2):  # the bitmap is reused: the second call must not see the first's ids
        unique, inverse = working_sets(ids)
        expected_unique, expected_inverse, expected_counts = np.unique(ids, return_inverse=True, return_counts=True)
        assert np.array_equal(unique, expected_unique) and unique.dtype == np.int64
        assert np.array_equal(inverse, expected_inverse)
        unique, inverse, counts = working_sets(ids, counts=True)  # as the demand caches call it
        assert np.array_equal(unique, expected_unique) and np.array_equal(inverse, expected_inverse)
        assert np.array_equal(counts, expected_counts) and counts.dtype == expected_counts.dtype
        ids = ids[::-1] // 2


def test_the_plan_ring_returns_what_it_was_given_in_private_memory():
    ring = PlanRing(multiprocessing.get_context("fork"), slot_bytes=4096, slots=2)
    small = {
        "ids": np.arange(7),
        "mask": np.array([True, False, True]),
        "n": 3,
        "rows": np.ones((4, 3), dtype=np.float32),
    }
    big = {"ids": np.arange(4096)}  # 32 KB: too big for a slot
    for message, obj in [(ring.pack(small), small), (ring.pack(big), big), (ring.pack(small), small)]:
        out = ring.unpack(message)
        assert out.keys() == obj.keys() and out["ids"].flags.writeable
        for key, value in obj.items():
            assert np.array_equal(out[key], value) and np.asarray(out[key]).dtype == np.asarray(value).dtype
    assert ring.pack(big)[0] == "inline"
    # every slot in use and nobody reading: a stopped trainer ends the wait
    ring.pack(small), ring.pack(small)
    assert ring.pack(small, halted=lambda: True) is None


def test_shared_arrays_are_shared_with_a_forked_child():
    array = shared_array((3, 2), np.float32)
    private = np.zeros((3, 2), np.float32)
    context = multiprocessing.get_context("fork")
    child = context.Process(target=lambda: (array.__setitem__(1, 7.0), private.__setitem__(1, 7.0)))
    child.start()
    child.join()
    assert child.exitcode == 0
    assert array[1].tolist() == [7.0, 7.0] and array[0].tolist() == [0.0, 0.0]
    assert private[1].tolist() == [0.0, 0.0]  # ordinary memory is the child's own copy


@settings(max_examples=200, deadline=None)
@given(capacity=st.integers(0, 300), stripes=st.integers(1, 7), data=st.data())
def test_shard_slots_split_a_table_and_the_sharded_minimum_is_the_least_that_fits(capacity, stripes, data):
    from scratchkit.scratchpipe.stripes import StripeOf, stripe_slots, striped_minimum

    ranges = stripe_slots(capacity, stripes)
    # the ranges tile [0, capacity); a whole table's split gives each stripe exactly its ids
    assert [o for o, _ in ranges] == list(np.cumsum([0] + [n for _, n in ranges])[:-1])
    assert sum(n for _, n in ranges) == capacity
    assert [n for _, n in ranges] == [StripeOf(s, stripes).local_rows(capacity) for s in range(stripes)]
    needs = data.draw(st.lists(st.integers(0, 40), min_size=stripes, max_size=stripes))
    fits = lambda c: all(n >= need for (_, n), need in zip(stripe_slots(c, stripes), needs))
    least = striped_minimum(needs, stripes)
    assert fits(least) and not any(fits(c) for c in range(least))  # brute force


def test_a_machine_with_a_cuda_device_never_forks_the_host_stages():
    """A process forked once CUDA has started may hang: where fork is not safe the host stages run
    on threads however long the call, and a forking place asked for by name is refused, saying so."""
    many = 10 * MIN_STEPS_FOR_PROCESS
    for host_rows, ordered in ((True, True), (False, True), (True, False)):
        assert PlanIn.AUTO.resolve(many, host_rows=host_rows, ordered=ordered, fork_safe=False) is PlanIn.THREAD
    for where in (PlanIn.PROCESS, PlanIn.HOST_PROCESS):
        with pytest.raises(ValueError, match="forked once CUDA has started may hang"):
            where.resolve(many, host_rows=True, ordered=True, fork_safe=False)
