"""One table's device cache moves rows with the device's row kernels, from and to the host table
mapped into the device (embedding/device_cache.py): checked against plain indexing of the table,
on every engine (the NumPy twin, the host build of rows.cu, CuPy's launcher with a stand-in GPU)."""

import numpy as np
import pytest
import torch

from scratchkit.embedding.device_cache import DeviceCache
from scratchkit.scratchpipe.device_moves import host_view

ROWS, DIM, WIDTH = 50, 4, 1


def tables():
    generator = torch.Generator().manual_seed(7)
    return torch.randn(ROWS, DIM, generator=generator), torch.randn(ROWS, WIDTH, generator=generator)


def cache_of(weight, state, capacity, engine):
    return DeviceCache(host_view(weight, engine.xp), host_view(state, engine.xp), capacity, engine)


def test_fill_reads_the_host_rows_and_evict_writes_only_the_dirty_ones_home(engine):
    weight, state = tables()
    expected_w, expected_s = weight.clone(), state.clone()
    cache = cache_of(weight, state, 8, engine)
    ids, slots = np.array([41, 3, 17, 29]), np.array([5, 0, 2, 7])
    cache.fill(ids, slots)
    assert torch.equal(cache.rows[torch.from_numpy(slots)], expected_w[ids])
    assert torch.equal(cache.state[torch.from_numpy(slots)], expected_s[ids])
    assert list(cache.slot_of_id[ids]) == list(slots) and not cache.dirty.any()
    # "train" two of them: their slots change and become dirty, the others stay clean
    cache.rows[torch.tensor([5, 2])] += 1.0
    cache.state[torch.tensor([5, 2])] *= 2.0
    cache.dirty[[5, 2]] = True
    assert torch.equal(weight, expected_w)  # nothing reached the host yet
    assert cache.evict(np.array([5, 0])) == 1  # 41 dirty, 3 clean: one row written
    cache.finish()
    expected_w[41] += 1.0
    expected_s[41] *= 2.0
    assert torch.equal(weight, expected_w) and torch.equal(state, expected_s)
    assert cache.slot_of_id[41] == cache.slot_of_id[3] == -1 and list(cache.free_slots()) == [0, 1, 3, 4, 5, 6]
    assert cache.flush() == 1 and cache.flush() == 0  # 17's change; then nothing
    expected_w[17] += 1.0
    expected_s[17] *= 2.0
    assert torch.equal(weight, expected_w) and torch.equal(state, expected_s)


def test_transient_rows_grow_the_spare_area_and_go_home_in_order(engine):
    weight, state = tables()
    expected = weight.clone()
    cache = cache_of(weight, state, 3, engine)
    ids = np.array([9, 44, 1, 30])  # more than the spare area holds: it grows
    slots = cache.load_transient(ids)
    assert list(slots) == [3, 4, 5, 6] and tuple(cache.rows.shape) == (7, DIM)
    assert torch.equal(cache.rows[3:], expected[ids])
    cache.rows[3:] *= -1.0
    cache.return_transient(ids)
    cache.finish()
    expected[ids] *= -1.0
    assert torch.equal(weight, expected)


def test_a_capacity_outside_the_table_is_refused(engine):
    weight, state = tables()
    with pytest.raises(ValueError, match=r"cache capacity must be in \[1, 50\] rows, got 51"):
        cache_of(weight, state, ROWS + 1, engine)
