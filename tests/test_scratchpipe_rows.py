"""The scratchpad's row store (scratchkit/scratchpipe/rows.py): what the slots hold, shared with a
forked host process, written by the kernels' scatter (twin and host build alike)."""

import multiprocessing

import numpy as np
import pytest
import torch

from scratchkit.kernels.engine import EngineKind
from scratchkit.scratchpipe.rows import ScratchpadRows


@pytest.mark.parametrize("engine", [EngineKind.TWIN, EngineKind.HOST])
def test_scatter_place_and_the_dirty_bits(engine):
    pad = ScratchpadRows(num_rows=50, capacity=8, dim=3, state_width=1, engine=engine)
    slots, ids = np.array([5, 1, 6]), np.array([40, 2, 17])
    rows, state = torch.arange(9, dtype=torch.float32).reshape(3, 3), torch.tensor([[1.0], [2.0], [3.0]])
    pad.scatter(slots, rows, state)
    pad.place(slots, ids)
    assert torch.equal(pad.rows[slots], rows) and torch.equal(pad.state[slots], state)
    assert pad.slot_ids[slots].tolist() == [40, 2, 17] and pad.used() == 3
    assert pad.dirty_slots().tolist() == []  # fetched rows arrive clean
    pad.mark_trained(np.array([6, 1]), batch=4)
    assert pad.dirty_slots().tolist() == [1, 6] and pad.last_trained[[1, 5, 6]].tolist() == [4, -1, 4]
    pad.clear_dirty(np.array([1]))
    assert pad.dirty_slots().tolist() == [6]


def test_a_shared_store_is_the_same_memory_in_a_forked_process():
    pad = ScratchpadRows(num_rows=50, capacity=8, dim=2, state_width=0, engine=EngineKind.TWIN, shared=True)
    private = ScratchpadRows(num_rows=50, capacity=8, dim=2, state_width=0, engine=EngineKind.TWIN)

    def child():  # as the host process's Insert does
        for store in (pad, private):
            store.scatter(np.array([3]), torch.ones(1, 2), None)
            store.place(np.array([3]), np.array([9]))
            store.mark_trained(np.array([3]), 7)

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join()
    assert process.exitcode == 0
    assert pad.rows[3].tolist() == [1.0, 1.0] and pad.slot_ids[3] == 9 and pad.dirty[3]
    assert pad.last_trained[3] == 7
    assert private.rows[3].tolist() == [0.0, 0.0] and private.slot_ids[3] == -1  # the child's own copy


def test_a_shared_store_lives_in_host_memory():
    with pytest.raises(ValueError, match="a shared row store lives in host memory"):
        ScratchpadRows(10, 2, 2, 0, EngineKind.CUPY, shared=True)


@pytest.mark.parametrize("shared", [False, True])
def test_a_new_store_has_its_pages_before_the_first_insert(shared):
    """np.zeros and a fresh shared mapping get their pages from the kernel at the first write: a
    scratchpad still filling paid those faults inside Insert's clock (criteo-skew at scale 0.05,
    2026-12-02, inline: Insert's scatter 3.4 ms a step on average over 40 steps, 0.34 after). The
    store writes every page as it is made, so filling every slot faults (almost) none."""
    resource = pytest.importorskip("resource")
    capacity, dim = 2**15, 64  # 8 MiB of rows: 2,048 pages
    pad = ScratchpadRows(
        num_rows=2**16, capacity=capacity, dim=dim, state_width=0, engine=EngineKind.TWIN, shared=shared
    )
    rows, slots = torch.ones(capacity, dim), np.arange(capacity)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    pad.scatter(slots, rows, None)
    pad.clear_dirty(slots)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults < 2048 // 8, f"{faults} page faults filling a store of 2,048 pages"
