"""The batch loader (scratchkit/data/loader.py): batches made ahead of the step, on a thread of
their own, exactly the source's, each once, checked at the door, and refused by the step that
would train them; nothing of it outlives a `train()` call however the call ends."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest

from scratchkit.config import default_threads
from scratchkit.data.checks import BadBatchError
from scratchkit.data.loader import BatchLoader
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.device_work import Path, snapshot, waited
from scratchkit.measure.reference import ReferenceRun
from scratchkit.measure.step_faults import SPOILERS
from scratchkit.trainers import make_trainer
from scratchkit.device import Device
from stand_ins import StandInCuda

WAIT = 20.0  # seconds a test waits for the other thread before it calls the loader stuck
# (static reads its profile's batches as it is made: a bad one is refused before it trains)
TRAINERS = ["hybrid", "gpu-only", "lru", "prefetch-lru", "scratchpipe", "scratchpipe-device"]


class Counted(SyntheticSource):
    """Synthetic batches, each making counted; batch `bad` spoiled until `repair()`."""

    def __init__(self, data, bad: int = -1, spoil=None):
        super().__init__(data)
        self.made, self.bad, self.spoil = Counter(), bad, spoil
        self._lock = threading.Lock()

    def repair(self) -> None:
        self.spoil = None

    def batch(self, index):
        with self._lock:
            self.made[index] += 1
        batch = super().batch(index)
        return self.spoil(batch) if index == self.bad and self.spoil is not None else batch


def same(a, b) -> bool:
    arrays = lambda x: (x.dense, x.labels, *x.ids, *x.offsets)  # noqa: E731
    return all(p.dtype == q.dtype and np.array_equal(p, q) for p, q in zip(arrays(a), arrays(b)))


def loader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "batch-loader"]


def wait_for(condition) -> None:
    done = threading.Event()
    for _ in range(int(WAIT / 0.01)):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError("the loader did not get there")


# --- the loader alone -------------------------------------------------------------------------------
def test_it_hands_out_the_sources_batches_in_order_each_made_once(tiny_config):
    source, plain = Counted(tiny_config.data), SyntheticSource(tiny_config.data)
    with BatchLoader(source, source.table_sizes, 2, 9, ahead=2) as loader:
        assert all(same(loader.take(i), plain.batch(i)) for i in range(2, 9))
    assert source.made == Counter(range(2, 9))


def test_it_stays_ahead_by_its_window_and_never_reads_past_stop(tiny_config):
    source = Counted(tiny_config.data)
    with BatchLoader(source, source.table_sizes, 0, 5, ahead=2) as loader:
        wait_for(lambda: set(source.made) == {0, 1})  # two ahead of the trainer, before any take
        loader.take(0)
        wait_for(lambda: set(source.made) == {0, 1, 2})
        for i in (1, 2, 3):
            loader.take(i)
        wait_for(lambda: set(source.made) == set(range(5)))
        loader.take(4)
    assert max(source.made) == 4 and all(n == 1 for n in source.made.values())


class AllAtOnce(SyntheticSource):
    """A source whose batches 0..workers-1 are each made only once all of them are being made."""

    def __init__(self, data, workers: int):
        super().__init__(data)
        self.together = threading.Barrier(workers, timeout=WAIT)
        self.workers = workers

    def batch(self, index):
        if index < self.workers:
            self.together.wait()  # BrokenBarrierError unless `workers` threads make batches at once
        return super().batch(index)


def test_its_workers_make_batches_at_once_and_hand_them_out_in_order(tiny_config):
    source, plain = AllAtOnce(tiny_config.data, 3), SyntheticSource(tiny_config.data)
    with BatchLoader(source, source.table_sizes, 0, 12, ahead=2, workers=3) as loader:
        assert len(loader_threads()) == 3
        assert all(same(loader.take(i), plain.batch(i)) for i in range(12))
    assert loader_threads() == []


def test_with_several_workers_a_bad_batch_is_still_raised_by_its_own_take(tiny_config):
    spoil, message = SPOILERS["uint32 ids"]
    source = Counted(tiny_config.data, bad=3, spoil=spoil)
    with BatchLoader(source, source.table_sizes, 0, 40, ahead=4, workers=4) as loader:
        assert all(same(loader.take(i), SyntheticSource(tiny_config.data).batch(i)) for i in range(3))
        with pytest.raises(BadBatchError) as refused:
            loader.take(3)
        assert str(refused.value) == message
    assert source.made[3] == 1 and max(source.made) <= 3 + 4  # never past the window


def test_a_bad_batch_is_raised_by_the_take_of_its_index_and_read_anew_once_repaired(tiny_config):
    spoil, message = SPOILERS["uint64 ids"]
    source = Counted(tiny_config.data, bad=3, spoil=spoil)
    with BatchLoader(source, source.table_sizes, 0, 8, ahead=3) as loader:
        for i in range(3):
            loader.take(i)  # made ahead past the bad one's index: nothing raised before its take
        wait_for(lambda: 3 in source.made)
        with pytest.raises(BadBatchError) as refused:
            loader.take(3)
        assert str(refused.value) == message
        assert max(source.made) == 3  # after an error the thread makes nothing more
        source.repair()
        assert same(loader.take(3), SyntheticSource(tiny_config.data).batch(3))  # read again
    assert source.made[3] == 2


def test_the_thread_counts_its_host_waits_on_the_data_path(tiny_config):
    class Waits(SyntheticSource):
        def batch(self, index):
            waited("a source's own copy")
            return super().batch(index)

    train, data = snapshot(Path.TRAIN), snapshot(Path.DATA)
    with BatchLoader(Waits(tiny_config.data), tiny_config.data.table_sizes, 0, 4, ahead=2) as loader:
        for i in range(4):
            loader.take(i)
    assert (snapshot(Path.DATA) - data).waits == Counter({"a source's own copy": 4})
    assert (snapshot(Path.TRAIN) - train).host_syncs == 0


# --- in the trainers --------------------------------------------------------------------------------
class InStep(SyntheticSource):
    """Batch b+lead may be made only once step b has started, and step b may not finish until
    batch b+lead is made: made on the step's path, batch b+lead would wait for its own step, and
    step b for ever."""

    def __init__(self, data, lead: int):
        super().__init__(data)
        self.lead = lead
        self.started = [threading.Event() for _ in range(len(self))]
        self.made = [threading.Event() for _ in range(len(self))]

    def batch(self, index):
        if index >= self.lead and not self.started[index - self.lead].wait(WAIT):
            raise TimeoutError(f"batch {index} was made before step {index - self.lead} started")
        batch = super().batch(index)
        self.made[index].set()
        return batch


# prefetch-lru's step b takes batch b+1 at its start (to prefetch its rows): b+2 is made beside it
@pytest.mark.parametrize("name, lead", [("hybrid", 1), ("gpu-only", 1), ("lru", 1), ("prefetch-lru", 2)])
def test_the_next_batch_is_made_while_a_step_trains(tiny_config, name, lead):
    source = InStep(tiny_config.data, lead)
    trainer = make_trainer(name, tiny_config, source=source)
    dense_step = trainer.dense_step

    def step_waiting_for_the_next_batch(batch, pooled, b):
        source.started[b].set()
        ahead = b + lead
        assert ahead >= 6 or source.made[ahead].wait(WAIT), f"batch {ahead} was not made during step {b}"
        return dense_step(batch, pooled, b)

    trainer.dense_step = step_waiting_for_the_next_batch
    with trainer:
        records = list(trainer.train(6))
    assert [r.step for r in records] == list(range(6))
    reference = ReferenceRun(tiny_config, SyntheticSource(tiny_config.data))
    reference.train(6)
    assert all(bool((a == b).all()) for a, b in zip(trainer.embedding_weights(), reference.embedding_weights()))


@pytest.mark.parametrize("name", TRAINERS)
def test_no_loader_thread_outlives_a_call_that_ends_or_fails(tiny_config, name):
    spoil, message = SPOILERS["float64 dense"]
    source = Counted(tiny_config.data, bad=3, spoil=spoil)
    with make_trainer(name, tiny_config, source=source, device="cpu") as trainer:
        with pytest.raises(BadBatchError) as refused:
            list(trainer.train(6))
        assert str(refused.value) == message  # (ScratchPipe's capacity check refuses it as the call starts)
        assert loader_threads() == []
        source.repair()
        steps = trainer.train(6 - trainer.next_batch)
        next(steps)
        del steps  # an abandoned loop: the generator is closed, and its loader with it
        assert loader_threads() == []
        list(trainer.train(6 - trainer.next_batch))
        assert loader_threads() == []


def test_on_a_gpu_the_loaders_thread_pins_the_batch_and_the_step_copies_from_pinned_memory(tiny_config):
    dev = Device("cpu", StandInCuda())
    with make_trainer("hybrid", tiny_config, device=dev) as trainer:
        list(trainer.train(4))
    pins = [d["shape"] for c, d in dev.runtime.calls_of("batch-loader") if c == "pin"]
    data = tiny_config.data
    assert len(pins) == 4 * (2 + 2 * len(data.table_sizes))  # each batch's dense, labels, ids, offsets
    main = threading.main_thread().name
    # each step's dense features and labels cross in one asynchronous copy from pinned memory
    # (Device.to_device_together packs them)
    packed = (data.batch_size * (data.num_dense + 1),)
    dense = [d for c, d in dev.runtime.calls_of(main) if c == "to_device" and d["shape"] == packed]
    assert [d["pinned"] and d["non_blocking"] for d in dense] == [True] * 4


def test_a_lone_step_makes_its_batch_in_the_step(tiny_config):
    with make_trainer("gpu-only", tiny_config) as trainer:
        trainer.train_step()
        list(trainer.train(1))
    assert loader_threads() == []


def test_the_loaders_core_is_kept_from_the_host_loops_only_where_it_runs(tiny_config):
    none = tiny_config.replace(threads=None)
    with make_trainer("gpu-only", none) as ahead, make_trainer("gpu-only", none.replace(batches_ahead=0)) as not_ahead:
        assert ahead.host_threads == max(1, default_threads() - 1) == none.host_threads()  # what is priced
        assert not_ahead.host_threads == default_threads()
    with pytest.raises(ValueError, match="batches_ahead must be an integer >= 0, got -1"):
        tiny_config.replace(batches_ahead=-1)
    with pytest.raises(ValueError, match="loader_threads must be an integer >= 1, got 0"):
        tiny_config.replace(loader_threads=0)
    with make_trainer("gpu-only", none.replace(loader_threads=3)) as three:
        assert three.host_threads == max(1, default_threads() - 3)


def test_taking_past_a_bad_batch_starts_again_after_it(tiny_config):
    spoil, message = SPOILERS["no samples"]
    source = Counted(tiny_config.data, bad=1, spoil=spoil)
    with BatchLoader(source, source.table_sizes, 0, 6, ahead=2) as loader:
        loader.take(0)
        with pytest.raises(BadBatchError, match="batch 1: the batch has no samples"):
            loader.take(1)
        assert same(loader.take(2), SyntheticSource(tiny_config.data).batch(2))  # not stuck behind it
        assert same(loader.take(4), SyntheticSource(tiny_config.data).batch(4))  # skipping one


def test_closing_the_trainer_stops_the_loader_of_a_loop_left_running(tiny_config):
    trainer = make_trainer("gpu-only", tiny_config)
    steps = trainer.train(6)
    next(steps)
    assert len(loader_threads()) == 1
    trainer.close()
    assert loader_threads() == []
    with pytest.raises(RuntimeError, match="the batch loader is closed"):
        next(steps)
    assert trainer.next_batch == 1  # the step it refused changed nothing
