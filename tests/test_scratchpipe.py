"""ScratchPipe: each invariant of docs/design.md has a test here that fails if it breaks.

The reference is plain PyTorch (scratchkit.measure.reference): nn.EmbeddingBag(sparse=True) + torch.optim,
trained on the same batches from the same initial weights.
"""

import signal
import time
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from scratchkit.config import (
    SummationOrder,
    CacheParams,
    DataConfig,
    ModelConfig,
    OptimizerConfig,
    OptimizerKind,
    TrainConfig,
)
from scratchkit.data.in_memory import InMemoryDataset
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.device import Device
from scratchkit.scratchpipe.events import Stage
from scratchkit.measure.reference import ReferenceRun
from scratchkit.trainers import make_trainer
from scratchkit.trainers.scratchpipe import Hazards, PipelineError, ScratchPipeTrainer
from scratchkit.measure.verify import verify
from stand_ins import StandInCuda, scratchpipe_at


def config_with(base, capacity, depth, policy="furthest", kind=OptimizerKind.SGD):
    return base.replace(
        cache=CacheParams(capacity=capacity, depth=depth, victim_policy=policy),
        optimizer=OptimizerConfig(kind=kind, lr=0.1),
    )


def max_diff_to_reference(trainer, source, steps):
    reference = ReferenceRun(trainer.config, source)
    reference.train(steps)
    pairs = list(zip(trainer.embedding_weights(), reference.embedding_weights()))
    pairs += list(zip([p.detach() for p in trainer.model.parameters()], reference.dense_parameters()))
    return max(float((a - b).abs().max()) for a, b in pairs)


def smallest_capacity(config, depth, steps):
    probe = ScratchPipeTrainer(config_with(config, max(config.data.table_sizes), depth))
    return max(probe.minimum_capacities(0, steps))


# --- invariants 1 and 2: 100% hits in Train, exactly the baseline's parameters -------------------
@pytest.mark.parametrize("depth", [1, 2, 4])
@pytest.mark.parametrize("kind", list(OptimizerKind))
def test_exact_and_all_hits_from_minimum_to_whole_table(tiny_config, depth, kind):
    steps = 12
    minimum = smallest_capacity(tiny_config, depth, steps)
    for capacity in (minimum, (minimum + 500) // 2, 500):
        config = config_with(tiny_config, capacity, depth, kind=kind)
        (result,) = verify(config, ["scratchpipe"], steps)
        assert result.max_abs_diff == 0.0, (capacity, result)
        assert result.extras["train_hit_rate"] == 1.0


@pytest.mark.parametrize("where", ["thread", "host-process"])
def test_minimum_capacity_run_really_evicts(tiny_config, where):
    from scratchkit.scratchpipe.drivers import PlanIn

    minimum = smallest_capacity(tiny_config, 2, 20)
    with make_trainer("scratchpipe", config_with(tiny_config, minimum, 2)) as trainer:
        trainer.plan_in = PlanIn(where)
        trainer.events.enabled = False  # as a benchmark runs it: the plans cross without the trace's arrays
        records = list(trainer.train(20))
    assert sum(r.written_back_rows for r in records) > 0
    assert sum(r.fetched_rows for r in records) > minimum
    assert all(r.hits == r.lookups for r in records)
    # a step that wrote victims back chose them: the record says in how many tables (the cost
    # model prices the victim choice by it), wherever the host stages ran
    assert all(r.evicting_tables >= 1 for r in records if r.written_back_rows)
    assert all(r.evicting_tables <= len(tiny_config.data.table_sizes) for r in records)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(2, 80), min_size=1, max_size=3),
    pooling=st.integers(1, 4),
    batch=st.integers(1, 10),
    zipf=st.floats(0, 2),
    depth=st.integers(1, 4),
    policy=st.sampled_from(["furthest", "lru"]),
    kind=st.sampled_from(list(OptimizerKind)),
    slack=st.floats(0, 1),
    seed=st.integers(0, 999),
)
def test_property_random_traces_are_exact_with_all_hits(sizes, pooling, batch, zipf, depth, policy, kind, slack, seed):
    base = TrainConfig(
        data=DataConfig(table_sizes=tuple(sizes), pooling=pooling, batch_size=batch, num_dense=2, zipf=zipf, seed=seed),
        model=ModelConfig(dim=4, bottom_mlp=(4,), top_mlp=(1,)),
        seed=seed,
    )
    steps = 8
    minimum = smallest_capacity(base, depth, steps)
    capacity = minimum + int(slack * (max(sizes) - minimum))
    (result,) = verify(config_with(base, capacity, depth, policy, kind), ["scratchpipe"], steps)
    assert result.max_abs_diff == 0.0 and result.extras["train_hit_rate"] == 1.0


# --- invariant 5: the size check --------------------------------------------------------------------
def test_too_small_a_scratchpad_is_refused_naming_a_capacity_that_fits_every_table(tiny_config):
    # the smallest table first: its minimum is the smallest, and not enough for the others
    tiny_config = tiny_config.replace(data=replace(tiny_config.data, table_sizes=(200, 300, 500)))
    minimum_per_table = ScratchPipeTrainer(config_with(tiny_config, 500, 2)).minimum_capacities(0, 10)
    too_small = min(minimum_per_table) - 1
    trainer = make_trainer("scratchpipe", config_with(tiny_config, too_small, 2))
    with pytest.raises(ValueError, match=r"too small for look-ahead depth 2: .* up to \d+ distinct rows") as err:
        next(iter(trainer.train(10)))
    # every table is too small, so the first one is named, with its exact minimum...
    assert str(err.value).startswith(f"table 0: a scratchpad of {too_small} rows")
    assert f"up to {minimum_per_table[0]} distinct rows" in str(err.value)
    # ...and the one capacity to ask for is the largest minimum, in Python's words (no CLI flag)
    fits_all = max(minimum_per_table)
    assert f"CacheParams(capacity={fits_all})" in str(err.value) and "--" not in str(err.value)
    assert trainer.next_batch == 0
    # following the advice works: table 0's own minimum would not, where another table needs more
    assert minimum_per_table[0] < fits_all
    with pytest.raises(ValueError, match="table [12]: a scratchpad"):
        next(iter(make_trainer("scratchpipe", config_with(tiny_config, minimum_per_table[0], 2)).train(10)))
    assert len(list(make_trainer("scratchpipe", config_with(tiny_config, fits_all, 2)).train(10))) == 10


# --- invariants 3 and 4, and the hazard lab ----------------------------------------------------------
def hand_made_source(batches: list[list[int]], num_rows: int = 32) -> InMemoryDataset:
    """One table, one id per sample; batch i holds the ids given."""
    ids = np.array([i for b in batches for i in b], dtype=np.int64)
    n = len(ids)
    rng = np.random.default_rng(0)
    return InMemoryDataset(
        dense=rng.standard_normal((n, 2)),
        ids=ids[None, :],
        labels=(np.arange(n) % 2).astype(np.float32),
        table_sizes=[num_rows],
        batch_size=len(batches[0]),
    )


def hand_made_config(source, capacity, depth, policy):
    return TrainConfig(
        data=DataConfig(table_sizes=source.table_sizes, pooling=1, batch_size=source.batch_size, num_dense=2),
        model=ModelConfig(dim=4, bottom_mlp=(4,), top_mlp=(1,)),
        optimizer=OptimizerConfig(lr=0.5),
        cache=CacheParams(capacity=capacity, depth=depth, victim_policy=policy),
    )


def slow(stage: Stage, batch: int, seconds: float = 0.3):
    def hook(s, b):
        if s is stage and b == batch:
            time.sleep(seconds)

    return hook


# b3 re-uses A = {0..3}, still resident but least recently *trained*; b4 needs 4 victims.
# With holds, A is held by b3 (in flight) and the victims are B; without, LRU evicts A under b3.
HOLD_TRACE = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [0, 1, 2, 3], [12, 13, 14, 15], [4, 5, 6, 7]]


@pytest.mark.parametrize("holds", [True, False])
def test_hazard_no_holds_evicts_a_batch_in_flight(holds):
    source = hand_made_source(HOLD_TRACE)
    config = hand_made_config(source, capacity=12, depth=1, policy="lru")
    trainer = ScratchPipeTrainer(
        config, source, hazards=Hazards(holds=holds), stage_hook=slow(Stage.TRAIN, 3)
    )  # Insert(4) runs first
    records = list(trainer.train(len(HOLD_TRACE)))
    diff = max_diff_to_reference(trainer, source, len(HOLD_TRACE))
    if holds:
        assert diff == 0.0 and all(r.hits == r.lookups for r in records)
        victims = [p for p in trainer.events.plans if p.batch == 4][0]
        assert set(victims.victim_ids.tolist()) == {4, 5, 6, 7}
        assert not set(victims.victim_slots.tolist()) & set(victims.held_before.tolist())
    else:  # invariant 4 broke, so invariant 1 broke: batch 3 trained on rows of other ids
        assert records[3].hits < records[3].lookups
        assert diff > 0


# b2 evicts A = {0..3} (dirty, least recently trained); b3 needs A again, so its Collect must wait
# for b2's write-back. (LRU makes the victim A whether or not Train(1) has finished.)
ORDER_TRACE = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [0, 1, 2, 3], [8, 9, 10, 11]]


@pytest.mark.parametrize("ordered", [True, False])
def test_hazard_no_write_back_order_reads_stale_rows(ordered):
    source = hand_made_source(ORDER_TRACE)
    config = hand_made_config(source, capacity=8, depth=1, policy="lru")
    trainer = ScratchPipeTrainer(
        config, source, hazards=Hazards(write_back_order=ordered), stage_hook=slow(Stage.WRITE_BACK, 2)
    )
    records = list(trainer.train(len(ORDER_TRACE)))
    diff = max_diff_to_reference(trainer, source, len(ORDER_TRACE))
    evicted = [p for p in trainer.events.plans if p.batch == 2][0]
    assert set(evicted.victim_ids.tolist()) == {0, 1, 2, 3}
    if ordered:
        assert diff == 0.0 and sum(r.stale_reads for r in records) == 0
    else:  # invariant 3 broke: batch 3 read A's rows before batch 0's updates reached the host
        assert records[3].stale_reads == 4
        assert diff > 0


def test_event_log_shows_stage_order_overlap_and_victims_never_held(tiny_config):
    minimum = smallest_capacity(tiny_config, 2, 15)
    trainer = ScratchPipeTrainer(config_with(tiny_config, minimum, 2), stage_hook=slow(Stage.TRAIN, 5, 0.3))
    list(trainer.train(15))
    order = [Stage.PLAN, Stage.COLLECT, Stage.TRANSFER, Stage.INSERT, Stage.TRAIN]
    for b in range(15):
        events = {e.stage: e for e in trainer.events.stages_of(b)}
        assert set(order) <= set(events)
        starts = [events[s].start for s in order]
        assert starts == sorted(starts), b
    # pipelining: Plan(6) began before Train(5) ended
    plan6 = [e for e in trainer.events.stages_of(6) if e.stage is Stage.PLAN][0]
    train5 = [e for e in trainer.events.stages_of(5) if e.stage is Stage.TRAIN][0]
    assert plan6.start < train5.end
    for decision in trainer.events.plans:  # invariant 4 on the record of every decision
        assert not np.intersect1d(decision.victim_slots, decision.held_before).size
        assert decision.hits + decision.misses == len(decision.unique_ids)


def test_furthest_next_use_keeps_what_is_needed_soon():
    # Plan(3) counts Train(1) as done, so it may evict {0,1} (trained at 0, needed by b4) or {2,3}
    # (trained at 1, never needed again). LRU evicts {0,1} and fetches them again for b4;
    # furthest-next-use evicts {2,3}: 8 rows fetched against 10.
    trace = [[0, 1], [2, 3], [8, 9], [4, 5], [0, 1], [8, 9]]
    fetched = {}
    for policy in ("furthest", "lru"):
        source = hand_made_source(trace)
        trainer = ScratchPipeTrainer(hand_made_config(source, capacity=6, depth=1, policy=policy), source)
        fetched[policy] = sum(r.fetched_rows for r in trainer.train(len(trace)))
        assert max_diff_to_reference(trainer, source, len(trace)) == 0.0
    assert fetched == {"furthest": 8, "lru": 10}


# --- invariant 6: flush, interruption, checkpoint -----------------------------------------------------
def failing(stage: Stage, batch: int):
    def hook(s, b):
        if s is stage and b == batch:
            raise OSError(f"injected failure in {s.value}")

    return hook


# the pipelines: every host stage in one forked process (a CPU run's default), worker threads with
# Plan in a process, every stage in the trainer's thread, and the device planner's (scratchpipe-
# device: Plan and the row moves on the device) as a CPU runs it (inline) and as a GPU does (from
# threads: the stand-in CUDA runtime of tests/stand_ins.py)
PIPELINES = ["host-process", "process", "inline", "device", "device-on-threads"]


def pipeline(planner: str, config, source=None, **options):
    """The trainer of one of PIPELINES."""
    if planner == "device-on-threads":
        return scratchpipe_at("device", config, source, device=Device("cpu", StandInCuda()), **options)
    return scratchpipe_at(planner, config, source, **options)


def max_diff_to_baseline(trainer, source, steps, planner: str) -> float:
    """The largest difference to what the run must equal: PyTorch's reference on a CPU. Through the
    stand-in CUDA runtime Train runs tbe.cu's kernels, which add each id's gradients in lookup
    order, PyTorch's result to rounding only; there the baseline is gpu-only trained on the CPU
    by id (summation_order="by-id", SGD), which the device path equals bit for bit
    (tests/test_device_tbe.py)."""
    if planner != "device-on-threads":
        return max_diff_to_reference(trainer, source, steps)
    with make_trainer("gpu-only", trainer.config.replace(summation_order=SummationOrder.BY_ID), source) as base:
        list(base.train(steps))
        pairs = list(zip(trainer.embedding_weights(), base.embedding_weights()))
        pairs += list(zip(trainer.model.parameters(), base.model.parameters()))
    return max(float((a.detach() - b.detach()).abs().max()) for a, b in pairs)


@pytest.mark.parametrize("planner", PIPELINES)
@pytest.mark.parametrize("stage", [Stage.PLAN, Stage.COLLECT, Stage.INSERT, Stage.WRITE_BACK, Stage.TRAIN])
def test_a_failing_stage_names_itself_and_loses_nothing(tiny_config, stage, planner):
    minimum = smallest_capacity(tiny_config, 2, 20)
    source = SyntheticSource(tiny_config.data)
    trainer = pipeline(planner, config_with(tiny_config, minimum, 2), source, stage_hook=failing(stage, 9))
    with pytest.raises((PipelineError, OSError)) as err:
        list(trainer.train(20))
    if stage is not Stage.TRAIN:
        assert f"stage {stage.value} failed on batch 9" in str(err.value)
    # Write-back(9) comes after Insert(9), so Train may get further before it fails: on threads, the
    # inserter goes on until the write-back queue (D+1 = 3 batches) is full and holds one more
    # inserted batch, and Train trains every inserted batch: Train(13) at most
    last = 9 + (2 + 1) + 2 if stage is Stage.WRITE_BACK else 9
    assert 1 <= trainer.next_batch <= last
    assert max_diff_to_baseline(trainer, source, trainer.next_batch, planner) == 0.0
    # and training goes on from where it stopped, still exact
    trainer.stage_hook = None
    list(trainer.train(20 - trainer.next_batch))
    assert max_diff_to_baseline(trainer, source, 20, planner) == 0.0


@pytest.fixture(params=["default", "ignored"])
def sigint_handler(request):
    """SIGINT as the test runner found it, or ignored, as in a background job (`pytest &`)."""
    before = signal.getsignal(signal.SIGINT)
    if request.param == "ignored":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("planner", PIPELINES)
def test_keyboard_interrupt_stops_between_steps_and_loses_nothing(tiny_config, planner, sigint_handler):
    minimum = smallest_capacity(tiny_config, 2, 30)
    source = SyntheticSource(tiny_config.data)

    pressed = []

    def ctrl_c(stage, b):
        # as if the user pressed Ctrl-C mid-run: once Plan has reached batch 8 and Train has
        # finished a step (on threads, Plan can reach 8 before Train(0) ends on a busy machine)
        if stage is Stage.PLAN and b >= 8 and trainer.next_batch >= 1 and not pressed:
            pressed.append(b)
            signal.raise_signal(signal.SIGINT)

    trainer = pipeline(planner, config_with(tiny_config, minimum, 2), source, stage_hook=ctrl_c)
    seen = []
    with pytest.raises(KeyboardInterrupt):
        for record in trainer.train(30):
            seen.append(record.step)
    assert 1 <= trainer.next_batch < 30
    # every step taken was yielded: the one in flight when Ctrl-C came, or none if it was waiting
    assert seen == list(range(trainer.next_batch))
    assert max_diff_to_baseline(trainer, source, trainer.next_batch, planner) == 0.0
    assert signal.getsignal(signal.SIGINT) is sigint_handler  # put back as it was


@pytest.mark.parametrize("planner", PIPELINES)
def test_leaving_the_loop_early_flushes(tiny_config, planner):
    minimum = smallest_capacity(tiny_config, 3, 25)
    source = SyntheticSource(tiny_config.data)
    trainer = pipeline(planner, config_with(tiny_config, minimum, 3), source)
    for record in trainer.train(25):
        if record.step == 10:
            break
    assert trainer.next_batch == 11
    assert max_diff_to_baseline(trainer, source, 11, planner) == 0.0


def test_checkpoint_and_resume_equal_an_uninterrupted_run(tiny_config):
    config = config_with(tiny_config, smallest_capacity(tiny_config, 2, 24), 2, kind=OptimizerKind.ROWWISE_ADAGRAD)
    source = SyntheticSource(config.data)
    straight = ScratchPipeTrainer(config, source)
    list(straight.train(24))
    first = ScratchPipeTrainer(config, source)
    list(first.train(10))
    saved = first.checkpoint()
    list(first.train(14))  # go on in the same trainer...
    resumed = ScratchPipeTrainer(config, source)  # ...and in a fresh one from the checkpoint
    resumed.load_checkpoint(saved)
    list(resumed.train(14))
    for other in (first, resumed):
        for a, b in zip(straight.embedding_weights(), other.embedding_weights()):
            assert torch.equal(a, b)
        for a, b in zip(straight.embedding_state(), other.embedding_state()):
            assert torch.equal(a, b)
        for a, b in zip(straight.model.parameters(), other.model.parameters()):
            assert torch.equal(a, b)


def test_train_step_keeps_the_scratchpad_warm(tiny_config):
    trainer = ScratchPipeTrainer(config_with(tiny_config, 200, 1))
    first = trainer.train_step()
    second = trainer.train_step()
    assert first.fetched_rows > 0
    # batch 1 re-uses rows batch 0 brought in: fewer fetches than a cold scratchpad would need
    cold = ScratchPipeTrainer(config_with(tiny_config, 200, 1))
    cold.next_batch = 1
    assert second.fetched_rows < cold.train_step().fetched_rows


def test_flush_writes_each_dirty_row_once(tiny_config):
    trainer = ScratchPipeTrainer(config_with(tiny_config, 200, 1))
    list(trainer.train(5))
    assert trainer.flush() > 0
    assert trainer.flush() == 0


def test_unknown_victim_policy_is_refused(tiny_config):
    with pytest.raises(ValueError, match="unknown victim policy 'random'"):
        ScratchPipeTrainer(config_with(tiny_config, 200, 1, policy="random"))


# --- plan stripes: a table planned by several planners, each owning ids id % S ---------------------
@pytest.mark.parametrize("stripes", [2, 3])
def test_plan_stripes_train_exactly_with_all_hits_at_their_minimum(tiny_config, stripes):
    steps, depth = 12, 2
    striped = tiny_config.replace(cache=CacheParams(capacity=500, depth=depth, plan_stripes=stripes))
    minimum = max(ScratchPipeTrainer(striped).minimum_capacities(0, steps))
    # each stripe holds its own ids' window: never less than the whole table's minimum
    assert minimum >= smallest_capacity(tiny_config, depth, steps)
    config = tiny_config.replace(
        cache=CacheParams(capacity=minimum, depth=depth, plan_stripes=stripes),
        optimizer=OptimizerConfig(kind=OptimizerKind.ADAGRAD, lr=0.1),
    )
    for planner in ("thread", "process"):
        trainer = ScratchPipeTrainer(config, where=planner)
        records = list(trainer.train(steps))
        assert all(r.hits == r.lookups for r in records)
        assert sum(r.written_back_rows for r in records) > 0  # it really evicts
        assert max_diff_to_reference(trainer, trainer.source, steps) == 0.0
    # one row fewer is refused, in words that say stripes
    small = tiny_config.replace(cache=CacheParams(capacity=minimum - 1, depth=depth, plan_stripes=stripes))
    with pytest.raises(ValueError, match=f"in {stripes} plan stripes"):
        next(iter(make_trainer("scratchpipe", small).train(steps)))


# --- each step's stage seconds are its own batch's -------------------------------------------------
@pytest.mark.parametrize("planner", ["thread", "device", "device-on-threads", "host-process", "inline"])
def test_a_steps_stage_seconds_are_its_own_batchs_whatever_ran_beside_it(tiny_config, planner):
    """The pipeline runs later batches' Plan and Collect while Train(b) runs; Train(b)'s record
    must carry batch b's seconds in every stage, not whatever was recorded since the last step (a
    short timed run read Plan as 0 ms once the planner had run ahead of it)."""
    minimum = smallest_capacity(tiny_config, 2, 12)
    train_slowly = lambda stage, b: time.sleep(0.02) if stage is Stage.TRAIN and b == 0 else None
    trainer = pipeline(planner, config_with(tiny_config, minimum, 2), stage_hook=train_slowly)
    records = list(trainer.train(12))
    for record in records:
        events = trainer.events.stages_of(record.step)
        for stage in (Stage.COLLECT, Stage.INSERT, Stage.TRAIN):
            ran = sum(e.end - e.start for e in events if e.stage is stage)
            assert record.stage_seconds[stage.value] == pytest.approx(ran, rel=1e-9, abs=1e-12), (record.step, stage)


class SlowReads:
    """A source whose every batch takes `seconds` to read: slower than planning it."""

    def __init__(self, source, seconds: float = 0.01):
        self.source, self.seconds = source, seconds
        self.table_sizes, self.num_dense = source.table_sizes, source.num_dense

    def __len__(self) -> int:
        return len(self.source)

    def batch(self, index: int):
        time.sleep(self.seconds)
        return self.source.batch(index)


@pytest.mark.parametrize("planner", ["thread", "process", "host-process", "inline", "device"])
def test_no_stage_takes_negative_time_when_reading_is_slower_than_planning(tiny_config, planner):
    """Plan's stage is its time less the reading it did (the step's `data`); a driver that reads the
    first batch before Plan starts (to size the plan ring) must not subtract that reading from it.
    Batches made as Plan reads them (`batches_ahead=0`), so that each one's reading is Plan's."""
    minimum = smallest_capacity(tiny_config, 2, 12)
    source = SlowReads(SyntheticSource(tiny_config.data))
    config = config_with(tiny_config, minimum, 2).replace(batches_ahead=0)
    trainer = scratchpipe_at(planner, config, source)
    records = list(trainer.train(12))
    assert all(v >= 0 for r in records for v in r.stage_seconds.values()), [r.stage_seconds for r in records[:2]]
    # each batch's reading, once, by a stage: but the first, read as the call starts to size the
    # plan ring (process drivers), like the fork before it
    assert all(r.stage_seconds["data"] >= 0.009 for r in records[1:])


@pytest.mark.parametrize("name", ["gpu-only", "hybrid", "lru", "prefetch-lru", "scratchpipe", "scratchpipe-device"])
def test_the_callers_time_between_steps_is_no_steps(tiny_config, name):
    """A step's seconds are the trainer's, not what its caller does between two steps (a live plot,
    another trainer's turn in an alternated bench): ScratchPipe timed a step from the end of the
    one before, so a caller's pause went into the next step's seconds, and into its samples/s."""
    pause = 0.2
    with make_trainer(name, tiny_config, device="cpu") as trainer:
        steps = trainer.train(6)
        records = [next(steps)]  # the first: ScratchPipe's pipeline starts in it
        for record in steps:
            records.append(record)
            time.sleep(pause)
    # the bug added the whole pause to every step; a busy machine may stall one step, not all
    seconds = [r.seconds for r in records[1:]]
    assert np.median(seconds) < pause / 2 and max(seconds) < pause, [round(s, 4) for s in seconds]
