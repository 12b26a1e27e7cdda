"""Joining the job: this rank's place in it, its device, and the process group.

torchrun (and scratchkit's own launcher, launch.py) start each rank with RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT in its environment. The job's key-value store listens at
MASTER_ADDR:MASTER_PORT, hosted by torchrun's agent (TORCHELASTIC_USE_AGENT_STORE=True) or by the
launcher (SCRATCHKIT_LAUNCHER_STORE=1), so it outlives any rank and failure.py's reports survive
the rank that wrote them; started any other way, rank 0 hosts it.

The backend follows the device: gloo for CPU tensors, NCCL for CUDA ones (one GPU per rank,
`cuda:LOCAL_RANK`). The process group's timeout is the hang timeout: a collective that waits
longer for a peer fails (failure.py). Every collective the kit needs must exist for the backend;
`require_all_to_all` tries one at once, so an old torch whose gloo lacks all-to-all stops with
one clear line instead of failing mid-step.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

DEFAULT_HANG_TIMEOUT = 60.0  # seconds a collective waits for a peer before the job stops


@dataclass(frozen=True)
class RankEnv:
    """Where this process is in the job, from the environment torchrun sets."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    store_hosted: bool  # a launcher (torchrun's agent, or launch.py) hosts the store

    @classmethod
    def from_environ(cls, environ=os.environ) -> "RankEnv":
        missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in environ]
        if missing:
            raise ValueError(
                f"scratchkit.distributed runs as one rank of a job, but {', '.join(missing)} "
                "is not set: start it with `torchrun --nproc-per-node N -m "
                "scratchkit.distributed ...`, or use `scratchkit bench/verify --world-size N`"
            )
        hosted = (
            environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
            or environ.get("SCRATCHKIT_LAUNCHER_STORE") == "1"
        )
        return cls(
            int(environ["RANK"]),
            int(environ["WORLD_SIZE"]),
            int(environ.get("LOCAL_RANK", environ["RANK"])),
            environ["MASTER_ADDR"],
            int(environ["MASTER_PORT"]),
            hosted,
        )


def rank_device(requested: str | None, local_rank: int) -> torch.device:
    """This rank's device: `cuda:LOCAL_RANK` when CUDA is asked for (or, unasked, present)."""
    if requested is None:
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(requested)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", local_rank)
    return device


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def join(env: RankEnv, device: torch.device, hang_timeout: float = DEFAULT_HANG_TIMEOUT):
    """Connect to the job's store and start the process group. -> the store (for failure.py)."""
    if not hang_timeout > 0:
        raise ValueError(f"the hang timeout must be > 0 seconds, got {hang_timeout}")
    timeout = datetime.timedelta(seconds=hang_timeout)
    store = dist.TCPStore(
        env.master_addr,
        env.master_port,
        env.world_size,
        is_master=env.rank == 0 and not env.store_hosted,
        timeout=datetime.timedelta(seconds=max(hang_timeout, 60.0)),
    )
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = backend_for(device)
    dist.init_process_group(
        backend,
        store=dist.PrefixStore("scratchkit/group", store),
        rank=env.rank,
        world_size=env.world_size,
        timeout=timeout,
    )
    require_all_to_all(device)
    return store


def require_all_to_all(device: torch.device) -> None:
    """One tiny all_to_all_single with uneven splits (rank r sends o+1 values to rank o), checked,
    or one clear line naming torch's version. The kit needs only the single-tensor form: gloo has
    had it since 2020 (pytorch/pytorch#41424); the list form reached gloo only in 2026
    (pytorch/pytorch#165435), so the kit does not use it."""
    world, rank = dist.get_world_size(), dist.get_rank()
    send = torch.full((world * (world + 1) // 2,), rank, dtype=torch.int64, device=device)
    received = torch.empty(world * (rank + 1), dtype=torch.int64, device=device)
    try:
        dist.all_to_all_single(
            received, send, output_split_sizes=[rank + 1] * world, input_split_sizes=[o + 1 for o in range(world)]
        )
    except (RuntimeError, NotImplementedError) as error:
        raise RuntimeError(
            f"torch {torch.__version__}'s {dist.get_backend()} backend cannot run "
            f"all_to_all_single with uneven splits ({str(error).splitlines()[0]}); "
            "sharded training needs a torch whose backend has it (scratchkit is "
            "tested with torch 2.13)"
        ) from error
    expected = torch.arange(world, device=device).repeat_interleave(rank + 1)
    if not torch.equal(received, expected):
        raise RuntimeError(
            f"torch {torch.__version__}'s {dist.get_backend()} all_to_all_single "
            f"returned {received.tolist()} where {expected.tolist()} was due"
        )


def leave() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
