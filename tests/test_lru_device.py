"""`lru-device`: the backward-looking cache the ScratchPipe paper measured against, at its best. A
device cache filled on demand inside each step (a miss stalls it), its lookup, victim choice and
fill on the device: the device planner at look-ahead depth 0 with LRU victims, every stage on the
step's path (scratchkit/trainers/lru_device.py)."""

import numpy as np
import pytest

from scratchkit.config import CacheParams, OptimizerConfig, OptimizerKind, VictimPolicy
from scratchkit.costmodel.hardware import CALL_OPS
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.device import Device
from scratchkit.device_work import Path, snapshot
from scratchkit.kernels.engine import SameStream, host_build_works
from scratchkit.measure.verify import verify
from scratchkit.profiles import get_profile
from scratchkit.projection.counters import simulated_counters
from scratchkit.projection.machines import get_machine
from scratchkit.projection.project import stage_work
from scratchkit.designs import DESIGNS, StepWork
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.scratchpipe.drivers import PlanIn
from scratchkit.scratchpipe.events import Stage
from scratchkit.sim.lru import lru_by_batch
from scratchkit.trainers import make_trainer
from stand_ins import StandInCuda
from test_host_syncs import devices

NAME = "lru-device"
STEPS = 12


@pytest.fixture
def config(tiny_config):
    """The least cache that holds a batch: every table evicts dirty rows once it is full."""
    least = max(minimum_capacities(SyntheticSource(tiny_config.data), 0, 0, STEPS))
    return tiny_config.replace(cache=CacheParams(capacity=least, depth=2, victim_policy="furthest"))


@pytest.mark.parametrize("kind", list(OptimizerKind))
def test_it_trains_bit_exactly_as_plain_pytorch(config, kind):
    config = config.replace(optimizer=OptimizerConfig(kind=kind, lr=0.1))
    (result,) = verify(config, [NAME], steps=STEPS, device="cpu", tolerance=0.0)
    assert result.max_abs_diff == 0.0  # on the stand-in CUDA runtime: tests/test_device_tbe.py


def test_it_is_the_device_planner_at_depth_0_with_lru_victims_on_the_steps_path(config):
    with make_trainer(NAME, config, device="cpu") as trainer:
        assert (trainer.depth, trainer.policy) == (0, VictimPolicy.LRU)  # whatever the config says
        assert trainer.where_host_stages_run(STEPS) is PlanIn.STEP
        assert trainer.plan_setup().on_step and isinstance(trainer.stages.collect_stream, SameStream)
        records = list(trainer.train(STEPS))
    assert DESIGNS[NAME].window(config) == (0, 1)  # its cache holds one batch's rows
    with pytest.raises(ValueError, match="that is the trainer 'lru-device'"):
        make_trainer("scratchpipe", config, device="cpu", where="step")  # its place is its own
    assert all({"plan", "collect", "write_back", "insert", "train"} <= set(r.stage_seconds) for r in records)
    assert sum(r.written_back_rows for r in records) > 0  # it evicted dirty rows, and stayed exact above


def test_a_miss_is_filled_as_a_demand_lru_fills_it():
    """One id a batch: no two rows share a recency, so the victim is the least recently used row
    without ties, and the kit's cache simulator (a batch at a time) is an independent reference."""
    from test_scratchpipe import hand_made_config, hand_made_source

    rng = np.random.default_rng(3)
    trace = [[int(i)] for i in rng.zipf(1.3, 60) % 16]
    source = hand_made_source(trace, num_rows=16)
    config = hand_made_config(source, capacity=5, depth=1, policy="furthest")
    with make_trainer(NAME, config, source, device="cpu") as trainer:
        records = list(trainer.train(len(trace)))
    moved = [(r.fetched_rows, r.written_back_rows) for r in records]
    expected = lru_by_batch([np.array(b) for b in trace], 16, 5)
    assert moved == [tuple(m) for m in expected.tolist()]
    assert sum(w for _, w in moved) > 10  # it evicted, and every victim (trained, so dirty) went home


def test_the_projection_counts_the_rows_it_moves(config):
    """Its design's `moves` plans at depth 0 with LRU victims, whatever the config says (depth 2,
    furthest next use here), as the trainer does."""
    with make_trainer(NAME, config, device="cpu") as trainer:
        records = list(trainer.train(STEPS))
    late = records[STEPS // 2 :]
    fetched = np.mean([r.fetched_rows for r in late])
    written = np.mean([r.written_back_rows for r in late])
    assert written > 0 and simulated_counters(config, NAME, batches=STEPS) == (fetched, written)


@pytest.mark.parametrize("where", list(devices()))
def test_it_waits_for_the_device_twice_a_step_its_fill_and_the_loss(config, where):
    """Its fill must know how many rows it moves: Plan reads every table's counts once, on the
    step's path, beside the loss. No stage waits for another (one stream orders them)."""
    with make_trainer(NAME, config, device=devices()[where]()) as trainer:
        records = list(trainer.train(6))
    for r in records:
        assert r.waits == {"plan sizes": 1, "loss": 1}, (r.step, r.waits)
        assert r.plan_syncs == 1 and r.launches.get("hashmap_query") == 1  # Plan's work is the step's


def test_a_failing_stage_loses_nothing_and_training_goes_on(config):
    """A stage that raises mid-step (a killed fill): the step is not taken, every dirty row goes
    home, and the next call trains on exactly."""
    from scratchkit.trainers.scratchpipe import PipelineError
    from test_faults import differs_from_reference

    def fail(stage, b):
        if stage is Stage.INSERT and b == 7:
            raise RuntimeError("killed")

    trainer = make_trainer(NAME, config, device="cpu", stage_hook=fail)
    with pytest.raises(PipelineError, match="stage insert failed on batch 7"):
        list(trainer.train(STEPS))
    assert trainer.next_batch == 7 and differs_from_reference(trainer, 7) == 0.0
    trainer.stage_hook = None
    list(trainer.train(STEPS - 7))
    assert differs_from_reference(trainer, STEPS) == 0.0
    trainer.close()


def launches(work) -> float:
    """The kernels a stage's priced Work launches on a GPU (each kit call's, hardware.CALL_OPS)."""
    return sum(count * CALL_OPS[name] for name, count in work.device_calls)


def test_the_cost_model_prices_the_launches_its_row_moves_count(config):
    """designs/scratchpipe_device.py's count of Collect, Write-back and Insert, on a GPU, against
    the launches each stage counted where a GPU runs them (the stand-in CUDA runtime), in steps
    where every table evicts."""
    snaps = {}
    hook = lambda stage, b: snaps.setdefault(b, []).append((stage, snapshot(Path.TRAIN)))
    with make_trainer(NAME, config, device=Device("cpu", StandInCuda()), stage_hook=hook) as trainer:
        records = list(trainer.train(STEPS))
    T = len(config.data.table_sizes)
    compared = 0
    for r in records[2:]:
        if r.evicting_tables < T:
            continue
        (_, plan), *rest = snaps[r.step]
        counted, at = {}, plan
        for stage, snap in rest:
            counted[stage] = (snap - at).kernel_launches
            at = snap
        work = StepWork.from_config(config, batches=1, start=r.step).with_counters(
            r.fetched_rows, r.written_back_rows, r.evicting_tables
        )
        priced = stage_work(NAME, work, get_machine("h100-pcie5"))
        # each stage's launches run from its hook to the next stage's: Collect's to Write-back's...
        assert counted[Stage.WRITE_BACK] == launches(priced["collect"]), r.step
        assert counted[Stage.TRANSFER] == launches(priced["write_back"]), r.step
        assert counted[Stage.TRAIN] == launches(priced["insert"]) + launches(priced["transfer"]), r.step
        compared += 1
    assert compared >= 3


@pytest.mark.skipif(not host_build_works(), reason="the strict device runs the host build")
def test_the_cost_model_prices_the_launches_and_the_wait_its_plan_counts():
    """Its Plan on tests/strict_device.py's device (a GPU's code path: the sort, every kernel, one
    read), at depth 0 with LRU victims in full steps, against the count designs/scratchpipe_device.py
    prices: no look-ahead, so neither urgencies nor the horizon's stamps."""
    from scratchkit.designs import scratchpipe_device as priced
    from strict_device import StrictDevice
    from test_device_plan_waits import DATA, device_planner, kinds
    from test_device_plan import setup_for

    source = SyntheticSource(DATA)
    setup = setup_for(DATA.table_sizes, minimum_capacities(source, 0, 0, 30), 0, VictimPolicy.LRU, True, 4, False)
    planner = device_planner(setup, source, StrictDevice())
    for b in range(10):
        planner.plan(b)
    kernels = priced.PLAN_KERNELS + priced.WORKING_SET_KERNELS + priced.VICTIM_KERNELS
    ops = priced.PLAN_OPS + priced.WORKING_SET_OPS + priced.VICTIM_OPS
    compared = 0
    for b in range(10, 24):
        rebuilds = planner.plans.map.rebuilds
        planned = planner.plan(b)
        assert planned.work.host_syncs == priced.PLAN_SYNCS, b
        if all(p.victims for p in planned.tables) and planner.plans.map.rebuilds == rebuilds:
            assert kinds(planned.work) == (kernels, ops), b
            compared += 1
    assert compared >= 3


def test_the_command_line_trains_it_and_holds_its_cache_to_one_batch(capsys):
    from scratchkit.commands.cli import main

    source = SyntheticSource(get_profile("tiny").data)
    least = max(minimum_capacities(source, 0, 0, 8))
    args = ["verify", "--profile", "tiny", "--trainers", NAME, "--steps", "8"]
    assert main(args + ["--capacity", str(least), "--depth", "3"]) == 0  # its depth is 0, whatever --depth says
    capsys.readouterr()
    assert main(args + ["--capacity", str(least - 1)]) == 2
    err = capsys.readouterr().err
    assert f"too small for {NAME}" in err and "a batch touches" in err
