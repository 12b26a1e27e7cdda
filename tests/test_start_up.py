"""Start-up that does not swamp a run: the tables drawn on every core, the same at any thread count;
no compiler imported by a training run; `bench` reporting set-up apart from its timed steps."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from scratchkit.commands.cli import main
from scratchkit.commands.tables import format_table
from scratchkit.embedding.tables import (
    BLOCK_ROWS,
    BLOCK_SEED_STEP,
    MAX_BLOCKS,
    MAX_TABLES,
    block_seed,
    init_embedding_weights,
)
from scratchkit.measure.bench import run_bench

REPO = Path(__file__).resolve().parents[1]
SIZES = (3 * BLOCK_ROWS + 17, 500, BLOCK_ROWS)  # several blocks and a partial one; one; exactly one


def test_tables_are_the_same_at_1_2_and_4_threads():
    one, two, four = (init_embedding_weights(SIZES, 4, seed=7, threads=n) for n in (1, 2, 4))
    for a, b, c, n in zip(one, two, four, SIZES):
        assert a.shape == (n, 4) and torch.equal(a, b) and torch.equal(a, c)
        assert float(a.abs().max()) <= 1 / math.sqrt(n)
    first = one[0]
    blocks = [first[b * BLOCK_ROWS : (b + 1) * BLOCK_ROWS][:5] for b in range(4)]
    assert all(not torch.equal(blocks[0], other) for other in blocks[1:])  # a generator of each block's own


def test_a_table_of_one_block_draws_what_one_generator_seeded_for_it_draws():
    """Small tables (tiny, small and the notebooks' profiles) keep the rows one generator per table
    draws: seeded by (seed, table), as the reference in measure/reference.py takes them."""
    sizes, seed = (500, 300, BLOCK_ROWS), 3
    drawn = init_embedding_weights(sizes, 8, seed)
    for t, (w, n) in enumerate(zip(drawn, sizes)):
        generator = torch.Generator().manual_seed(seed * 1_000_003 + t + 1)
        alone = torch.empty(n, 8).uniform_(-1 / math.sqrt(n), 1 / math.sqrt(n), generator=generator)
        assert torch.equal(w, alone)


def test_no_two_blocks_share_the_32_bits_of_seed_mt19937_keeps():
    """torch's CPU generator keeps a seed's low 32 bits: two seeds 2^32 apart draw the same rows."""
    same = [torch.rand(4, generator=torch.Generator().manual_seed(s)) for s in (5, 5 + 2**32)]
    assert torch.equal(*same)
    # block b of table t: seed(t) + b * STEP, so two blocks agree mod 2^32 only if d * STEP is
    # within MAX_TABLES of a multiple of 2^32 for some block distance d
    d = np.arange(1, MAX_BLOCKS, dtype=np.uint64)
    low = (d * np.uint64(BLOCK_SEED_STEP)) % np.uint64(2**32)
    nearest = np.minimum(low, np.uint64(2**32) - low)
    assert int(nearest.min()) >= MAX_TABLES
    seeds = {block_seed(11, t, b) % 2**32 for t in (0, 1, MAX_TABLES - 1) for b in (0, 1, 2, MAX_BLOCKS - 1)}
    assert len(seeds) == 12


def test_a_table_beyond_the_blocks_seeds_is_refused_before_anything_is_drawn():
    with pytest.raises(ValueError, match="the blocks' seeds"):
        init_embedding_weights((MAX_BLOCKS * BLOCK_ROWS + 1,), 1, seed=0)


SHORT_RUN = """
import sys
sys.path.insert(0, "tests")
from stand_ins import StandInCuda
from scratchkit.config import OptimizerConfig, OptimizerKind
from scratchkit.device import Device, TorchCuda
from scratchkit.profiles import get_profile
from scratchkit.trainers import available_trainers, make_trainer

for kind in OptimizerKind:
    config = get_profile("tiny").replace(optimizer=OptimizerConfig(kind=kind))
    for name in available_trainers():
        for device in ("cpu", Device("cpu", StandInCuda())):  # the CPU's lines, then CUDA's
            with make_trainer(name, config, device=device) as trainer:
                list(trainer.train(2))
TorchCuda().deterministic()  # what a CUDA run switches on (a flag: no GPU needed)
print("torch._dynamo" in sys.modules)
import torch
torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)  # the control: torch.optim imports it
print("torch._dynamo" in sys.modules)
"""


def test_a_short_training_run_imports_no_compiler():
    """torch._dynamo takes seconds to import and the kit compiles
    nothing with it: no trainer, optimizer or device switch may pull it in."""
    proc = subprocess.run(
        [sys.executable, "-c", SHORT_RUN], cwd=REPO, capture_output=True, text=True, timeout=300, check=True
    )
    assert proc.stdout.split() == ["False", "True"], proc.stdout + proc.stderr


@pytest.mark.parametrize("rounds", [1, 2])
def test_bench_reports_set_up_apart_from_the_timed_steps(tiny_config, rounds):
    results = run_bench(tiny_config, ["gpu-only", "scratchpipe"], steps=2, warmup=1, rounds=rounds)
    for r in results:
        assert r.setup_s > 0 and r.warmup_s > 0
        assert r.seconds == pytest.approx(r.steps * tiny_config.data.batch_size / r.samples_per_s)
    assert "ms/step  setup s  warm-up s" in format_table(results).splitlines()[0]


def test_bench_json_rows_carry_set_up_and_warm_up(capsys):
    assert main(["bench", "--profile", "tiny", "--trainers", "hybrid", "--steps", "2", "--warmup", "1", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["setup_s"] > 0 and row["warmup_s"] > 0


def test_a_sharded_bench_reports_its_slowest_ranks_set_up(capsys):
    args = ["bench", "--profile", "tiny", "--trainers", "hybrid", "--steps", "2", "--warmup", "1", "--json"]
    assert main([*args, "--world-size", "2"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["world_size"] == 2 and row["setup_s"] > 0 and row["warmup_s"] > 0
