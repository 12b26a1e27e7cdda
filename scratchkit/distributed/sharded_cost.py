"""The cost model beyond one process: what crosses the network each sharded step, and the time.

A sharded step (scratchkit/distributed) adds exchanges to one GPU's step. Per rank and step, with
weak scaling (every GPU trains the profile's batch B; N GPUs train a global batch of N*B):

    compute   projection.project() of one rank's work on one GPU: its micro-batch's dense model and
              pooling, and the rows it owns (its distinct ids of the global batch: its shard's
              working set). The server's host memory bandwidth and host cores are shared by its
              G GPUs' pipelines, so each rank gets 1/G of them; each GPU has its own PCIe link.
    traffic   what one rank sends to other ranks (exchange.py, replica.py), counted from the data:
                ids      8 B for each distinct id of its micro-batch that another rank owns, and
                         the [N, T] counts before them
                rows     dim * 4 B for each such id, sent back by its owner
                grads    dim * 4 B for each such id, sent to its owner
                dense    the all-gather of the dense gradients: (N - 1) * P * 4 B
    time      an exchange of b bytes per rank, spread evenly over the N - 1 peers: the share for
              the G - 1 peers in the server over NVLink, the share for the others over the GPU's
              NIC, both at once: latency + (N - 1) * peer latency + max(b_in / nvlink_bw,
              b_out / nic_bw)
    step      serial trainers: compute + every exchange. `scratchpipe`: the exchanges sit in
              Train, on the device, so they join the device's time: max(host, pcie, device +
              exchanges). `overlap_ids`: the id exchange hidden behind the previous step, as
              TorchRec's TrainPipelineSparseDist runs the input dist of batch i+1 during batch i.

`torchrec_traffic` counts what TorchRec's sharded EmbeddingBagCollection would send instead (not
bit-exact: it pools on the owner): every lookup's id, then pooled vectors, B x T x dim per rank
for table-wise (an all-to-all of each owner's pooled vectors) and N times that for row-wise (a
reduce-scatter of partial sums over the whole global batch), and an all-reduce of the dense
gradients. The kit sends rows instead of pooled vectors so that it can pool in the reference's
order; with pooling factor L, a row exchange carries up to L times a pooled one, less what
duplicate ids save.

The speeds (`Links`) are stated with their sources; every number is a parameter.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache

import numpy as np

from scratchkit.config import TrainConfig
from scratchkit.data.batch import micro_batch
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.distributed.sharding import plan_shards
from scratchkit.projection.project import project
from scratchkit.costmodel.hardware import GB, US
from scratchkit.projection.machines import get_machine
from scratchkit.designs.work import FLOAT_BYTES, ID_BYTES
from scratchkit.designs.step import StepWork
from scratchkit.measured import measured
from scratchkit.model import init_dense_model
from scratchkit.designs import DESIGNS

# ScratchPipe's misses per distinct row, when no run measured them: what a scratchpipe run on
# `small` fetches a step over the distinct rows it touches (scratchkit/measured.json says which run).
# Pass a measured share for other data.
MISS_SHARE = measured("miss_share")


@dataclass(frozen=True)
class Links:
    """How the GPUs of a job talk: G GPUs per server on NVLink, servers over one NIC per GPU."""

    name: str = "hgx-h100"
    gpus_per_server: int = 8
    nvlink_bw: float = 300 * GB  # per GPU, per direction, in an all-to-all
    nvlink_latency: float = 15 * US  # one collective within a server
    nic_bw: float = 45 * GB  # per GPU, per direction, to other servers
    nic_latency: float = 30 * US  # one collective across servers
    peer_latency: float = 1 * US  # each further peer of a collective (a send and a receive)
    sources: dict = field(
        default_factory=lambda: {
            "nvlink_bw": "NVLink 4 through NVSwitch (HGX/DGX H100): 900 GB/s per GPU both ways "
            "together, 450 GB/s each way (NVIDIA H100 datasheet); assumption: an "
            "all-to-all reaches two thirds of it",
            "nvlink_latency": "assumption: NCCL's small-message all-to-all within one server",
            "nic_bw": "one 400 Gb/s InfiniBand NIC per GPU (DGX H100: 8x ConnectX-7), 50 GB/s each "
            "way; assumption: 90% of it",
            "nic_latency": "assumption: NCCL's small-message all-to-all across servers",
            "peer_latency": "assumption: an all-to-all posts a send and a receive per peer",
            "gpus_per_server": "an HGX/DGX H100 server",
        },
        compare=False,
    )

    def seconds(self, sent: float, gpus: int) -> float:
        """One exchange in which each rank sends `sent` bytes spread evenly over its peers."""
        if gpus == 1:
            return 0.0
        within = min(gpus, self.gpus_per_server) - 1
        share_in = within / (gpus - 1)
        latency = (self.nvlink_latency if gpus <= self.gpus_per_server else self.nic_latency) + (
            gpus - 1
        ) * self.peer_latency
        return latency + max(sent * share_in / self.nvlink_bw, sent * (1 - share_in) / self.nic_bw)


@dataclass
class ShardedWork:
    """One rank's share of a sharded step, averaged over a few global batches (`measure_work`)."""

    gpus: int
    sharding: str
    lookups: float  # lookups of one micro-batch (pooled on the rank that trains it)
    owned_rows: float  # distinct ids of the global batch owned by the busiest rank
    sent_ids: float  # distinct ids of a micro-batch that other ranks own (mean over ranks)
    traffic: dict[str, float]  # bytes one rank sends per step, per exchange


def dense_parameters(config: TrainConfig, num_dense: int) -> int:
    model = init_dense_model(config.model, num_dense, len(config.data.table_sizes), config.seed)
    return sum(p.numel() for p in model.parameters())


@lru_cache(maxsize=64)
def measure_work(config: TrainConfig, sharding: str, gpus: int, batches: int = 2) -> ShardedWork:
    """Count one rank's work from the data: `gpus` ranks each training `config`'s batch size
    (a global batch of gpus * B). Raises ValueError when the plan is impossible (table-wise
    with more ranks than tables). Remembered per arguments: the kit's traffic and TorchRec's
    are projected from the same count (about 2 s for 128 GPUs of `small`)."""
    B, T, dim = config.data.batch_size, len(config.data.table_sizes), config.model.dim
    plan = plan_shards(sharding, config.data.table_sizes, gpus)
    source = SyntheticSource(replace(config.data, batch_size=B * gpus))
    owned, sent, lookups = [], [], []
    for b in range(batches):
        whole = source.batch(b)
        per_rank = np.zeros(gpus)
        for t, ids in enumerate(whole.ids):  # the global batch's distinct ids, by owner
            per_rank += np.bincount(plan.owners(t, np.unique(ids)), minlength=gpus)
        owned.append(per_rank.max())
        for rank in range(gpus):  # each micro-batch's ids that go elsewhere
            part = micro_batch(whole, rank, gpus)
            sent.append(remote_ids(plan, part.ids, rank))
            lookups.append(part.lookups())
    ids = float(np.mean(sent))
    traffic = exchange_bytes(ids, T, gpus, dim) | {
        "dense": (gpus - 1) * dense_parameters(config, source.num_dense) * FLOAT_BYTES
    }
    return ShardedWork(gpus, sharding, float(np.mean(lookups)), float(np.mean(owned)), ids, traffic)


def remote_ids(plan, ids_by_table, rank: int) -> int:
    """The distinct ids of rank `rank`'s micro-batch (its ids [n_t], table by table) that other
    ranks own: the ids it sends, and the rows and gradients that travel for them."""
    return sum(int((plan.owners(t, np.unique(ids)) != rank).sum()) for t, ids in enumerate(ids_by_table))


def exchange_bytes(remote: float, tables: int, gpus: int, dim: int) -> dict[str, float]:
    """Bytes of the three exchanges for `remote` distinct ids (module note): ids and their [N, T]
    counts go to the owners, a row comes back for each id, a gradient goes to its owner."""
    row = dim * FLOAT_BYTES
    return {"ids": remote * ID_BYTES + ID_BYTES * tables * (gpus - 1), "rows": remote * row, "grads": remote * row}


def torchrec_traffic(config: TrainConfig, sharding: str, gpus: int, lookups: float) -> dict[str, float]:
    """Bytes one rank would send per step with TorchRec's sharded EmbeddingBagCollection (module
    note): `lookups` of its micro-batch, pooled vectors of B samples x T tables."""
    B, T, dim = config.data.batch_size, len(config.data.table_sizes), config.model.dim
    remote = (gpus - 1) / gpus
    pooled = B * T * dim * FLOAT_BYTES * (gpus if sharding == "row" else 1)
    params = dense_parameters(config, config.data.num_dense)
    return {
        "ids": lookups * ID_BYTES * remote,
        "rows": pooled * remote,
        "grads": pooled * remote,
        "dense": 2 * remote * params * FLOAT_BYTES,
    }


@dataclass
class ShardedProjection:
    trainer: str
    sharding: str
    gpus: int
    servers: int
    compute_seconds: float  # one GPU's step on its share (projection.project)
    exchange_seconds: dict[str, float]  # per exchange
    step_seconds: float
    samples_per_s: float  # the whole job's: gpus * B / step
    sent_bytes: dict[str, float]  # per rank and step, per exchange
    bound: str  # "compute" or the exchanges, whichever is larger

    def to_dict(self) -> dict:
        return asdict(self)


def project_sharded(
    config: TrainConfig,
    trainer: str,
    sharding: str,
    gpus: int,
    *,
    links: Links = Links(),
    hardware: str = "h100-pcie5",
    overlap_ids: bool = False,
    miss_share: float = MISS_SHARE,
    torchrec: bool = False,
    work: ShardedWork | None = None,
) -> ShardedProjection:
    """The step of `gpus` ranks, `trainer` on each, tables sharded `sharding`-wise (module note).
    torchrec: time TorchRec's traffic instead of the kit's (same compute)."""
    work = work if work is not None else measure_work(config, sharding, gpus)
    G = min(gpus, links.gpus_per_server)
    machine = get_machine(hardware)
    # a GPU's share of the server's host: its cores and memory bandwidth (the row curves are one
    # core's speeds, so they stay)
    machine = replace(
        machine,
        name=f"{machine.name}/{G}",
        host_stream_bw=machine.host_stream_bw / G,
        host_cores=max(1, machine.host_cores // G),
    )
    base = StepWork.from_config(config)
    moved = miss_share * work.owned_rows if DESIGNS[trainer].caches else 0.0
    # the rank's lookups and owned rows, spread over the tables as the whole model's are
    lookups, unique = work.lookups / base.lookups, work.owned_rows / base.unique_rows
    tables = tuple(replace(t, lookups=t.lookups * lookups, unique=t.unique * unique) for t in base.tables)
    rank = replace(base, tables=tables).with_counters(moved, moved)
    one = project(trainer, rank, machine)
    sent = torchrec_traffic(config, sharding, gpus, work.lookups) if torchrec else work.traffic
    exchanges = {k: links.seconds(v, gpus) for k, v in sent.items()}
    exposed = sum(v for k, v in exchanges.items() if not (overlap_ids and k == "ids"))
    if one.pipelined and not machine.device_is_host:
        resources = dict(one.resource_seconds)
        resources["device"] += exposed
        step = max(resources.values())
    else:
        step = one.step_seconds + exposed
    return ShardedProjection(
        trainer,
        sharding,
        gpus,
        max(1, -(-gpus // links.gpus_per_server)),
        one.step_seconds,
        exchanges,
        step,
        gpus * config.data.batch_size / step,
        sent,
        "exchanges" if exposed > one.step_seconds else "compute",
    )


def scaling(
    config: TrainConfig, trainer: str, gpu_counts=(1, 2, 4, 8, 16, 32, 64, 128), *, links: Links = Links(), **options
) -> list[ShardedProjection]:
    """project_sharded for each GPU count and both shardings; a plan that cannot be (table-wise
    over more GPUs than tables) is left out."""
    rows = []
    for sharding in ("table", "row"):
        for gpus in gpu_counts:
            try:
                rows.append(project_sharded(config, trainer, sharding, gpus, links=links, **options))
            except ValueError:
                continue
    return rows
