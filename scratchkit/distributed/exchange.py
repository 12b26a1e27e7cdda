"""The all-to-alls of one sharded step: ids to their owners, rows back, gradients to the owners.

Every rank plays two roles each step (scratchkit/distributed/routing.py): it trains the samples
of its micro-batch, and it owns some rows. With `Route` (the samples' side) and the arrivals
(the owner's side), a step is three exchanges, each one `all_to_all_single` with uneven splits
(`counts` first, so every rank knows how much arrives from whom):

    send_ids     each micro-batch's distinct ids -> their owners (after the [N, T] counts)
    send_rows    the owners' rows of those ids -> back, in the order the ids went
    send_grads   each micro-batch's coalesced gradients -> the owners, who add them up

Why it is exact (0.0 against one process on a CPU). Rows travel as rows, not as partial pooled
sums: the micro-batch pools its own lookups from the rows it received with the one
`embedding_bag` every trainer uses, over the same rows in the same order as the reference,
where TorchRec's row-wise sharding would reduce-scatter partial sums (another order of addition).
The gradients of a micro-batch are coalesced by the rank that trained it, on its own lookup ids:
the very array, and so the very sums, of the reference's micro-batch (scratchkit/measure/
reference.py). Each owner then adds the micro-batches' sums row by row in rank order,
((g_0 + g_1) + g_2) + ..., as the reference's gradient accumulation does. Coalescing at the
owner instead, over the lookups it received, would sum in the order of an unstable sort of
another array, and differ in the last bits (tests/test_distributed_exactness.py shows it).

The all-to-alls run on the default process group: gloo on a CPU (CPU tensors), NCCL on GPUs
(tensors on this rank's device). `timed` holds the seconds each took this step.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from scratchkit.distributed.failure import PeerLost
from scratchkit.distributed.routing import Route
from scratchkit.distributed.sharding import ShardingPlan


def all_to_all(
    send: torch.Tensor, send_splits: list[int], receive_splits: list[int], step: int, phase: str
) -> torch.Tensor:
    """`dist.all_to_all_single` with uneven splits along dim 0: send_splits[o] rows of `send` go to
    rank o; receive_splits[r] rows arrive from rank r, in rank order. -> [sum receive_splits, ...]
    A failure (a peer gone, or silent past the timeout) raises PeerLost naming step and phase."""
    received = send.new_empty((sum(receive_splits), *send.shape[1:]))
    try:
        dist.all_to_all_single(
            received, send.contiguous(), output_split_sizes=receive_splits, input_split_sizes=send_splits
        )
    except RuntimeError as error:
        raise PeerLost(step, phase, error) from error
    return received


@dataclass
class Arrivals:
    """What the owner received in `send_ids`: per (source rank, local table), positions in its
    shard's sorted distinct ids (the routed batch), and the splits of every later exchange."""

    positions: list[list[torch.Tensor]]  # [N][local tables] positions into that shard's ids
    counts: np.ndarray  # [N, T] ids of table t received from rank r

    @property
    def splits(self) -> list[int]:
        return [int(n) for n in self.counts.sum(axis=1)]


class Exchange:
    """Rank `rank`'s side of the step's exchanges (module docstring), on `device`."""

    def __init__(self, plan: ShardingPlan, rank: int, device: torch.device, board=None):
        self.plan, self.rank, self.device = plan, rank, torch.device(device)
        self.shards = plan.shards_of(rank)
        self.board = board  # failure.py's ProgressBoard: where this rank is
        self.timed: dict[str, float] = defaultdict(float)
        self.sent_bytes = 0  # to other ranks, all exchanges so far

    def _enter(self, phase: str, step: int) -> float:
        if self.board is not None:
            self.board.enter(step, phase)
        return time.perf_counter()

    def _took(self, what: str, started: float) -> None:
        self.timed[what] += time.perf_counter() - started

    def _count(self, send: torch.Tensor, splits: list[int]) -> None:
        """Bytes of `send` that go to other ranks (what crosses the network)."""
        row = send[0].numel() * send.element_size() if len(send) else 0
        self.sent_bytes += row * (sum(splits) - splits[self.rank])

    def take_times(self) -> dict[str, float]:
        times, self.timed = dict(self.timed), defaultdict(float)
        return times

    # --- the three exchanges ----------------------------------------------------------------
    def send_ids(self, route: Route, shard_ids: list[np.ndarray], step: int) -> Arrivals:
        """Counts, then ids, to their owners. `shard_ids`: this rank's routed batch (per local
        table the sorted distinct local ids); every id that arrives must be one of them."""
        phase = "all_to_all ids"
        started = self._enter(phase, step)
        N, T = route.counts.shape
        counts = (
            all_to_all(torch.from_numpy(route.counts.reshape(-1)).to(self.device), [T] * N, [T] * N, step, phase)
            .cpu()
            .numpy()
            .reshape(N, T)
        )  # [N, T] from rank r
        send = route.send_ids().to(self.device)
        ids = all_to_all(send, route.split_sizes(), [int(n) for n in counts.sum(axis=1)], step, phase).cpu().numpy()
        self._count(send, route.split_sizes())
        self.sent_bytes += 8 * T * (N - 1)  # the counts
        self._took("all_to_all_ids", started)
        return Arrivals(self._positions(ids, counts, shard_ids, step), counts)

    def _positions(self, ids: np.ndarray, counts: np.ndarray, shard_ids, step: int):
        ends = np.cumsum(counts.reshape(-1)).reshape(counts.shape)
        positions = []
        for r in range(counts.shape[0]):
            mine = []
            for local, shard in enumerate(self.shards):
                t = shard.table
                asked = ids[ends[r, t] - counts[r, t] : ends[r, t]] - shard.start
                have = shard_ids[local]
                where = np.searchsorted(have, asked)
                if len(asked) and (where.max() >= len(have) or (have[where] != asked).any()):
                    raise RuntimeError(
                        f"step {step}: rank {r} asked rank {self.rank} for rows of "
                        f"table {t} that its routed batch does not hold: the routing "
                        "and the plan disagree"
                    )
                mine.append(torch.from_numpy(where).to(self.device))
            if counts[r].sum() != sum(len(p) for p in mine):
                raise RuntimeError(f"step {step}: rank {r} sent rank {self.rank} ids of tables it does not own")
            positions.append(mine)
        return positions

    def send_rows(
        self, route: Route, arrivals: Arrivals, shard_rows: list[torch.Tensor], step: int
    ) -> list[torch.Tensor]:
        """The owner's rows of the ids that arrived, back to who asked. shard_rows: per local table
        [u_l, dim] the rows of the routed batch's ids. -> per global table [u_t, dim] the rows of
        this micro-batch's distinct ids."""
        phase = "all_to_all rows"
        started = self._enter(phase, step)
        send = torch.cat(
            [rows.index_select(0, where) for wanted in arrivals.positions for rows, where in zip(shard_rows, wanted)]
        )  # [sum arrivals, dim]
        received = all_to_all(send, arrivals.splits, route.split_sizes(), step, phase)
        self._count(send, arrivals.splits)
        self._took("all_to_all_rows", started)
        return route.by_table(received)

    def send_grads(
        self, route: Route, arrivals: Arrivals, sums: list[torch.Tensor], shard_sizes: list[int], step: int
    ) -> list[torch.Tensor]:
        """Each micro-batch's coalesced gradients [u_t, dim] -> their owners, who add them up in
        rank order. -> per local table [u_l, dim] the summed gradient of each routed id."""
        phase = "all_to_all gradients"
        started = self._enter(phase, step)
        send = route.in_send_order(sums)
        received = all_to_all(send, route.split_sizes(), arrivals.splits, step, phase)
        self._count(send, route.split_sizes())
        self._took("all_to_all_grads", started)
        dim = received.shape[1]
        totals = [received.new_zeros((n, dim)) for n in shard_sizes]  # per local table
        parts = iter(torch.split(received, [len(w) for wanted in arrivals.positions for w in wanted]))
        for wanted in arrivals.positions:  # rank 0's sums first, then rank 1's, ...
            for total, where in zip(totals, wanted):
                total.index_add_(0, where, next(parts))  # distinct rows: one addition each
        return totals
