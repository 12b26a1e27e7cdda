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
    return tiny_config.replace(data=replace(tiny_config.data, num_batches=2000),
                               cache=CacheParams(load_factor=0.5, depth=2))


def test_runs_to_the_end_and_reports(config):
    calls, finished = [], []
    run = BackgroundRun(lambda: make_trainer("hybrid", config), 12, on_records=calls.append, every=0.0,
                        on_finish=finished.append).start()
    run.join(60)
    assert not run.running and run.error is None and run.closed
    assert [r.step for r in run.records] == list(range(12))
    assert len(calls[-1]) == 12 and finished == [run]
    assert all(len(a) <= len(b) for a, b in zip(calls, calls[1:]))


def test_callback_is_throttled(config):
    calls = []
    run = BackgroundRun(lambda: make_trainer("hybrid", config), 30, on_records=calls.append, every=3600).start()
    run.join(60)
    assert len(calls) == 1 and len(calls[0]) == 30     # only the final call


def test_stop_closes_the_trainer_and_flushes_the_scratchpad(config):
    """Stopped mid-run, ScratchPipe's host tables equal the baseline after the steps that finished."""
    started = threading.Event()
    run = BackgroundRun(lambda: make_trainer("scratchpipe", config), 1000,
                        on_records=lambda r: started.set(), every=0.0).start()
    assert started.wait(60)
    run.stop(60)
    assert not run.running and run.closed and run.error is None
    steps = len(run.records)
    assert 0 < steps < 1000
    with make_trainer("gpu-only", config) as baseline:
        list(baseline.train(steps))
        expected = baseline.embedding_weights()
    for host, ref in zip(run.trainer.tables.weights, expected):   # no extra flush: close() did it
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
