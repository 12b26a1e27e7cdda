"""Sharding plans and the two views of a global batch (scratchkit/distributed/sharding.py,
routing.py), checked against brute force: no process group, no ranks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from scratchkit.data.batch import micro_batch
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.distributed.routing import Route, RoutedSource
from scratchkit.distributed.sharding import Sharding, plan_shards


def owner_by_brute_force(plan, table, row):
    (rank,) = [s.rank for s in plan.shards if s.table == table and s.start <= row < s.stop]
    return rank


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 60), min_size=1, max_size=6),
    world=st.integers(1, 5),
    kind=st.sampled_from(list(Sharding)),
)
@example(sizes=[4], world=3, kind=Sharding.ROW)  # hypothesis found it: the bound was max(sizes) < world
def test_every_row_has_exactly_one_owner_and_every_rank_some_rows(sizes, world, kind):
    try:
        plan = plan_shards(kind, sizes, world)
    except ValueError as error:  # only when some rank would own nothing
        assert "without any rows" in str(error)
        # row-wise blocks are ceil(n / world) rows (TorchRec's bucketizer), so the last rank owns
        # rows of table n only where (world - 1) blocks fall short of n: 4 rows over 3 ranks are
        # blocks of 2, 2 and none
        last_rank_idle = all((world - 1) * -(-n // world) >= n for n in sizes)
        assert kind is Sharding.TABLE and len(sizes) < world or kind is Sharding.ROW and last_rank_idle
        return
    for t, n in enumerate(sizes):
        covered = np.zeros(n, dtype=int)
        for s in plan.shards_of_table(t):
            covered[s.start : s.stop] += 1
        assert (covered == 1).all()
        rows = np.arange(n)
        assert plan.owners(t, rows).tolist() == [owner_by_brute_force(plan, t, r) for r in rows]
    assert all(plan.shards_of(r) for r in range(world))


def test_table_wise_puts_the_largest_table_first_on_the_least_loaded_rank():
    plan = plan_shards("table", (500, 300, 200), 2)
    assert [(s.table, s.rank) for s in plan.shards] == [(0, 0), (1, 1), (2, 1)]
    assert plan.rows_of(0) == 500 and plan.rows_of(1) == 500


def test_row_wise_cuts_blocks_of_ceil_rows_over_ranks_as_torchrec_does():
    plan = plan_shards("row", (10, 3), 4)
    assert [(s.table, s.start, s.rows, s.rank) for s in plan.shards] == [
        (0, 0, 3, 0),
        (0, 3, 3, 1),
        (0, 6, 3, 2),
        (0, 9, 1, 3),
        (1, 0, 1, 0),
        (1, 1, 1, 1),
        (1, 2, 1, 2),
    ]


def test_a_rank_left_without_rows_is_refused_naming_it_and_the_way_out():
    with pytest.raises(ValueError, match=r"leaves rank 3 without any rows: use --sharding row"):
        plan_shards("table", (500, 300, 200), 4)
    with pytest.raises(ValueError, match=r"unknown sharding 'diagonal'; choose from table, row"):
        plan_shards("diagonal", (5,), 1)


@pytest.mark.parametrize("kind", ["table", "row"])
def test_each_shard_sees_the_distinct_ids_it_owns_of_the_whole_global_batch(tiny_config, kind):
    source = SyntheticSource(tiny_config.data)
    plan = plan_shards(kind, tiny_config.data.table_sizes, 2)
    for b in range(3):
        whole = source.batch(b)
        seen = {t: set() for t in range(len(whole.ids))}
        for rank in range(2):
            routed = RoutedSource(source, plan, rank).batch(b)
            bags = routed.batch_size
            for shard, ids, offsets in zip(plan.shards_of(rank), routed.ids, routed.offsets):
                wanted = sorted({int(i) - shard.start for i in whole.ids[shard.table] if shard.start <= i < shard.stop})
                assert ids.tolist() == wanted  # sorted, distinct, local
                assert offsets.tolist() == [min(k, len(ids)) for k in range(bags)]  # a bag each
                seen[shard.table] |= {int(i) + shard.start for i in ids}
            assert bags == max(1, *(len(i) for i in routed.ids))
        assert all(seen[t] == set(whole.ids[t].tolist()) for t in seen)  # every id, once


def test_a_micro_batchs_ids_go_to_their_owners_table_by_table_and_come_back_in_place(tiny_config):
    source = SyntheticSource(replace(tiny_config.data, table_sizes=(50, 40, 30)))
    plan = plan_shards("row", (50, 40, 30), 3)
    batch = micro_batch(source.batch(0), 1, 2)
    route = Route.of(batch, plan)
    sent = route.send_ids().numpy()
    splits = route.split_sizes()
    assert sum(splits) == sum(len(np.unique(ids)) for ids in batch.ids)
    at = 0
    for rank, n in enumerate(splits):  # each owner's part: table by table, sorted ids
        part = sent[at : at + n]
        at += n
        tables = np.repeat(np.arange(3), route.counts[rank])
        expected = [
            sorted({int(i) for i in np.unique(batch.ids[t]) if plan.owners(t, np.array([i]))[0] == rank})
            for t in range(3)
        ]
        assert part.tolist() == [i for t in range(3) for i in expected[t]]
        assert (np.diff(tables) >= 0).all()
    rows = [torch.randn(len(u), 4) for u in route.unique]
    back = route.by_table(route.in_send_order(rows))
    assert all(torch.equal(a, b) for a, b in zip(back, rows))
    for t, ids in enumerate(batch.ids):  # each lookup finds its own id among the distinct ones
        assert (route.unique[t][route.inverse[t].numpy()] == ids).all()


def test_micro_batches_split_a_batch_into_its_samples_in_order(tiny_config):
    batch = SyntheticSource(tiny_config.data).batch(4)
    parts = [micro_batch(batch, r, 4) for r in range(4)]
    assert np.array_equal(np.concatenate([p.labels for p in parts]), batch.labels)
    assert np.array_equal(np.concatenate([p.dense for p in parts]), batch.dense)
    for t in range(batch.num_tables):
        assert np.array_equal(np.concatenate([p.ids[t] for p in parts]), batch.ids[t])
        assert all(p.offsets[t][0] == 0 and len(p.offsets[t]) == 8 for p in parts)
    with pytest.raises(ValueError, match="32 samples does not split into 3 equal micro-batches"):
        micro_batch(batch, 0, 3)
