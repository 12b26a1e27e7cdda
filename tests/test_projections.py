"""Projections without training (scratchkit/projection/counters.py) and the course's speed-up map:
the batch-granular LRU and the static cache of sim/ counted on hand-worked id streams, the planner's
counters against the scratchpipe trainer's own, and the grid and figure the notebook draws."""

import numpy as np
import pytest

from scratchkit.course.projections import speedup_grid
from scratchkit.course.viz.projections import speedup_figure
from scratchkit.designs.demand_cache import lru_moves, static_moves
from scratchkit.projection import counters
from scratchkit.sim.lru import lru_by_batch
from scratchkit.sim.static import static_by_batch
from scratchkit.trainers import make_trainer


class Stream:
    """A batch source of one table whose batches are the given id lists."""

    def __init__(self, batches):
        self.batches = [np.asarray(b, dtype=np.int64) for b in batches]

    def batch(self, b):
        return type("Batch", (), {"ids": [self.batches[b]]})()


def test_a_batch_granular_lru_by_hand():
    # capacity 2. b0 {0,1}: 2 in. b1 {1,2}: 2 in, 0 out. b2 {0,3}: both in, 1 and 2 out. b3 {0,3}: none.
    sets = [np.array(s) for s in ([0, 1], [1, 2], [0, 3], [0, 3])]
    assert lru_by_batch(sets, rows=4, capacity=2).tolist() == [[2, 0], [1, 1], [2, 2], [0, 0]]
    config = tiny_config_of(table=4, capacity=2)  # the design's counters: the mean of b2, b3
    assert lru_moves(config, Stream([list(s) for s in sets]), 4) == (1.0, 1.0)


def test_a_static_cache_by_hand():
    # the first half's hottest id (0) pinned; b2 {0,3} misses 1, b3 {1,3} misses 2
    sets = [np.array(s) for s in ([0, 1], [0, 2], [0, 3], [1, 3])]
    assert static_by_batch(sets, rows=4, capacity=1, profiled=2).tolist() == [1, 2]
    assert static_moves(tiny_config_of(table=4, capacity=1), Stream([list(s) for s in sets]), 4) == (1.5, 1.5)


def tiny_config_of(table: int, capacity: int):
    from dataclasses import replace

    from scratchkit.config import CacheParams
    from scratchkit.profiles import get_profile

    config = get_profile("tiny")
    return config.replace(data=replace(config.data, table_sizes=(table,)), cache=CacheParams(capacity=capacity))


def test_nothing_moves_for_the_trainers_without_a_cache(tiny_config):
    assert counters.simulated_counters(tiny_config, "gpu-only") == (0.0, 0.0)
    with pytest.raises(ValueError, match="batches must be at least 2"):
        counters.simulated_counters(tiny_config, "lru", batches=1)


def test_the_planner_counts_what_the_scratchpipe_trainer_moves(tiny_config):
    """The simulated counters use PlanAhead; the trainer's StepRecords count what it did."""
    batches = 8
    fetched, written = counters.simulated_counters(tiny_config, "scratchpipe", batches=batches)
    records = list(make_trainer("scratchpipe", tiny_config).train(batches))
    second = records[batches // 2 :]
    assert fetched == pytest.approx(np.mean([r.fetched_rows for r in second]))
    assert written == pytest.approx(np.mean([r.written_back_rows for r in second]))


def test_the_speedup_grid_and_its_figure():
    grid = speedup_grid(scales=(0.01,), zipfs=(0.8, 1.2), batches=4, trainers=("scratchpipe", "gpu-only"))
    assert grid.table_rows == (10_000,) and grid.speedup["scratchpipe"].shape == (1, 2)
    assert np.all(grid.speedup["gpu-only"] > 1)  # an embedding-bound model on a GPU beats hybrid
    assert grid.over_peer["scratchpipe"].shape == (1, 2) and np.all(grid.over_peer["gpu-only"] > 0)
    # the ratio of the two peers' speeds is the same whichever trainer gives it
    assert np.allclose(
        grid.speedup["scratchpipe"] / grid.over_peer["scratchpipe"],
        grid.speedup["gpu-only"] / grid.over_peer["gpu-only"],
    )
    assert all(b for row in grid.bound["scratchpipe"] for b in row)
    fig = speedup_figure(grid)
    assert len(fig.data) == 2 and "h100-pcie5" in fig.layout.title.text
    assert grid.peer == "prefetch-lru-device" and "x prefetch-lru-device" in fig.data[0].hovertemplate
    with pytest.raises(ValueError, match="no trainer"):
        speedup_figure(type(grid)("h100-pcie5", "embedding-bound", (0.8,), (10,), 1))
