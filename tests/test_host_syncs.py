"""The device trainers wait for the device once a step, on Train's path: for the loss.

A GPU runs ahead of the host only while the host queues work without waiting for it. Every wait
the trainers cause goes through the device layer (scratchkit/device.py, the kernel engines) and is
counted there on any device (scratchkit/device_work.py); torch's own ops are counted by the
dispatch mode of scratchkit/device_ops.py. The same lines run on a CPU and on the stand-in CUDA
runtime (tests/stand_ins.py), so these tests hold `gpu-only`, `prefetch-lru-device` and
`scratchpipe-device` to one wait a step (the loss's read, which also brings ScratchPipe's hit
count) where a GPU would run them.
"""

from __future__ import annotations

import pytest
import torch

from conftest import cupy_stand_in_engine
from scratchkit.device import Device
from scratchkit.device_ops import counting_ops
from scratchkit.device_work import Path, snapshot
from scratchkit.trainers import make_trainer
from stand_ins import StandInCuda

HELD = ["gpu-only", "prefetch-lru-device", "scratchpipe-device"]
STEPS = 6


def devices():
    return {
        "cpu": lambda: Device("cpu"),
        "stand-in": lambda: Device("cpu", StandInCuda()),
        "stand-in-cupy": lambda: Device("cpu", StandInCuda(), kernels=cupy_stand_in_engine(90)),
    }


def counted_run(name, config, dev, steps=STEPS):
    """`steps` steps with torch's ops counted too, after one step that is not (a process's first
    use of the C++ loops checks its sorts against torch's, once): (records, everything Train's
    path counted)."""
    with make_trainer(name, config, device=dev) as trainer:
        list(trainer.train(1))
        before = snapshot(Path.TRAIN)
        with counting_ops(dev.torch):
            records = list(trainer.train(steps))
        return records, snapshot(Path.TRAIN) - before


@pytest.mark.parametrize("where", list(devices()))
@pytest.mark.parametrize("name", HELD)
def test_a_device_trainer_waits_for_the_device_once_a_step_for_the_loss(tiny_config, name, where):
    records, _ = counted_run(name, tiny_config, devices()[where]())
    assert len(records) == STEPS
    for r in records:
        assert r.waits == {"loss": 1}, (r.step, r.waits)
        assert r.host_syncs == 1 and r.kernel_launches > 0


@pytest.mark.parametrize("name", ["scratchpipe-device", "prefetch-lru-device"])
def test_the_hit_count_rides_with_the_loss(tiny_config, name):
    """On the stand-in the hit check is a device counter, read in the loss's copy."""
    with make_trainer(name, tiny_config, device=Device("cpu", StandInCuda())) as trainer:
        assert trainer.tbe is not None  # Train on the stand-in's kernels
        records = list(trainer.train(4))
    assert all(r.hits == r.lookups and r.waits == {"loss": 1} for r in records)


@pytest.mark.parametrize("planner", ["process", "device"])
def test_a_lookup_that_missed_is_still_counted_in_its_own_step(planner):
    """The hazard lab's no-holds switch (tests/test_scratchpipe.py's trace): batch 3's rows are
    evicted while it is in flight, and its record, not a later one, says so."""
    from test_scratchpipe import HOLD_TRACE, hand_made_config, hand_made_source, slow

    from scratchkit.scratchpipe.events import Stage
    from scratchkit.trainers.scratchpipe import Hazards
    from stand_ins import scratchpipe_at

    source = hand_made_source(HOLD_TRACE)
    config = hand_made_config(source, capacity=12, depth=1, policy="lru")
    dev = Device("cpu", StandInCuda())
    hazards, hook = Hazards(holds=False), slow(Stage.TRAIN, 3)  # Insert(4) runs first
    with scratchpipe_at(planner, config, source, device=dev, hazards=hazards, stage_hook=hook) as trainer:
        records = list(trainer.train(len(HOLD_TRACE)))
    assert records[3].hits < records[3].lookups
    assert all(r.hits == r.lookups for r in records[:3])
    assert all(r.waits == {"loss": 1} for r in records)


def test_the_counters_see_a_trainer_that_waits_more(tiny_config):
    """hybrid's backward is the host's: its gradient comes back each step, a second wait."""
    records, _ = counted_run("hybrid", tiny_config, Device("cpu", StandInCuda()), steps=3)
    assert all(r.waits == {"loss": 1, "copy to host": 1} for r in records)


def test_the_op_counter_knows_which_torch_ops_wait():
    x = torch.arange(10)
    before = snapshot(Path.TRAIN)
    with counting_ops("cpu"):
        float(x.sum())  # .item(): a wait, and a launch for the sum
        x[x > 4]  # a mask's count
        torch.repeat_interleave(x, x, output_size=45)  # told its size: no wait
        x.view(2, 5).t()  # views: nothing launched
        torch.sort(x, stable=True)
    work = snapshot(Path.TRAIN) - before
    assert work.waits == {"torch._local_scalar_dense": 1, "torch.index": 1}
    assert work.launches["torch.sort"] == 1 and "torch.view" not in work.launches


def test_the_stage_timer_reads_events_without_waiting_and_counts_a_late_stage_once():
    """On a GPU the timer records events and reads each stage once both ends are done: a stage
    still running at a step's `take` (the update, queued after the loss's wait) is counted in a
    later one, never dropped, never twice; nothing waits."""
    from scratchkit.trainers.timing import StageTimer

    class Clock:  # events whose end is done only once `done` says so
        def __init__(self):
            self.done, self.t = set(), 0.0

        def mark(self):
            self.t += 1.0
            return self.t

        def seconds(self, start, end):
            return end - start if end in self.done else None

    clock = Clock()
    timer = StageTimer(events=clock)
    before = snapshot(Path.TRAIN)
    with timer.stage("mlp"):
        pass
    with timer.stage("update"):
        pass
    clock.done.add(2.0)  # mlp's end is done; update's (4.0) is not yet
    assert timer.take() == {"mlp": 1.0}
    clock.done.add(4.0)
    assert timer.take() == {"update": 1.0} and timer.take() == {}
    assert (snapshot(Path.TRAIN) - before).host_syncs == 0
