"""The fixed cost of each kit call, measured where it occurs: inside training steps.

A call's fixed cost (dispatch, allocation, the code's own overhead) is what is left when its
inputs are tiny. Timed a hundred times in a row, a call runs from warm caches and a warm branch
predictor; inside a step it follows other stages, whose code and data have pushed its own out, and
costs up to twice as much. So the kit's `gpu-only` trainer trains tiny models here (tables of 64
rows, batch 4, dim 4), timed by its own stage timers, and a fit over the number of tables and of
layers gives each stage's cost per table (a lookup, a backward, an update per optimizer) and the
dense step's cost per step and per layer:

    embedding_forward(T) = forward_stage + T x lookup            T = 2, 8
    embedding_backward(T) = backward_stage + T x backward
    update(T) = update_stage + T x update_<optimizer>            SGD, Adagrad, row-wise Adagrad
    mlp(layers) = dense_base + layers x dense_layer              2 and 8 layers

(The `_stage` parts are what a stage costs beyond its calls: the stack of the pooled vectors, and
the first call's colder caches.)

On a GPU the same trainer runs on the device, so the fixed costs include the kernels' launches.
On a CPU the trainer would do every table's lookup, backward and update in one C++ call each
(embedding/table_batched.py, priced by its own curves, tbe_timings.py); these per-table costs
price the per-table torch ops, so the runs here switch the C++ loops off (`SCRATCHKIT_NATIVE=0`).
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

import numpy as np

from scratchkit.config import CacheParams, DataConfig, ModelConfig, OptimizerConfig, OptimizerKind, TrainConfig

FEW, MANY = 2, 8  # tables
SHALLOW, DEEP = 1, 4  # Linear layers of each MLP (2 and 8 in all)


def tiny_config(tables: int, depth: int, optimizer: OptimizerKind) -> TrainConfig:
    return TrainConfig(
        data=DataConfig(table_sizes=(64,) * tables, pooling=1, batch_size=4, num_dense=4, zipf=0.0),
        model=ModelConfig(dim=4, bottom_mlp=(4,) * depth, top_mlp=(4,) * (depth - 1) + (1,)),
        optimizer=OptimizerConfig(kind=optimizer),
        cache=CacheParams(capacity=64),
    )


@contextmanager
def per_table_ops():
    """The trainers' per-table torch ops instead of the C++ table-batched loops, for a while."""
    before = os.environ.get("SCRATCHKIT_NATIVE")
    os.environ["SCRATCHKIT_NATIVE"] = "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ["SCRATCHKIT_NATIVE"]
        else:
            os.environ["SCRATCHKIT_NATIVE"] = before


def stage_times(
    config: TrainConfig, steps: int, statistic, device=None, warmup: int = 3, clock=time.perf_counter
) -> dict[str, float]:
    """Each stage's seconds per step of `gpu-only` on `config` (`statistic` over the timed steps
    after `warmup` untimed ones), with the per-table torch ops (the module note). `clock`: the
    stage timer's (the calibration's Bench.clock: CPU time on a CPU, as every other constant,
    so that a neighbour's load, which stretches wall time, enters none of them)."""
    from scratchkit.trainers import make_trainer

    with per_table_ops(), make_trainer("gpu-only", config.alone(), device=device) as trainer:
        trainer.timer.clock = clock
        records = list(trainer.train(warmup + steps))[warmup:]
    return {s: float(statistic([r.stage_seconds.get(s, 0.0) for r in records])) for s in records[0].stage_seconds}


def step_fixed_costs(steps: int = 15, statistic=np.median, device=None, clock=time.perf_counter) -> dict[str, float]:
    """The fixed costs (hardware.CALL_OPS names) of the torch calls the trainers make per table
    and per step, from tiny training runs (the module note), timed by `clock`."""
    run = lambda tables, depth=SHALLOW, opt=OptimizerKind.SGD: stage_times(
        tiny_config(tables, depth, opt), steps, statistic, device, clock=clock
    )
    few, many, deep = run(FEW), run(MANY), run(FEW, DEEP)
    per_table = lambda stage: max((many[stage] - few[stage]) / (MANY - FEW), 0.0)
    costs = {
        "lookup": per_table("embedding_forward"),
        "backward": per_table("embedding_backward"),
        "update_sgd": per_table("update"),
    }
    for stage, call, name in (
        ("embedding_forward", "lookup", "forward_stage"),
        ("embedding_backward", "backward", "backward_stage"),
        ("update", "update_sgd", "update_stage"),
    ):
        costs[name] = max(few[stage] - FEW * costs[call], 0.0)
    for kind in (OptimizerKind.ADAGRAD, OptimizerKind.ROWWISE_ADAGRAD):
        costs[f"update_{kind.value}"] = max(run(MANY, opt=kind)["update"] - costs["update_stage"], 0.0) / MANY
    layers = 2 * (DEEP - SHALLOW)
    costs["dense_layer"] = max((deep["mlp"] - few["mlp"]) / layers, 0.0)
    costs["dense_base"] = max(few["mlp"] - 2 * SHALLOW * costs["dense_layer"], 0.0)
    return costs
