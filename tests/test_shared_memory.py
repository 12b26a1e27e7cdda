"""Shared memory for a forked process (scratchkit/embedding/shared_memory.py): the same pages in
both processes, and, with `map_in`, their page-table entries taken at once in the child rather than
one fault at a time at each page's first touch inside the host stages' clocks."""

import multiprocessing
import os
import sys

import numpy as np
import pytest
import torch

from scratchkit.embedding.shared_memory import PAGE, map_in, shared_array, shared_copy
from scratchkit.scratchpipe.events import Stage
from scratchkit.scratchpipe.host_stages import HostStages
from scratchkit.trainers.scratchpipe import ScratchPipeTrainer

resource = pytest.importorskip("resource")
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MADV_POPULATE_READ is Linux's")
PAGES = 2048  # 8 MiB


def faults_writing_every_page_in_a_child(array: np.ndarray, value: float, mapped: bool) -> tuple[int, int]:
    """(minor faults the forked child took writing `value` into one float of every page of
    `array`, pages it mapped in first). Writes only, as Insert's scatter: a read fault on a shared
    mapping maps the 15 pages around it too. The child's figures come back through a pipe."""
    context = multiprocessing.get_context("fork")
    reading, writing = context.Pipe(duplex=False)

    def child():
        pages = map_in([array]) if mapped else 0
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        array.reshape(-1)[:: PAGE // array.itemsize] = value
        writing.send((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, pages))

    process = context.Process(target=child)
    process.start()
    faults, pages = reading.recv()
    process.join()
    assert process.exitcode == 0
    return faults, pages


@linux
def test_a_forked_process_that_maps_the_shared_pages_in_writes_them_without_a_fault_each():
    """Linux copies no page-table entries of a shared mapping at a fork: the child faults at its
    first touch of every page (criteo-skew at scale 0.05, 2026-12-02: the forked Insert took 1,142
    minor faults in its first step). After map_in, writing every page faults (almost) none, and
    the parent still sees the writes: the pages stay shared."""
    array = shared_array((PAGES * PAGE // 4,), np.float32)
    array.fill(1.0)  # the parent has every page
    faults, _ = faults_writing_every_page_in_a_child(array, 2.0, mapped=False)
    assert faults >= PAGES // 2, f"only {faults} faults: the fork kept the entries, nothing to test"
    faults, pages = faults_writing_every_page_in_a_child(array, 3.0, mapped=True)
    assert pages == PAGES
    assert faults < PAGES // 8, f"{faults} faults writing {PAGES} pages after mapping them in"
    assert np.all(array.reshape(-1)[:: PAGE // 4] == 3.0)  # the child's writes, here


def test_map_in_takes_numpy_arrays_and_tensors_and_skips_none_and_empty_ones():
    tensor = shared_copy(torch.ones(PAGE // 4, 4))  # 4 pages
    mid_page = shared_array((PAGE // 2,), np.float32)[PAGE // 8 :]  # 1.5 pages from mid-page: 2
    pages = map_in([None, tensor, shared_array((0,), np.int64), mid_page])
    assert pages == (6 if sys.platform.startswith("linux") else 0)  # elsewhere nothing is mapped
    assert tensor.sum().item() == PAGE  # nothing written


@linux
def test_the_host_process_maps_its_memory_in_before_its_first_stage(tiny_config, monkeypatch):
    """The forked host process calls HostStages.map_in once, in itself, before any stage runs,
    over every row store: every page Insert writes."""
    seen = shared_array((4,), np.int64)  # [calls, pid, pages, stages begun by then]
    begun = shared_array((1,), np.int64)
    real = HostStages.map_in

    def map_in_and_note(stages):
        pages = real(stages)
        seen[:] = (seen[0] + 1, os.getpid(), pages, begun[0])
        return pages

    def hook(stage, b):  # the host process's stages (Plan's hook runs on the trainer's side)
        if stage is not Stage.PLAN:
            begun[0] += 1

    monkeypatch.setattr(HostStages, "map_in", map_in_and_note)
    trainer = ScratchPipeTrainer(tiny_config, where="host-process", stage_hook=hook)
    list(trainer.train(6))
    stages = trainer.stages
    expected = sum(-(-a.nbytes // PAGE) for pad in stages.pads for a in pad.host_arrays())
    calls, pid, pages, before = (int(x) for x in seen)
    assert calls == 1 and pid != os.getpid() and before == 0
    assert expected <= pages <= expected + len(stages.pads) * 5
    assert begun[0] > 0
