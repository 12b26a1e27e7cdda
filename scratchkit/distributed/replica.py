"""The dense model, data-parallel: a replica on every rank, the gradients combined exactly.

Each rank runs the MLPs forward and backward on its own micro-batch, its loss divided by the
world size N (the mean over the global batch, as gradient accumulation over N micro-batches
computes it). The dense gradients are then combined as the reference accumulates them:
`all_gather` every rank's gradients and add them on every rank in rank order,
((g_0 + g_1) + g_2) + ..., so every replica takes the same optimizer step and they stay equal
bit for bit. An `all_reduce` would be one collective instead of one all-gather, but it sums
in the backend's order: on 2 ranks that is still a + b (exact), on 4 gloo ranks it is not the
rank-order sum, and the dense weights drift from plain PyTorch's within steps (swap it in and
`scratchkit verify --profile tiny --trainers hybrid --world-size 4` shows it). The
cost is N copies of the dense gradients on each rank: kilobytes for the kit's MLPs.
"""

from __future__ import annotations

import copy
import time

import torch
import torch.distributed as dist

from scratchkit.config import TrainConfig
from scratchkit.device import Device
from scratchkit.distributed.failure import PeerLost
from scratchkit.embedding.optim import make_dense_optimizer
from scratchkit.model import init_dense_model
from scratchkit.trainers.base import dense_loss


class DenseReplica:
    """This rank's copy of the dense model and its optimizer; `step` trains one micro-batch."""

    def __init__(self, config: TrainConfig, num_dense: int, world_size: int, dev: Device, board=None):
        self.config, self.world_size, self.dev, self.board = config, world_size, dev, board
        self.model = init_dense_model(config.model, num_dense, len(config.data.table_sizes), config.seed).to(dev.torch)
        self.optimizer = make_dense_optimizer(self.model.parameters(), config.optimizer)
        self.seconds = {"dense": 0.0, "all_gather_dense": 0.0}

    def step(self, batch, pooled: torch.Tensor, step: int) -> tuple[float, torch.Tensor]:
        """Forward and backward of micro-batch `batch` with pooled [B/N, T, dim], the combined
        gradients, the optimizer step. -> (this micro-batch's loss, grad of pooled [B/N, T, dim])."""
        started = time.perf_counter()
        if self.board is not None:
            self.board.enter(step, "dense")
        loss, value, pooled = dense_loss(self.model, self.dev, batch, pooled, step, self.config.nonfinite_loss)
        self.optimizer.zero_grad(set_to_none=True)
        (loss if self.world_size == 1 else loss / self.world_size).backward()
        self.seconds["dense"] += time.perf_counter() - started
        self.combine(step)
        self.optimizer.step()
        return value, pooled.grad

    def combine(self, step: int) -> None:
        """Every rank's dense gradients, added in rank order, into this replica's `.grad`s."""
        started = time.perf_counter()
        if self.board is not None:
            self.board.enter(step, "all_gather dense")
        params = [p for p in self.model.parameters() if p.grad is not None]
        mine = torch.cat([p.grad.reshape(-1) for p in params])  # [P]
        every = [torch.empty_like(mine) for _ in range(self.world_size)]
        try:
            dist.all_gather(every, mine)
        except RuntimeError as error:
            raise PeerLost(step, "all_gather dense", error) from error
        total = every[0]
        for other in every[1:]:
            total = total + other  # rank order
        for p, part in zip(params, torch.split(total, [p.numel() for p in params])):
            p.grad.copy_(part.view_as(p))
        self.seconds["all_gather_dense"] += time.perf_counter() - started

    def take_times(self) -> dict[str, float]:
        times = dict(self.seconds)
        self.seconds = dict.fromkeys(times, 0.0)
        return times

    def state(self) -> dict:
        """The model's and the optimizer's state, copied (for a checkpoint)."""
        return {
            "model": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
            "dense_optimizer": copy.deepcopy(self.optimizer.state_dict()),
        }

    def load(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["dense_optimizer"])
