"""Checkpoints per shard (scratchkit/distributed/checkpoint.py): written by every rank, marked
complete by rank 0, and resumed exactly, by the same plan or another one, against plain PyTorch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from scratchkit.commands.cli import main as cli
from scratchkit.config import OptimizerConfig, OptimizerKind
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.distributed import checkpoint
from scratchkit.distributed.launch import launch
from scratchkit.measure.reference import ReferenceRun
from scratchkit.measure.verify import largest_difference


def train(folder, world, sharding, steps, *more):
    result = launch(
        [
            "train",
            "--profile",
            "tiny",
            "--trainers",
            "scratchpipe",
            "--optimizer",
            "adagrad",
            "--checkpoint-dir",
            str(folder),
            "--sharding",
            sharding,
            "--steps",
            str(steps),
            "--json",
            *more,
        ],
        world,
    )
    assert result.returncode == 0, (result.failure, [r.stderr for r in result.ranks])
    return json.loads(result.output)


def differences(saved, reference) -> float:
    dense = [saved["dense"]["model"][k] for k in saved["dense"]["model"]]
    return max(
        largest_difference(saved["weights"], reference.embedding_weights()),
        largest_difference(saved["state"], reference.embedding_state()),
        largest_difference(dense, reference.dense_parameters()),
    )


def reference_after(config, *runs) -> ReferenceRun:
    """Plain PyTorch trained run by run: (steps, micro-batches) each."""
    reference = ReferenceRun(config, SyntheticSource(config.data))
    for steps, parts in runs:
        reference.train(steps, micro_batches=parts)
    return reference


@pytest.mark.slow
def test_a_job_resumes_exactly_from_its_shards_under_another_plan_and_world_size(tmp_path, tiny_config):
    config = tiny_config.replace(optimizer=OptimizerConfig(kind=OptimizerKind.ADAGRAD))
    first = train(tmp_path, 2, "row", 6, "--checkpoint-every", "3")
    assert [p.rsplit("-", 1)[1] for p in first["checkpoints"]] == ["00000003", "00000006"]
    assert sorted(p.name for p in (tmp_path / "step-00000006").iterdir()) == [
        "complete.json",
        "shard-0-of-2.pt",
        "shard-1-of-2.pt",
    ]
    at_6 = checkpoint.assemble(checkpoint.latest_complete(tmp_path))
    assert differences(at_6, reference_after(config, (6, 2))) == 0.0
    # the test can fail: one process on the whole batch is not what 2 ranks compute
    assert differences(at_6, reference_after(config, (6, 1))) > 0.0

    second = train(tmp_path, 1, "table", 4, "--resume")  # 2 row-wise ranks -> 1 rank
    assert (second["from_batch"], second["to_batch"]) == (6, 10)
    at_10 = checkpoint.assemble(checkpoint.latest_complete(tmp_path))
    assert differences(at_10, reference_after(config, (6, 2), (4, 1))) == 0.0


def test_an_unfinished_step_is_never_the_one_resumed(tmp_path):
    (tmp_path / "step-00000003").mkdir()
    (tmp_path / "step-00000003" / "complete.json").write_text("{}")
    (tmp_path / "step-00000006").mkdir()  # a job died while saving it
    (tmp_path / "step-00000006" / "shard-0-of-2.pt").write_bytes(b"")
    assert checkpoint.latest_complete(tmp_path).name == "step-00000003"
    with pytest.raises(FileNotFoundError, match="not a complete checkpoint"):
        checkpoint.read_step(tmp_path / "step-00000006")


def test_rows_come_from_whichever_shard_files_hold_them():
    files = [
        {"shards": [{"table": 0, "start": 0, "rows": 3}], "weights": [torch.arange(3.0)[:, None]]},
        {"shards": [{"table": 0, "start": 3, "rows": 2}], "weights": [torch.arange(3.0, 5.0)[:, None]]},
    ]
    assert checkpoint.gather_rows(files, 0, 2, 3, "weights").flatten().tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="lacks row 5 of table 0"):
        checkpoint.gather_rows(files, 0, 4, 2, "weights")


def test_bad_sharding_flags_are_refused_in_one_line_before_any_rank_starts(capsys):
    def run(*flags):
        code = cli(["verify", "--profile", "tiny", *flags])
        return code, capsys.readouterr().err.strip().splitlines()

    assert run("--world-size", "0") == (2, ["scratchkit verify: error: --world-size must be >= 1, got 0"])
    assert run("--world-size", "2", "--sharding", "diagonal") == (
        2,
        ["scratchkit verify: error: --sharding: unknown sharding 'diagonal'; choose from table, row"],
    )
    code, lines = run("--world-size", "3")
    assert code == 2 and lines == [
        "scratchkit verify: error: --world-size 3 does not divide the batch "
        "of 32 samples: choose a --batch-size that it divides"
    ]
    code, lines = run("--world-size", "4", "--sharding", "table")
    assert code == 2 and "leaves rank 3 without any rows: use --sharding row" in lines[0]
    code, lines = run("--world-size", "2", "--inject-fault", "explode@1:2")
    assert code == 2 and lines == [
        "scratchkit verify: error: --inject-fault: unknown fault kind 'explode'; choose from raise, kill, hang"
    ]
    lone = subprocess.run(
        [sys.executable, "-m", "scratchkit.distributed", "verify"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin"},
    )
    assert lone.returncode == 2 and "start it with `torchrun --nproc-per-node N" in lone.stderr
