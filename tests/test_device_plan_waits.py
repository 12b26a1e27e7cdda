"""The device planner (scratchpipe/device_plan.py) waits for the device once a batch and counts
everything it asks of it: run on tests/strict_device.py's device, where any other read of a device
array, and any array operation the kit did not count, fails the test."""

from collections import Counter

import numpy as np
import pytest

from scratchkit.config import DataConfig, VictimPolicy
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
