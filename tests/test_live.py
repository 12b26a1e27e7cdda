"""BackgroundRun: trains in a thread, throttles its callback, stops cleanly and flushes."""

import threading
from dataclasses import replace

import pytest
import torch

from scratchkit.config import CacheParams
from scratchkit.course.live import BackgroundRun
from scratchkit.trainers import make_trainer


@pytest.fixture
def config(tiny_config):
    return tiny_config.replace(
        data=replace(tiny_config.data, num_batches=2000), cache=CacheParams(load_factor=0.5, depth=2)
    )


def test_runs_to_the_end_and_reports(config):
    calls, finished = [], []
    run = BackgroundRun(
        lambda: make_trainer("hybrid", config), 12, on_records=calls.append, every=0.0, on_finish=finished.append
    ).start()
    run.join(60)
    assert not run.running and run.error is None and run.closed
    assert [r.step for r in run.records] == list(range(12))
    assert len(calls[-1]) == 12 and finished == [run]
    assert all(len(a) <= len(b) for a, b in zip(calls, calls[1:]))


def test_callback_is_throttled(config):
    calls = []
    run = BackgroundRun(lambda: make_trainer("hybrid", config), 30, on_records=calls.append, every=3600).start()
    run.join(60)
    assert len(calls) == 1 and len(calls[0]) == 30  # only the final call


def test_stop_closes_the_trainer_and_flushes_the_scratchpad(config):
    """Stopped mid-run, ScratchPipe's host tables equal the baseline after the steps that finished."""
    started = threading.Event()
    run = BackgroundRun(
        lambda: make_trainer("scratchpipe", config), 1000, on_records=lambda r: started.set(), every=0.0
    ).start()
    assert started.wait(60)
    run.stop(60)
    assert not run.running and run.closed and run.error is None
    steps = len(run.records)
    assert 0 < steps < 1000
    with make_trainer("gpu-only", config) as baseline:
        list(baseline.train(steps))
        expected = baseline.embedding_weights()
    for host, ref in zip(run.trainer.tables.weights, expected):  # no extra flush: close() did it
        assert torch.equal(host, ref)


def test_a_run_in_chunks_asks_the_trainer_for_a_chunk_at_a_time_and_trains_on_as_one(config):
    """ScratchPipe plans every step it is asked for before its first: a long run asks for CHUNK at a
    time, and its steps, stops and flush are those of one run (the same host tables as gpu-only's)."""
    asked = []

    def trainer():
        made = make_trainer("scratchpipe", config)
        train = made.train
        made.train = lambda steps: (asked.append(steps), train(steps))[1]
        return made

    run = BackgroundRun(trainer, 25, chunk=10, stop_after=23).start()
    run.join(120)
    assert run.error is None and run.closed and asked == [10, 10, 5]
    assert [r.step for r in run.records] == list(range(23))
    with make_trainer("gpu-only", config) as baseline:
        list(baseline.train(23))
        expected = baseline.embedding_weights()
    for host, ref in zip(run.trainer.tables.weights, expected):
        assert torch.equal(host, ref)


def test_an_error_is_kept_not_printed(config, capsys):
    def broken():
        raise RuntimeError("no trainer today")

    finished = []
    run = BackgroundRun(broken, 5, on_finish=finished.append).start()
    run.join(10)
    assert isinstance(run.error, RuntimeError) and finished == [run]
    assert capsys.readouterr().out == ""


def test_refusals(config):
    with pytest.raises(ValueError, match="steps"):
        BackgroundRun(lambda: None, 0)
    run = BackgroundRun(lambda: make_trainer("hybrid", config), 1).start()
    run.join(30)
    with pytest.raises(RuntimeError, match="already been started"):
        run.start()
