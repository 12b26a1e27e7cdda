"""prefetch-lru's prefetch runs on a thread of its own beside Train (trainers/prefetch.py): it
really runs at the same time, it joins before the step's update (a failed prefetch fails the step
with nothing applied), and no thread outlives a step, whether the step returns or raises. Where
the device is the CPU it runs inline by default, to the same weights."""

import threading

import pytest
import torch

from scratchkit.config import CacheParams, SummationOrder
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.measure.reference import ReferenceRun
from scratchkit.device import Device
from scratchkit.trainers import make_trainer
from scratchkit.trainers.prefetch import PrefetchIn
from stand_ins import StandInCuda

THREAD = "prefetch-lru"


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD]


def reference_weights(config, steps):
    """Plain PyTorch (nn.EmbeddingBag + torch.optim) after `steps` steps: the independent answer."""
    reference = ReferenceRun(config, SyntheticSource(config.data), device="cpu")
    reference.train(steps)
    return reference.embedding_weights()


def by_id_weights(config, steps):
    """prefetch-lru on the CPU summing each id's gradients in lookup order, as the GPU's path does."""
    with make_trainer("prefetch-lru", config.replace(summation_order=SummationOrder.BY_ID), device="cpu") as trainer:
        list(trainer.train(steps))
        return trainer.embedding_weights()


def assert_weights_equal(trainer, expected):
    for got, want in zip(trainer.embedding_weights(), expected):
        assert torch.equal(got, want)


@pytest.fixture
def config(tiny_config):
    return tiny_config.replace(cache=CacheParams(capacity=150))


def test_the_next_batch_is_served_on_its_own_thread_while_this_one_trains(config, monkeypatch):
    trainer = make_trainer("prefetch-lru", config, device="cpu", prefetch_in="thread")
    in_train = threading.Event()
    served, overlapped = [], []
    serve, dense_step = trainer.serve, trainer.dense_step

    def watched_serve(batch, step, *args, **kwargs):
        thread = threading.current_thread().name
        served.append((step, thread))
        if thread == THREAD:  # the prefetch of `step` sees Train(step - 1) under way
            overlapped.append(in_train.wait(timeout=20))
            in_train.clear()
        return serve(batch, step, *args, **kwargs)

    def watched_dense_step(*args, **kwargs):
        in_train.set()
        return dense_step(*args, **kwargs)

    monkeypatch.setattr(trainer, "serve", watched_serve)
    monkeypatch.setattr(trainer, "dense_step", watched_dense_step)
    with trainer:
        records = list(trainer.train(5))
    assert served == [(0, "MainThread")] + [(b, THREAD) for b in range(1, 5)]
    assert overlapped == [True] * 4
    assert all("prefetch" in r.stage_seconds for r in records[:4]) and "prefetch" not in records[4].stage_seconds
    assert prefetch_threads() == []


def test_a_failed_prefetch_fails_its_step_before_the_update_and_joins(config, monkeypatch):
    trainer = make_trainer("prefetch-lru", config, device="cpu", prefetch_in="thread")
    serve = trainer.serve
    failing = {"on": True}

    def serve_failing_at_3(batch, step, *args, **kwargs):
        if step == 3 and failing["on"]:
            raise RuntimeError("the prefetch of batch 3 broke")
        return serve(batch, step, *args, **kwargs)

    monkeypatch.setattr(trainer, "serve", serve_failing_at_3)
    with trainer:
        with pytest.raises(RuntimeError, match="prefetch of batch 3"):
            list(trainer.train(5))
        assert prefetch_threads() == []
        assert trainer.next_batch == 2 and trainer.torn is None  # step 2 failed whole
        assert_weights_equal(trainer, reference_weights(config, 2))
        failing["on"] = False
        list(trainer.train(4))  # and is simply taken again
        assert_weights_equal(trainer, reference_weights(config, 6))


def test_a_step_that_fails_in_train_waits_for_its_prefetch_and_drops_it(config, monkeypatch):
    trainer = make_trainer("prefetch-lru", config, device="cpu", prefetch_in="thread")
    dense_step, serve = trainer.dense_step, trainer.serve
    prefetched = []

    def dense_step_failing_at_1(batch, pooled, step):
        if step == 1:
            raise RuntimeError("Train(1) broke")
        return dense_step(batch, pooled, step)

    def watched_serve(batch, step, *args, **kwargs):
        prefetched.append((step, threading.current_thread().name))
        return serve(batch, step, *args, **kwargs)

    monkeypatch.setattr(trainer, "dense_step", dense_step_failing_at_1)
    monkeypatch.setattr(trainer, "serve", watched_serve)
    with trainer:
        with pytest.raises(RuntimeError, match=r"Train\(1\)"):
            list(trainer.train(4))
        assert (2, THREAD) in prefetched  # batch 2's prefetch ran beside Train(1)
        assert prefetch_threads() == [] and trainer.next_batch == 1
        monkeypatch.setattr(trainer, "dense_step", dense_step)
        list(trainer.train(4))
        assert_weights_equal(trainer, reference_weights(config, 5))


def test_a_gpu_prefetches_on_a_thread_and_a_cpu_inline_to_the_same_weights(config, monkeypatch):
    threads = {}
    for where, device in (("gpu", Device("cpu", StandInCuda())), ("cpu", "cpu")):
        trainer = make_trainer("prefetch-lru", config, device=device)
        serve = trainer.serve
        seen = threads.setdefault(where, set())

        def watched_serve(batch, step, *args, seen=seen, serve=serve, **kwargs):
            seen.add(threading.current_thread().name)
            return serve(batch, step, *args, **kwargs)

        monkeypatch.setattr(trainer, "serve", watched_serve)
        with trainer:
            assert trainer.prefetch_in is (PrefetchIn.THREAD if where == "gpu" else PrefetchIn.INLINE)
            list(trainer.train(6))
            # on the GPU's path Train runs tbe.cu's kernels, which add each id's gradients in
            # lookup order: the CPU's by-id run, bit for bit (tests/test_device_tbe.py)
            assert_weights_equal(trainer, reference_weights(config, 6) if where == "cpu" else by_id_weights(config, 6))
    assert threads == {"gpu": {"MainThread", THREAD}, "cpu": {"MainThread"}}
    assert PrefetchIn("inline").resolve(on_gpu=True) is PrefetchIn.INLINE
