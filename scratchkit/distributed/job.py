"""What a rank does for `python -m scratchkit.distributed bench|verify|train`: the same work on
every rank, the results gathered to rank 0, which alone returns them (the command prints them).

    verify   each trainer sharded, then rank 0 compares the assembled tables, optimizer state and
             every replica's dense model with plain PyTorch trained on the same global batches as
             N micro-batches with gradient accumulation in rank order (0.0 on a CPU)
    bench    each trainer sharded, warm-up then timed steps; samples/s for the whole job
    train    one trainer, with checkpoints per shard (checkpoint.py) and resume

`run_rank` joins the job, runs one of them, and on any failure reports it (failure.py) and
raises RankFailed; the command exits non-zero then, and the launcher stops the rest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.distributed as dist

from scratchkit.config import TrainConfig
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.distributed import checkpoint
from scratchkit.distributed.failure import Fault, PeerLost, ProgressBoard, diagnose, report
from scratchkit.distributed.group import DEFAULT_HANG_TIMEOUT, RankEnv, backend_for, join, leave
from scratchkit.distributed.rank import RankTrainer
from scratchkit.distributed.sharding import Sharding, ShardingPlan, plan_shards
from scratchkit.measure.bench import BenchResult
from scratchkit.measure.reference import ReferenceRun
from scratchkit.measure.verify import CPU_TOLERANCE, GPU_TOLERANCE, VerifyResult, largest_difference
from scratchkit.designs import DESIGNS


@dataclass
class JobSpec:
    """One job's work, the same on every rank."""

    config: TrainConfig
    trainers: list[str]
    sharding: Sharding
    steps: int
    device: torch.device
    warmup: int = 0
    tolerance: float | None = None
    hang_timeout: float = DEFAULT_HANG_TIMEOUT
    fault: Fault | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0  # train: 0 = only at the end
    resume: bool = False  # train: from the newest complete checkpoint
    extras: dict = field(default_factory=dict)


class RankFailed(RuntimeError):
    """This rank stopped: its own error, or a peer's (`blame` says which rank, and why)."""

    def __init__(self, entry: dict):
        self.entry = entry
        blame = f" because {entry['blame']}" if entry["blame"] else ""
        super().__init__(
            f"rank {entry['rank']} stopped at step {entry['step']} ({entry['phase']}){blame}: {entry['error']}"
        )


def run_rank(command: str, spec: JobSpec, env: RankEnv):
    """Join the job, run `command` on this rank. -> rank 0's result (None on other ranks)."""
    store = join(env, spec.device, spec.hang_timeout)
    board = ProgressBoard(store, env.rank).start()
    try:
        plan = plan_shards(spec.sharding, spec.config.data.table_sizes, env.world_size)
        work = {"verify": verify_job, "bench": bench_job, "train": train_job}[command]
        result = work(spec, plan, env.rank, board)
    except BaseException as error:
        step, phase, _ = board.where
        blame = diagnose(store, env.world_size, env.rank) if isinstance(error, PeerLost) else (None, "")
        raise RankFailed(report(store, env.rank, error, step, phase, blame)) from error
    finally:
        board.stop()
    leave()
    return result


def _rank_trainer(name: str, spec: JobSpec, plan: ShardingPlan, rank: int, board, start=None):
    on_step = (lambda b: spec.fault(rank, b)) if spec.fault is not None else None
    return RankTrainer(name, spec.config, plan, rank, device=spec.device, start=start, board=board, on_step=on_step)


def gather(value, step: int, what: str) -> list | None:
    """`value` of every rank, on rank 0 (None elsewhere)."""
    everyone = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    try:
        dist.gather_object(value, everyone, dst=0)
    except RuntimeError as error:
        raise PeerLost(step, what, error) from error
    return everyone


# --- verify --------------------------------------------------------------------------------------
class Final(NamedTuple):
    """One rank's end of one trainer's run, as verify gathers it to rank 0."""

    weights: list[torch.Tensor]  # its shards' rows, in its shards' order
    state: list[torch.Tensor | None]  # their optimizer state
    dense: list[torch.Tensor]  # its replica's parameters
    hits: int  # Train's hits and lookups over the run, its shards'
    lookups: int


def whole_tables(plan: ShardingPlan, per_rank: list[list[torch.Tensor | None]]) -> list[torch.Tensor | None]:
    """Every rank's shards (each rank's list in its shards' order) -> whole global tables."""
    tables: list[list] = [[] for _ in plan.table_sizes]
    for rank, parts in enumerate(per_rank):
        for shard, part in zip(plan.shards_of(rank), parts):
            tables[shard.table].append((shard.start, part))
    return [
        None if parts[0][1] is None else torch.cat([p for _, p in sorted(parts, key=lambda x: x[0])])
        for parts in tables
    ]


def verify_job(spec: JobSpec, plan: ShardingPlan, rank: int, board) -> list[VerifyResult] | None:
    finals = []
    for name in spec.trainers:
        with _rank_trainer(name, spec, plan, rank, board) as trainer:
            records = list(trainer.train(spec.steps))
            trainer.close()  # flush: the host tables complete
            mine = Final(
                [w.detach().cpu().clone() for w in trainer.embedding_weights()],
                [s.detach().cpu().clone() if s is not None else None for s in trainer.embedding_state()],
                [p.detach().cpu().clone() for p in trainer.model.parameters()],
                sum(r.hits or 0 for r in records),
                sum(r.lookups for r in records),
            )
        finals.append(gather(mine, spec.steps, f"gather {name}"))
    if rank != 0:
        return None
    config, world = spec.config, plan.world_size
    reference = ReferenceRun(config, SyntheticSource(config.data), spec.device)
    reference.train(spec.steps, micro_batches=world)
    ref_emb, ref_state = reference.embedding_weights(), reference.embedding_state()
    ref_dense = reference.dense_parameters()
    tolerance = (
        spec.tolerance
        if spec.tolerance is not None
        else (GPU_TOLERANCE if spec.device.type == "cuda" else CPU_TOLERANCE)
    )
    results = []
    for name, everyone in zip(spec.trainers, finals):
        emb = whole_tables(plan, [f.weights for f in everyone])
        state = whole_tables(plan, [f.state for f in everyone])
        d = max(largest_difference(f.dense, ref_dense) for f in everyone)  # every replica
        e, s = largest_difference(emb, ref_emb), largest_difference(state, ref_state)
        extras = {
            "world_size": world,
            "sharding": plan.kind.value,
            "backend": backend_for(spec.device),
            "reference": f"plain PyTorch (each global batch as {world} micro-batches, "
            "gradients accumulated in rank order)",
        }
        if DESIGNS[name].plans_ahead:  # Train's hits / lookups, every shard together: always 1.0
            extras["train_hit_rate"] = sum(f.hits for f in everyone) / max(sum(f.lookups for f in everyone), 1)
        results.append(VerifyResult(name, spec.steps, max(d, e, s), d, e, s, tolerance, str(spec.device), extras))
    return results


# --- bench ---------------------------------------------------------------------------------------
def bench_job(spec: JobSpec, plan: ShardingPlan, rank: int, board) -> list[dict] | None:
    rows = []
    for name in spec.trainers:
        started = time.perf_counter()
        with _rank_trainer(name, spec, plan, rank, board) as trainer:
            setup_s = time.perf_counter() - started
            if hasattr(trainer.trainer, "events"):
                trainer.trainer.events.enabled = False  # the visualizer's trace is not measured
            started = time.perf_counter()
            steps_run = trainer.train(spec.warmup + spec.steps)
            for _ in range(spec.warmup):
                next(steps_run)
            warmup_s = time.perf_counter() - started
            sent_before = trainer.exchange.sent_bytes
            records = list(steps_run)
            sent = trainer.exchange.sent_bytes - sent_before
        mine = ([r.to_dict() for r in records], sent, (setup_s, warmup_s))
        everyone = gather(mine, spec.warmup + spec.steps, f"gather {name}")
        if rank == 0:
            rows.append(summarize(name, everyone, spec, plan))
    if rank != 0:
        return None
    for row in rows:
        row["ratio"] = row["samples_per_s"] / rows[0]["samples_per_s"]
    return rows


def summarize(name: str, everyone: list, spec: JobSpec, plan: ShardingPlan) -> dict:
    """One bench row for the whole job from every rank's timed records (as `run_bench`'s rows,
    plus the world size, the sharding and the bytes each step sends between ranks). Set-up and
    warm-up: the slowest rank's."""
    steps, world = spec.steps, plan.world_size
    seconds = max(sum(r["seconds"] for r in records) for records, _, _ in everyone)  # the slowest rank
    stages: dict[str, float] = {}
    for records, _, _ in everyone:  # mean over ranks, per step
        for r in records:
            for k, v in r["stage_seconds"].items():
                stages[k] = stages.get(k, 0.0) + v / (steps * world)
    total = lambda key: sum(r[key] or 0 for records, _, _ in everyone for r in records)
    lookups = total("lookups")
    result = BenchResult(
        name,
        steps,
        spec.config.data.batch_size * steps / seconds,
        seconds,
        stages,
        total("hits") / max(lookups, 1),
        lookups_per_step=lookups / steps,
        fetched_rows_per_step=total("fetched_rows") / steps,
        written_back_rows_per_step=total("written_back_rows") / steps,
        setup_s=max(setup_s for _, _, (setup_s, _) in everyone),
        warmup_s=max(warmup_s for _, _, (_, warmup_s) in everyone),
    )
    return result.to_dict() | {
        "world_size": world,
        "sharding": plan.kind.value,
        "backend": backend_for(spec.device),
        "sent_bytes_per_step": sum(sent for _, sent, _ in everyone) / steps,
        "rank_samples_per_s": [
            spec.config.data.batch_size // world * steps / sum(r["seconds"] for r in records)
            for records, _, _ in everyone
        ],
    }


# --- train ---------------------------------------------------------------------------------------
def train_job(spec: JobSpec, plan: ShardingPlan, rank: int, board) -> dict | None:
    """Train spec.trainers[0] for spec.steps steps (from a checkpoint with spec.resume), saving
    per-shard checkpoints every spec.checkpoint_every steps and at the end."""
    (name,) = spec.trainers[:1] or ["?"]
    start = None
    if spec.resume:
        if not spec.checkpoint_dir:
            raise ValueError("resuming needs the checkpoint folder (--checkpoint-dir)")
        newest = checkpoint.latest_complete(spec.checkpoint_dir)
        if newest is None:
            raise FileNotFoundError(f"no complete checkpoint in {spec.checkpoint_dir}")
        start = checkpoint.load_start(newest, plan.shards_of(rank), spec.config)
    saved, losses = [], []
    with _rank_trainer(name, spec, plan, rank, board, start) as trainer:
        first = trainer.next_batch
        for record in trainer.train(spec.steps):
            losses.append(record.loss)
            done = record.step + 1 - first
            if spec.checkpoint_dir and (
                done == spec.steps or spec.checkpoint_every and done % spec.checkpoint_every == 0
            ):
                saved.append(str(checkpoint.save_shards(trainer, spec.checkpoint_dir, plan.kind.value)))
        last = trainer.next_batch
    everyone = gather(losses, last, "gather losses")
    if rank != 0:
        return None
    return {
        "trainer": name,
        "world_size": plan.world_size,
        "sharding": plan.kind.value,
        "from_batch": first,
        "to_batch": last,
        "checkpoints": saved,
        "loss": [sum(ls) / len(ls) for ls in zip(*everyone)],
    }
