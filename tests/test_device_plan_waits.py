"""The device planner (scratchpipe/device_plan.py) waits for the device once a batch and counts
everything it asks of it: run on tests/strict_device.py's device, where any other read of a device
array, and any array operation the kit did not count, fails the test."""

from collections import Counter

import numpy as np
import pytest

from scratchkit.config import CacheParams, DataConfig, VictimPolicy
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.device_work import Path, on_path, snapshot
from scratchkit.kernels.engine import host_build_works
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.scratchpipe.device_plan import DevicePlans
from scratchkit.scratchpipe.plan_ahead import PlanAhead
from strict_device import DeviceArray, StrictDevice, UncountedDeviceWork
from test_device_plan import assert_same_plans, setup_for

pytestmark = pytest.mark.skipif(not host_build_works(), reason="the strict device runs the host build")

DATA = DataConfig(table_sizes=(3_000, 90, 700), pooling=5, batch_size=48, zipf=0.9, num_batches=40)


def device_planner(setup, source, strict):
    planner = PlanAhead(setup, source)
    with on_path(Path.PLAN):
        planner.plans = DevicePlans(setup, strict.engine())
    return planner


@pytest.mark.parametrize("policy", [VictimPolicy.FURTHEST, VictimPolicy.LRU])
@pytest.mark.parametrize("record", [True, False])
def test_on_a_strict_device_it_plans_as_the_host_twin(policy, record):
    """The device's own working set (sort, scan) and every kernel, with nothing read on the way."""
    source = SyntheticSource(DATA)
    setup = setup_for(DATA.table_sizes, minimum_capacities(source, 2, 0, 30), 2, policy, True, 8, record)
    assert assert_same_plans(source, setup, 0, 30, StrictDevice().engine()) > 0


def test_each_batch_waits_once_and_every_launch_is_counted():
    source = SyntheticSource(DATA)
    setup = setup_for(DATA.table_sizes, minimum_capacities(source, 2, 0, 30), 2, VictimPolicy.FURTHEST, True, 8, True)
    strict = StrictDevice()
    planner = device_planner(setup, source, strict)
    evicting = 0
    for b in range(30):
        launches, reads = strict.work()
        train = snapshot(Path.TRAIN)
        planned = planner.plan(b)
        assert strict.reads - reads == 1, b  # the device was waited for once
        assert planned.work.waits == {"plan sizes": 1}, b  # and that wait was counted
        assert planned.work.launches == Counter(strict.launches) - launches, b  # every launch counted
        assert (snapshot(Path.TRAIN) - train).kernel_launches == 0  # all on Plan's path
        evicting += any(p.victims for p in planned.tables)
    assert evicting > 5


def test_the_planners_stream_starts_after_what_its_maker_queued():
    """The row stores' copies the planner starts from were queued on the making thread's stream:
    the planner's own stream waits for them on the device (an event), not the host."""
    source = SyntheticSource(DATA)
    setup = setup_for(DATA.table_sizes, minimum_capacities(source, 2, 0, 30), 2, VictimPolicy.LRU, True, 8, False)
    strict = StrictDevice()
    planner = DevicePlans(setup, strict.engine())
    (recorded, current), (waited, own, event) = strict.events
    assert (recorded, waited) == ("recorded", "waited") and own is planner.stream.stream and event is current
    assert strict.reads == 0


def test_the_strict_device_refuses_what_a_gpu_would_wait_or_launch_for():
    """The checks above can fail: each thing the planner must not do is refused."""
    strict = StrictDevice()
    a = strict.asarray(np.arange(5, dtype=np.int64))
    for misuse in (
        lambda: int(a[-1:]),
        lambda: a[a > 2],
        lambda: a[np.array([1, 2])],
        lambda: a.max(),
        lambda: a + 1,
        lambda: np.flatnonzero(a),
        lambda: bool(a[:1]),
        lambda: a.tolist(),
    ):
        with pytest.raises((UncountedDeviceWork, TypeError)):
            misuse()
    assert isinstance(a[1:3], DeviceArray) and strict.reads == 0
    np.testing.assert_array_equal(strict.asnumpy(a), np.arange(5))
    assert strict.reads == 1


@pytest.mark.parametrize("on_threads", [False, True])
def test_each_step_records_plans_one_wait_and_train_sees_none_of_plans_work(tiny_config, on_threads):
    """scratchpipe-device as a CPU runs it (Plan inline, in Train's thread) and as a GPU does (Plan
    on a thread of its own; the stand-in CUDA runtime): every step's record has its Plan's one
    wait and its launches, and Train's path has none of Plan's kernels, nor its wait."""
    from scratchkit.device import Device
    from scratchkit.kernels.signatures import kernels_in
    from scratchkit.trainers import make_trainer
    from stand_ins import StandInCuda

    device = Device("cpu", StandInCuda()) if on_threads else "cpu"
    config = tiny_config.replace(cache=CacheParams(capacity=103, depth=2))  # the least that fits: it evicts
    train = snapshot(Path.TRAIN)
    with make_trainer("scratchpipe-device", config, device=device) as trainer:
        records = list(trainer.train(12))
    on_train = snapshot(Path.TRAIN) - train
    assert [r.plan_syncs for r in records] == [1] * 12
    assert all(r.plan_launches > 10 for r in records) and sum(r.evicting_tables for r in records) > 0
    plan_kernels = {k.name for k in kernels_in("plan.cu")}
    assert not plan_kernels & set(on_train.launches) and "plan sizes" not in on_train.waits
    if on_threads:  # the row moves' threads (Collect, Write-back, Insert) count beside Plan's, not on Train's
        assert not {k.name for k in kernels_in("rows.cu")} & set(on_train.launches)


def kinds(work) -> tuple[int, int]:
    """(kernels of the .cu files, array ops) among a batch's counted launches."""
    from scratchkit.kernels.signatures import KERNELS

    kernels = sum(count for name, count in work.launches.items() if name in KERNELS)
    return kernels, work.kernel_launches - kernels


@pytest.mark.parametrize("evicting", [False, True])
def test_the_cost_model_prices_the_launches_and_the_wait_each_batch_counts(evicting):
    """designs/scratchpipe_device.py's hand-counted constants, against the counts of batches planned
    on the strict device (a GPU's code path): a filling batch (slots free, no table may evict) and
    a full one (no slot free, the victim choice with 8 batches of horizon)."""
    from scratchkit.designs import scratchpipe_device as priced

    source = SyntheticSource(DATA)
    if evicting:
        capacities, policy, batches = minimum_capacities(source, 2, 0, 30), VictimPolicy.FURTHEST, range(12, 24)
    else:
        capacities, policy, batches = DATA.table_sizes, VictimPolicy.LRU, range(3, 6)
    setup = setup_for(DATA.table_sizes, capacities, 2, policy, True, 8, False)
    planner = device_planner(setup, source, StrictDevice())
    for b in range(batches.start):
        planner.plan(b)
    kernels = priced.PLAN_KERNELS + priced.WORKING_SET_KERNELS
    ops = priced.PLAN_OPS + priced.WORKING_SET_OPS
    if evicting:
        kernels += priced.VICTIM_KERNELS + 8 * priced.HORIZON_KERNELS
        ops += priced.VICTIM_OPS + priced.URGENCY_OPS
    else:
        kernels, ops = kernels + priced.FREE_KERNELS, ops + priced.FREE_OPS
    compared = 0
    for b in batches:
        rebuilds = planner.plans.map.rebuilds
        free_before = planner.plans.free.any()
        planned = planner.plan(b)
        assert free_before != evicting and any(p.victims for p in planned.tables) == evicting, b
        assert planned.work.host_syncs == priced.PLAN_SYNCS, b
        if planner.plans.map.rebuilds == rebuilds:  # a rebuild's few launches are not priced a batch
            assert kinds(planned.work) == (kernels, ops), b
            compared += 1
    assert compared >= 2


def test_bench_rows_carry_plans_waits_and_launches_a_step(tiny_config):
    from scratchkit.measure.bench import run_bench

    config = tiny_config.replace(cache=CacheParams(capacity=103, depth=2))
    device, host = run_bench(config, ["scratchpipe-device", "scratchpipe"], steps=6, warmup=2, device="cpu")
    assert device.to_dict()["plan_syncs_per_step"] == 1.0 and device.plan_launches_per_step > 10
    assert (host.plan_syncs_per_step, host.plan_launches_per_step) == (0.0, 0.0)  # a host planner's: none
