"""Notebook 07's exercises: who owns a row, and what a rank sends in one sharded step.

row_owner(ids, rows, world_size)            the rank that owns each id of a table of `rows`
                                            rows sharded row-wise: checked against
                                            scratchkit.distributed.sharding (plan.owners)
request_bytes(micro_ids, plan, rank, dim)   the bytes rank `rank` sends for its micro-batch
                                            (ids, their counts, gradients): checked against
                                            scratchkit.distributed.sharded_cost's count
"""

from __future__ import annotations

import numpy as np

from scratchkit.course.exercises.checking import Case, Exercise, register
from scratchkit.data.batch import micro_batch
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.distributed.sharding import plan_shards
from scratchkit.distributed.sharded_cost import exchange_bytes, remote_ids
from scratchkit.profiles import get_profile


def kit_owner(ids: np.ndarray, rows: int, world_size: int) -> np.ndarray:
    return plan_shards("row", [rows], world_size).owners(0, ids)


def _ids(*ids) -> np.ndarray:
    return np.array(ids, dtype=np.int64)


def _owner_cases() -> list[Case]:
    small = get_profile("small").data
    ids = SyntheticSource(small).batch(0).ids[0]
    return [
        Case(
            (_ids(0, 1, 25, 30, 74, 99), 100, 4),
            "100 rows over 4 ranks",
            "rows are cut into contiguous blocks, one per rank (not dealt round-robin): rank = id // block",
        ),
        Case(
            (np.arange(10), 10, 4),
            "10 rows over 4 ranks: blocks of 3",
            "block = ceil(rows / world_size): ranks 0..2 get 3 rows, the last rank the 1 left over",
        ),
        Case((np.arange(7), 7, 2), "7 rows over 2 ranks", "block = ceil(7 / 2) = 4 rows: ids 0..3 on rank 0"),
        Case((_ids(0, 17, 49), 50, 1), "one rank", "with one rank, it owns every row"),
        Case(
            (ids, small.table_sizes[0], 8),
            "batch 0's ids of the small profile's table 0, 8 ranks",
            shown=f"batch(0).ids[0] [{ids.size}], {small.table_sizes[0]}, 8",
        ),
    ]


def kit_request_bytes(micro_ids, plan, rank: int, dim: int) -> int:
    sent = exchange_bytes(remote_ids(plan, micro_ids, rank), len(micro_ids), plan.world_size, dim)
    return sent["ids"] + sent["grads"]


def _bytes_cases() -> list[Case]:
    config = get_profile("small")
    whole = SyntheticSource(config.data).batch(0)
    small_plan = plan_shards("row", config.data.table_sizes, 4)
    two = plan_shards("row", [10, 10], 2)  # ids 0..4 on rank 0, 5..9 on rank 1
    tables = plan_shards("table", [30, 20, 10], 2)  # table 0 on rank 0, tables 1 and 2 on rank 1
    return [
        Case(
            ([_ids(1, 2), _ids(4)], two, 0, 4),
            "every id its own rank's",
            "nothing to ask for, yet the [N, T] counts still go to every other rank: 8 B per table and peer",
            shown="[[1, 2], [4]], row-wise [10, 10] over 2, rank 0, dim 4",
        ),
        Case(
            ([_ids(1, 7, 7, 8), _ids(0)], two, 0, 4),
            "an id asked for twice",
            "distinct ids cross the network: id 7, looked up twice, is sent once (and one gradient)",
            shown="[[1, 7, 7, 8], [0]], row-wise [10, 10] over 2, rank 0, dim 4",
        ),
        Case(
            ([_ids(7), _ids(7)], two, 0, 4),
            "the same id in two tables",
            "id 7 of table 0 and id 7 of table 1 are two rows: count distinct ids table by table",
            shown="[[7], [7]], row-wise [10, 10] over 2, rank 0, dim 4",
        ),
        Case(
            ([_ids(3, 25), _ids(3), _ids(3)], tables, 0, 16),
            "a table-wise plan",
            "ask the plan who owns an id: plan.owners(table, ids) != rank",
            shown="[[3, 25], [3], [3]], table-wise [30, 20, 10] over 2, rank 0, dim 16",
        ),
        Case(
            ([ids for ids in micro_batch(whole, 1, 4).ids], small_plan, 1, config.model.dim),
            "rank 1's micro-batch of the small profile's batch 0, 4 ranks row-wise",
            "per remote distinct id: 8 B for the id and dim x 4 B for its gradient; plus 8 B x tables "
            "x (world_size - 1) counts",
            shown="micro_batch(batch 0, 1, 4).ids, row-wise over 4, 1, 16",
        ),
    ]


register(
    Exercise(
        "row_owner",
        "row_owner(ids, rows, world_size)",
        _owner_cases,
        kit_owner,
        "block = ceil(rows / world_size); rank = id // block",
    ),
    Exercise(
        "request_bytes",
        "request_bytes(micro_ids, plan, rank, dim)",
        _bytes_cases,
        kit_request_bytes,
        "8 B x tables x (world_size - 1) for the counts, then for each distinct id of a table "
        "that plan.owners says another rank owns: 8 B (the id) + dim x 4 B (its gradient)",
    ),
)
