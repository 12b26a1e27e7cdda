"""ScratchPipe's planner as the measurements use it: `PlanAhead` on empty scratchpads, as a
`train()` call starts it (scratchkit/scratchpipe/plan_ahead.py), for a config and a batch source."""

from __future__ import annotations

import numpy as np

from scratchkit.config import TrainConfig


def fresh_planner(config: TrainConfig, source, threads: int = 1, device: str | None = None):
    """A `PlanAhead` over `source` with every scratchpad empty, the trainer's depth, victim policy
    and horizon (4 x (depth + 1)) and plan stripes, `threads` planners at once; `device`: the
    device planner's (scratchpipe-device) on that torch device's engine."""
    from scratchkit.scratchpipe.plan_ahead import PlanAhead, PlanSetup

    sizes = tuple(config.data.table_sizes)
    capacities = tuple(config.cache.capacity_for(n) for n in sizes)
    depth = config.cache.depth
    setup = PlanSetup(
        sizes,
        capacities,
        depth,
        config.cache.victim_policy,
        holds=True,
        horizon=4 * (depth + 1),
        record_events=False,
        slot_ids=tuple(np.full(c, -1, np.int64) for c in capacities),
        dirty=tuple(np.zeros(c, bool) for c in capacities),
        last_trained=tuple(np.full(c, -1, np.int64) for c in capacities),
        threads=threads,
        stripes=config.cache.plan_stripes,
        device=device,
    )
    return PlanAhead(setup, source, 0)
