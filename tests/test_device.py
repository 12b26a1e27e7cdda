"""The trainers' CUDA lines, run on the CPU through a stand-in runtime (tests/stand_ins.py).

`scratchkit.device.Device` makes every CUDA-only call; with `StandInCuda` the same lines run here,
each call recorded. The results must still equal the reference exactly (the stand-in copies
nothing), and the recorded sequence must be what a GPU needs: rows pinned before their
asynchronous copy, the side stream waited for before Insert, Train's kernels before its slots
are freed.
"""

from __future__ import annotations

from collections import Counter

import pytest

from scratchkit.data.synthetic import SyntheticSource
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.scratchpipe.drivers import fork_is_safe
import torch

from scratchkit.backend import detect
from scratchkit.config import CacheParams
from scratchkit.device import Device, TorchCuda, as_device
from scratchkit.trainers import make_trainer
from scratchkit.trainers.scratchpipe import ScratchPipeTrainer
from scratchkit.measure.verify import verify
from stand_ins import StandInCuda

ALL_TRAINERS = ["gpu-only", "hybrid", "static", "lru", "lfu", "prefetch-lru", "scratchpipe", "scratchpipe-device"]


def stand_in() -> Device:
    return Device("cpu", StandInCuda())


def test_on_a_cpu_every_call_is_an_identity_or_nothing():
    dev = Device("cpu")
    t = torch.ones(3)
    assert not dev.is_cuda and dev.runtime is None
    assert dev.pin(t) is t and dev.to_device(t, non_blocking=True) is t and dev.to_host(t) is t
    assert dev.pin(None) is None and dev.to_device(None) is None
    assert dev.new_stream() is None and dev.stage_synchronizer() is None
    with dev.use_stream(None):
        pass
    dev.synchronize_stream(None), dev.synchronize_current_stream(), dev.synchronize_kernels()
    dev.make_deterministic()


def test_a_cuda_device_gets_torch_cuda_and_none_picks_what_is_here():
    assert isinstance(Device("cuda").runtime, TorchCuda)  # built without touching a GPU
    assert Device("cuda:1").torch == torch.device("cuda:1")
    assert as_device(None).torch.type == detect().device
    dev = stand_in()
    assert as_device(dev) is dev and dev.is_cuda and dev.torch.type == "cpu"


def test_every_trainer_through_its_cuda_lines_matches_the_reference(tiny_config):
    """hybrid's CUDA lines are torch's ops on the host's tables: PyTorch exactly. The others train
    with tbe.cu's kernels there (embedding/device_tbe.py), which add each id's gradients in lookup
    order: PyTorch's result to rounding, and bit for bit the CPU's by-id run
    (tests/test_device_tbe.py)."""
    results = list(verify(tiny_config, ALL_TRAINERS, steps=6, device=stand_in(), tolerance=1e-6))
    assert [r.trainer for r in results] == ALL_TRAINERS
    for r in results:
        assert r.passed, r
        if r.trainer == "hybrid":
            assert r.max_abs_diff == 0.0, r
        else:
            assert 0.0 < r.max_abs_diff and r.dense_max_abs_diff == 0.0, r  # only the sums' order differs


def test_host_tables_are_pinned_and_the_switch_is_set(tiny_config):
    dev = stand_in()
    trainer = make_trainer("hybrid", tiny_config, device=dev)
    assert all(dev.runtime.is_pinned(w) for w in trainer.tables.weights)
    assert ("deterministic", {"stream": None}) in dev.runtime.calls_of()


def test_hybrid_step_moves_pooled_rows_and_gradients_and_times_on_the_device(tiny_config):
    dev = stand_in()
    with make_trainer("hybrid", tiny_config, device=dev) as trainer:
        before = len(dev.runtime.calls)
        trainer.train_step()
        step = [(c, d.get("non_blocking")) for c, d in dev.runtime.calls_of()[before:]]
    moves = [s for s in step if s[0] in ("to_device", "to_host")]
    # pooled [B, T, dim] over (asynchronously), the dense features and labels in one pinned copy,
    # the gradient back (the one wait besides the loss's: hybrid's backward is the host's)
    assert moves == [("to_device", True), ("to_device", True), ("to_host", False)]
    # the stage timer records an event at each stage's start and end, and waits for none: mlp
    # twice (the passes, then the optimizer's step in update_weights, once nothing can fail)
    assert step.count(("record_event", None)) == 2 * 8 and ("synchronize", None) not in step


def test_scratchpipe_issues_the_gpu_sequence(tiny_config):
    """The pipeline a GPU runs (Plan forked where that is safe, the other host stages on threads),
    through the stand-in: Write-back copies the victims home before Insert, Transfer copies pinned
    rows on a side stream and Insert waits for that stream and for its scatter kernel, and Train
    waits for its kernels before its slots are released."""
    steps = 8
    smallest = max(minimum_capacities(SyntheticSource(tiny_config.data), 2, 0, steps))  # evicts
    config = tiny_config.replace(cache=CacheParams(capacity=smallest, depth=2))
    dev = stand_in()
    with ScratchPipeTrainer(config, device=dev) as trainer:
        # the GPU's choice where fork is safe; on a machine with a CUDA device, threads
        # (drivers.fork_is_safe: a process forked once CUDA has started may hang)
        assert trainer.where_host_stages_run(steps).value == ("process" if fork_is_safe() else "thread")
        records = list(trainer.train(steps))
        has_state = trainer.tables.state[0] is not None
    assert sum(r.hits for r in records) == sum(r.lookups for r in records)  # Train always hits
    assert sum(r.written_back_rows for r in records) > 0  # victims went home
    calls = dev.runtime
    streams = [d["created"] for c, d in calls.calls_of() if c == "new_stream"]
    assert len(streams) == 1  # one per scratchpad set
    tables = len(config.data.table_sizes)
    evict = calls.calls_of("scratchpipe-evict")
    for call, details in evict:
        if call == "to_device" and len(details.get("shape", ())) == 2:  # Transfer: fetched rows
            assert details["stream"] is streams[0] and details["non_blocking"] and details["pinned"]
        elif call == "to_host":  # Write-back: the victims' rows, read at once
            assert details["stream"] is None and not details["non_blocking"]
    moved_in = sum(1 for c, d in evict if c == "to_device" and d["stream"] is streams[0])
    assert moved_in == steps * tables * (1 + has_state)
    # the evicting stages of batch b wait for Train(b-D-1)'s event (none for the first D+1), then
    # copy on the side stream and wait for it and for Insert's scatter
    order = [c for c, _ in evict if c not in ("to_device", "to_host")]
    moves = ["enter_stream", "exit_stream", "synchronize_stream", "synchronize_kernels"]
    assert order == moves * (config.cache.depth + 1) + (["synchronize_event"] + moves) * (steps - 3)
    collect = Counter(c for c, _ in calls.calls_of("scratchpipe-collect"))
    assert collect == {"pin": steps * tables * (1 + has_state)}
    # Train waits for its own update never: it records an event the evicting stages wait for
    # (the one wait left on its thread is the flush's, after the last step)
    train = [c for c, _ in calls.calls_of("MainThread")]
    assert train.count("synchronize_current_stream") == 1 and train[-1] != "record_event"
    waited = [d["event"] for c, d in evict if c == "synchronize_event"]
    recorded = [d["event"] for c, d in calls.calls_of("MainThread") if c == "record_event"]
    assert set(waited) <= set(recorded)


@pytest.mark.parametrize("trainer", ["lru", "gpu-only"])
def test_caches_and_device_tables_move_rows_through_the_device(tiny_config, trainer):
    dev = stand_in()
    with make_trainer(trainer, tiny_config, device=dev) as t:
        records = list(t.train(3))
        t.embedding_weights()
    copies = [(c, d) for c, d in dev.runtime.calls_of() if c.startswith("to_")]
    moves = Counter((c, d["non_blocking"]) for c, d in copies)
    # a step's ids and offsets (a cache's: slots too) in one pinned copy, then the dense features
    # and labels in another: asynchronous, from pinned memory (and once, first, the tables' bases)
    steps = [d for c, d in copies if c == "to_device" and d["non_blocking"]]
    assert len(steps) == 1 + 2 * 3 and all(d["pinned"] and len(d["shape"]) == 1 for d in steps)
    if trainer == "gpu-only":
        assert moves[("to_device", False)] > 0 and moves[("to_host", False)] > 0  # the tables, there and back
    else:  # the device's row kernels read misses and write victims over the link: no row copied
        assert sum(r.fetched_rows for r in records) > 0
        assert moves[("to_device", False)] == 0 and moves[("to_host", False)] == 0
