"""Where ScratchPipe wins, where a cache suffices: projected speed-ups over `hybrid` on a GPU
server (hybrid at its best: its host work on every core the server gives a GPU, capped by the
host's memory; designs/host_threads.py), and over `prefetch-lru-device`, the production peer
(an LRU cache filled one batch ahead, bookkept on the device), across locality (the Zipf
exponent) and table size.

Each point is a model the cost model projects without training it (scratchkit/projection/counters.py:
the working sets of its batches, and the rows the kit's own planner and a batch-granular LRU would
move), so a notebook draws the whole map in seconds. `course.viz.projections.speedup_figure`
draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from scratchkit.projection.counters import project_config
from scratchkit.profiles import get_profile
from scratchkit.designs import BASELINE, PRODUCTION_PEER

# ScratchPipe both ways, the production peer and its host-bookkept twin, and the upper bound
COMPARED = ("scratchpipe", "scratchpipe-device", "prefetch-lru", PRODUCTION_PEER, "gpu-only")


@dataclass
class SpeedupGrid:
    """Projected samples/s over hybrid's, per trainer, [table sizes x Zipf exponents]."""

    machine: str
    profile: str
    zipfs: tuple[float, ...]
    table_rows: tuple[int, ...]
    capacity: int  # cache and scratchpad rows per table
    peer: str = PRODUCTION_PEER  # whose speed `over_peer` divides by
    speedup: dict[str, np.ndarray] = field(default_factory=dict)
    over_peer: dict[str, np.ndarray] = field(default_factory=dict)  # samples/s over the production peer's
    bound: dict[str, list[list[str]]] = field(default_factory=dict)  # the stage that bounds each point


def speedup_grid(
    machine: str = "h100-pcie5",
    profile: str = "embedding-bound",
    zipfs=(0.6, 0.8, 1.0, 1.2),
    scales=(0.05, 0.25, 1.0),
    trainers=COMPARED,
    batches: int = 8,
) -> SpeedupGrid:
    """The profile at each `scale` (its tables' rows; the cache keeps its rows per table) and each
    Zipf exponent, projected on `machine`: each trainer's samples/s over hybrid's (`speedup`) and
    over the production peer's (`over_peer`). The tables of the embedding-bound profiles are
    alike, so one table's rows moved stand for all of them."""
    configs = {s: get_profile(profile, scale=s) for s in scales}
    rows = tuple(int(c.data.table_sizes[0]) for c in configs.values())
    grid = SpeedupGrid(machine, profile, tuple(zipfs), rows, configs[scales[0]].cache.capacity or 0)
    for name in trainers:
        grid.speedup[name] = np.zeros((len(scales), len(zipfs)))
        grid.over_peer[name] = np.zeros((len(scales), len(zipfs)))
        grid.bound[name] = [[""] * len(zipfs) for _ in scales]
    peers = [p for p in (BASELINE, PRODUCTION_PEER) if p not in trainers]  # what the grid divides by
    for i, scale in enumerate(scales):
        for j, zipf in enumerate(zipfs):
            config = configs[scale].replace(data=replace(configs[scale].data, zipf=zipf))
            projected = project_config(config, [*peers, *trainers], [machine], batches, sample_tables=1)
            speed = {row[machine].trainer: row[machine].samples_per_s for row in projected}
            for row in projected[len(peers) :]:
                name = row[machine].trainer
                grid.speedup[name][i, j] = speed[name] / speed[BASELINE]
                grid.over_peer[name][i, j] = speed[name] / speed[PRODUCTION_PEER]
                grid.bound[name][i][j] = row[machine].bound_stage
    return grid
