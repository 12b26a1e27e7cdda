"""Sharded training equals plain PyTorch trained on the same global batches as N micro-batches
with gradient accumulation in rank order: 0.0 on the CPU (scratchkit/distributed/exchange.py,
replica.py say why). First the float facts the design rests on, then one rank in this process,
then real jobs of 2 and 4 ranks through the command line (CI runs the first two)."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn

from scratchkit.commands.cli import main as cli
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.distributed.rank import RankTrainer
from scratchkit.distributed.sharding import plan_shards
from scratchkit.embedding.optim import coalesce, lookup_gradients
from scratchkit.measure.reference import ReferenceRun
from scratchkit.measure.verify import largest_difference
from scratchkit.trainers import available_trainers

# --- the float facts ---------------------------------------------------------------------------


def test_coalescing_only_the_rows_one_rank_owns_sums_in_another_order():
    """Why an owner may not coalesce the lookups it received: torch sums duplicates in the order
    of an unstable sort of the whole array, and a subsequence sorts differently."""
    torch.manual_seed(0)
    worst = 0.0
    for _ in range(20):
        ids, grads = torch.randint(0, 200, (3000,)), torch.randn(3000, 16)
        unique, sums = coalesce(ids, grads, 200)
        mine = ids >= 100  # a row-wise shard: rows 100..199
        _, shard_sums = coalesce(ids[mine] - 100, grads[mine], 100)
        worst = max(worst, float((sums[unique >= 100] - shard_sums).abs().max()))
    assert worst > 0.0


@pytest.mark.parametrize("parts", [3, 4])
def test_per_micro_batch_sums_added_in_rank_order_are_plain_pytorchs_accumulation(parts):
    """What exchange.py does (coalesce each micro-batch, add in rank order) against plain
    PyTorch's gradient accumulation with the reference's hook; the reverse order differs, so the
    order is what the equality rests on."""
    torch.manual_seed(parts)
    bag = nn.EmbeddingBag(40, 8, mode="sum", sparse=True)
    bag.weight.register_hook(lambda grad: grad.coalesce())  # as scratchkit/measure/reference.py
    ids = [torch.randint(0, 40, (600,)) for _ in range(parts)]
    offsets = torch.arange(0, 600, 3)
    weights = [torch.randn(200, 8) for _ in range(parts)]
    for i, w in zip(ids, weights):
        (bag(i, offsets) * w).sum().backward()
    accumulated = bag.weight.grad.coalesce()
    sums = [coalesce(i, lookup_gradients(w, offsets, 600), 40) for i, w in zip(ids, weights)]

    def added(order):
        total = torch.zeros(40, 8)
        for r in order:
            total.index_add_(0, *sums[r])
        return float((total[accumulated.indices()[0]] - accumulated.values()).abs().max())

    assert added(range(parts)) == 0.0
    assert added(reversed(range(parts))) > 0.0


# --- one rank, in this process --------------------------------------------------------------------
@pytest.fixture
def one_rank_group():
    store = dist.TCPStore(
        "127.0.0.1", 0, 1, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=30)
    )
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("kind", ["table", "row"])
def test_one_rank_of_every_trainer_equals_the_reference(tiny_config, one_rank_group, kind):
    source = SyntheticSource(tiny_config.data)
    reference = ReferenceRun(tiny_config, source)
    reference.train(8)
    plan = plan_shards(kind, tiny_config.data.table_sizes, 1)
    for name in available_trainers():
        with RankTrainer(name, tiny_config, plan, 0, source=source) as rank:
            records = list(rank.train(8))
            rank.close()
            assert largest_difference(rank.embedding_weights(), reference.embedding_weights()) == 0.0, name
            dense = [p.detach() for p in rank.model.parameters()]
            assert largest_difference(dense, reference.dense_parameters()) == 0.0, name
        assert [r.step for r in records] == list(range(8)) and records[-1].samples == 32


class CountsBatches(SyntheticSource):
    def __init__(self, data):
        super().__init__(data)
        self.made = Counter()

    def batch(self, index):
        self.made[index] += 1
        return super().batch(index)


@pytest.mark.parametrize("name", ["gpu-only", "prefetch-lru"])
def test_a_rank_makes_each_global_batch_once(tiny_config, one_rank_group, name):
    """The shard trainer's loader makes global batch b ahead; the rank's step trains its samples
    from the same batch, which the routed batch carries, not from a second read of the source."""
    source = CountsBatches(tiny_config.data)
    with RankTrainer(name, tiny_config, plan_shards("row", tiny_config.data.table_sizes, 1), 0, source=source) as rank:
        list(rank.train(6))
    assert source.made == Counter(range(6))


def test_a_backend_without_all_to_all_is_refused_in_one_line_naming_torch(one_rank_group, monkeypatch):
    from scratchkit.distributed.group import require_all_to_all

    require_all_to_all(torch.device("cpu"))  # this torch's gloo has it

    def missing(*args, **kwargs):
        raise RuntimeError("ProcessGroup gloo does not support alltoall_base\nmore lines")

    monkeypatch.setattr(dist, "all_to_all_single", missing)
    with pytest.raises(
        RuntimeError,
        match=rf"^torch {re.escape(torch.__version__)}'s gloo backend cannot run "
        r"all_to_all_single with uneven splits \(ProcessGroup gloo does "
        r"not support alltoall_base\); sharded training needs",
    ):
        require_all_to_all(torch.device("cpu"))


# --- real jobs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("sharding", ["row", "table"])
def test_verify_on_two_ranks_reports_0_0(capsys, sharding):
    """CI's check: `scratchkit verify --profile tiny --trainers hybrid,scratchpipe --world-size 2
    --sharding row` (and table) report 0.0, and say against what."""
    status = cli(
        ["verify", "--profile", "tiny", "--trainers", "hybrid,scratchpipe", "--world-size", "2", "--sharding", sharding]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    lines = [line for line in out.splitlines() if "max |diff|" in line]
    assert len(lines) == 2 and all("0.000e+00 (bit-exact)" in line and line.endswith(": OK") for line in lines)
    assert f"on 2 ranks ({sharding}-wise, gloo)" in lines[0]
    assert "2 micro-batches, gradients accumulated in rank order" in lines[0]
    assert "train_hit_rate 1.000000" in lines[1]


@pytest.mark.slow
def test_every_trainer_on_four_ranks_is_exact_with_adagrad(capsys):
    status = cli(
        [
            "verify",
            "--profile",
            "tiny",
            "--trainers",
            ",".join(available_trainers()),
            "--optimizer",
            "adagrad",
            "--steps",
            "6",
            "--world-size",
            "4",
            "--json",
        ]
    )
    rows = json.loads(capsys.readouterr().out)
    assert status == 0
    assert [r["trainer"] for r in rows] == available_trainers()
    assert all(
        r["max_abs_diff"] == 0.0 and r["state_max_abs_diff"] == 0.0 and r["world_size"] == 4 and r["sharding"] == "row"
        for r in rows
    )


@pytest.mark.slow
def test_torchrun_starts_the_same_ranks(tmp_path):
    """`torchrun --nproc-per-node 2 -m scratchkit.distributed verify ...`: the issue's launch line."""
    torchrun = Path(sys.executable).with_name("torchrun")
    done = subprocess.run(
        [
            str(torchrun),
            "--nproc-per-node",
            "2",
            "-m",
            "scratchkit.distributed",
            "verify",
            "--profile",
            "tiny",
            "--trainers",
            "lru",
            "--steps",
            "6",
            "--sharding",
            "table",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "0.000e+00 (bit-exact)" in done.stdout and "on 2 ranks (table-wise, gloo)" in done.stdout


@pytest.mark.slow
def test_torchrun_names_the_rank_that_raised(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    done = subprocess.run(
        [
            str(torchrun),
            "--nproc-per-node",
            "2",
            "-m",
            "scratchkit.distributed",
            "verify",
            "--profile",
            "tiny",
            "--trainers",
            "hybrid",
            "--steps",
            "6",
            "--inject-fault",
            "raise@1:2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode != 0
    root_cause = done.stderr[done.stderr.index("Root Cause") :]
    assert "rank      : 1 (local_rank: 1)" in root_cause and "exitcode  : 3" in root_cause
    assert "RankFailed: rank 1 stopped at step 2 (train): InjectedFault" in root_cause
