"""The calibration reads every constant on one clock. Its in-step timings (the kit calls' fixed
costs and the dense step's elementwise rate: gpu-only's stages, calibration/fixed_costs.py) read
the Bench's clock, CPU time on a CPU as every other figure, not the stage timer's wall time: a
neighbour's load stretched those alone, and the dense step came out priced several times its CPU
time beside constants that were not."""

import itertools
import time

import numpy as np

from scratchkit.calibration.fixed_costs import FEW, SHALLOW, stage_times, tiny_config
from scratchkit.config import OptimizerKind
from scratchkit.trainers.timing import StageTimer


def test_the_stage_timer_reads_its_clock():
    ticks = itertools.count()
    timer = StageTimer()
    assert timer.clock is time.perf_counter  # the trainers' figures: wall time
    timer.clock = lambda: float(next(ticks))
    with timer.stage("mlp"):
        pass
    with timer.stage("mlp"):
        pass
    assert timer.take() == {"mlp": 2.0}


def test_in_step_calibration_timings_read_the_clock_they_are_given():
    """A clock that ticks once a reading: each stage of each step is one tick (two readings), where
    the wall clock would give a few microseconds."""
    ticks = itertools.count()
    stages = stage_times(
        tiny_config(FEW, SHALLOW, OptimizerKind.SGD), 3, np.median, warmup=1, clock=lambda: float(next(ticks))
    )
    assert {"embedding_forward", "mlp", "embedding_backward", "update"} <= set(stages)
    assert all(v >= 1.0 and v == int(v) for v in stages.values()), stages
