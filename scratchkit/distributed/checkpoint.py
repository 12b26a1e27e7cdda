"""Checkpoints per shard: each rank writes its own rows; a job with any plan can resume from them.

    folder/step-00000010/shard-0-of-2.pt   rank 0's shards (rows, optimizer state), the dense
    folder/step-00000010/shard-1-of-2.pt   replica and the position: written atomically
    folder/step-00000010/complete.json     written by rank 0 once every rank's file is on disk

A step's folder counts only once `complete.json` is there, so a job killed while saving resumes
from the step before. A shard file names the rows it holds (table, start, rows), so resuming
does not need the plan that wrote it: each rank of the new job takes, for each of its shards,
the rows from whichever files hold them. The same world size and sharding read each file whole;
another (2 ranks row-wise -> 4 ranks table-wise, say) reads the rows where they are. Every file
carries the dense replica (all replicas are equal); the first is read.

Resuming is exact: the rows, their optimizer state, the dense model and its optimizer and the
next batch are all there, and every trainer equals the reference from any such state (its caches
or scratchpad refill from the host tables).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from scratchkit.distributed.failure import PeerLost
from scratchkit.distributed.sharding import Shard
from scratchkit.trainers.checkpoint import load_checkpoint_file, save_checkpoint_file

COMPLETE = "complete.json"


@dataclass
class ShardStart:
    """What a rank resumes from: its shards' rows and state, the dense replica's, the position."""

    rows: tuple[list[torch.Tensor], list[torch.Tensor | None]]
    dense: dict
    next_batch: int


def step_folder(folder: str | Path, step: int) -> Path:
    return Path(folder) / f"step-{str(step).zfill(8)}"  # sorts by name as by number


def save_shards(rank_trainer, folder: str | Path, sharding: str) -> Path:
    """Every rank at once, between steps: write this rank's file, wait for all, mark complete."""
    rank, world = rank_trainer.rank, rank_trainer.world_size
    step = rank_trainer.next_batch
    where = step_folder(folder, step)
    where.mkdir(parents=True, exist_ok=True)
    content = {
        "next_batch": step,
        "shards": [asdict(s) for s in rank_trainer.shards],
        "weights": [w.detach().cpu().clone() for w in rank_trainer.embedding_weights()],
        "state": [s.detach().cpu().clone() if s is not None else None for s in rank_trainer.embedding_state()],
        "dense": rank_trainer.replica.state(),
    }
    save_checkpoint_file(content, where / f"shard-{rank}-of-{world}.pt")
    try:
        dist.barrier()
    except RuntimeError as error:
        raise PeerLost(step, "checkpoint", error) from error
    if rank == 0:
        manifest = {
            "next_batch": step,
            "world_size": world,
            "sharding": sharding,
            "table_sizes": list(rank_trainer.plan.table_sizes),
            "optimizer": rank_trainer.config.optimizer.kind.value,
            "files": [f"shard-{r}-of-{world}.pt" for r in range(world)],
        }
        temporary = where / f".{COMPLETE}.tmp"
        temporary.write_text(json.dumps(manifest, indent=1))
        os.replace(temporary, where / COMPLETE)
    return where


def latest_complete(folder: str | Path) -> Path | None:
    """The newest step folder with its `complete.json`, or None."""
    steps = sorted(p for p in Path(folder).glob("step-*") if (p / COMPLETE).is_file())
    return steps[-1] if steps else None


def read_step(where: str | Path) -> tuple[dict, list[dict]]:
    """A complete step's manifest and its shard files' contents."""
    where = Path(where)
    if not (where / COMPLETE).is_file():
        raise FileNotFoundError(
            f"{where} is not a complete checkpoint (no {COMPLETE}: a job stopped "
            "while saving it); resume from the folder above it for the newest complete one"
        )
    manifest = json.loads((where / COMPLETE).read_text())
    return manifest, [load_checkpoint_file(where / name) for name in manifest["files"]]


def gather_rows(files: list[dict], table: int, start: int, rows: int, what: str) -> torch.Tensor | None:
    """Rows start..start+rows-1 of global table `table` (`what`: "weights" or "state"), from
    whichever files hold them."""
    out, filled = None, torch.zeros(rows, dtype=torch.bool)
    for content in files:
        for shard, values in zip(content["shards"], content[what]):
            lo, hi = max(start, shard["start"]), min(start + rows, shard["start"] + shard["rows"])
            if shard["table"] != table or lo >= hi or values is None:
                continue
            if out is None:
                out = values.new_empty((rows, values.shape[1]))
            out[lo - start : hi - start] = values[lo - shard["start"] : hi - shard["start"]]
            filled[lo - start : hi - start] = True
    if out is not None and not filled.all():
        missing = int(torch.nonzero(~filled)[0]) + start
        raise ValueError(f"the checkpoint lacks row {missing} of table {table}")
    return out


def load_start(where: str | Path, shards: list[Shard], config) -> ShardStart:
    """What a rank owning `shards` resumes from, out of the complete step folder `where`."""
    manifest, files = read_step(where)
    mine = ([int(n) for n in config.data.table_sizes], config.optimizer.kind.value)
    if (list(manifest["table_sizes"]), manifest["optimizer"]) != mine:
        raise ValueError(
            f"the checkpoint in {where} has tables {manifest['table_sizes']} and optimizer "
            f"{manifest['optimizer']}, this job {mine[0]} and {mine[1]}: resume with the "
            "configuration that wrote it"
        )
    weights = [gather_rows(files, s.table, s.start, s.rows, "weights") for s in shards]
    state = [gather_rows(files, s.table, s.start, s.rows, "state") for s in shards]
    return ShardStart((weights, state), files[0]["dense"], int(manifest["next_batch"]))


def assemble(where: str | Path) -> dict:
    """A complete step as one process's state: whole tables, optimizer state, dense model."""
    manifest, files = read_step(where)
    sizes = manifest["table_sizes"]
    return {
        "next_batch": manifest["next_batch"],
        "weights": [gather_rows(files, t, 0, n, "weights") for t, n in enumerate(sizes)],
        "state": [gather_rows(files, t, 0, n, "state") for t, n in enumerate(sizes)],
        "dense": files[0]["dense"],
    }
