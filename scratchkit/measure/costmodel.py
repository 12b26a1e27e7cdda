"""A cost model: the work of one training step, stage by stage, turned into time on a machine.

The kit runs on a laptop CPU, where "device" is the CPU too. To say what the same run would take on
a GPU server, this module counts what each stage of each trainer *does* (bytes moved through
each memory and link, dense FLOPs, and how many tensor ops it launches) and divides by the
speeds of a `HardwareProfile` (`scratchkit.measure.hardware`):

    seconds(stage) =  host_stream_bytes / host_stream_bw  + host_gather_bytes / host_gather_bw
                    + host_sort_keys / host_sort_rate + host_ops * host_op_latency
                    + pcie_bytes / pcie_bw + pcie_copies * pcie_latency
                    + device_stream_bytes / device_stream_bw + device_gather_bytes / device_gather_bw
                    + device_sort_keys / device_sort_rate
                    + device_flops / device_flops_per_s + device_ops * device_op_latency

No overlap is assumed inside a stage. Across stages:

- `gpu-only`, `hybrid`, `static`, `lru`, `lfu` run their stages one after another: the step
  time is the **sum** of the stages (a cache miss stalls the step while its row is fetched).
- `scratchpipe` is a pipeline: stages of different batches overlap, so the step time is the
  **max** over the resources that the stages occupy:
      host threads   plan, collect, write_back, each on its own thread: max(stage), or their sum
                     divided by the host cores when there are fewer cores than threads
      PCIe           transfer (a copy engine of its own)
      device         insert + train (they share the GPU)
  With no GPU (`this-cpu`) every stage, train included, runs on the same few cores, so the step
  time is max(largest stage, sum of all stages / cores). The pipeline is *bound* by the resource
  with the largest time; `bound_stage` names the largest stage within it.

What is not modelled: the `data` stage (making the batch; in a real input pipeline it overlaps
training, and the kit's synthetic generator is not what is measured), Python overhead beyond the
per-op latency, caches between the memories. Op counts are rough counts of the eager kernels each
stage launches in this kit. `validate` compares the `this-cpu` prediction with measured stage
times, stage by stage, so the error of the model is a figure, not a guess.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np

from scratchkit.config import OptimizerKind, TrainConfig
from scratchkit.measure.hardware import HardwareProfile, get_hardware

FLOAT_BYTES = 4
ID_BYTES = 8              # int64 ids, offsets and slots
# Tensor ops each optimizer's `apply_update` launches per table (count them in scratchkit/embedding/optim.py).
UPDATE_OPS = {OptimizerKind.SGD: 3, OptimizerKind.ADAGRAD: 10, OptimizerKind.ROWWISE_ADAGRAD: 11}
# `embedding_backward` per table: diff, arange, repeat_interleave, index_select (lookup grads),
# sparse tensor + coalesce (~5 kernels).
BACKWARD_OPS = 9


@dataclass(frozen=True)
class StepWork:
    """What one step touches, all tables together. Build with `from_config`, then adjust counters."""

    batch_size: int
    num_tables: int
    dim: int
    state_width: int         # optimizer floats per row
    optimizer: OptimizerKind
    lookups: float           # embedding lookups per step
    unique_rows: float       # distinct (table, id) pairs per step: the working set
    mlp_flops: float         # forward + backward of the dense model
    mlp_layers: int          # Linear layers of both MLPs
    num_dense: int
    fetched_rows: float = 0.0        # rows host -> device per step (caches, scratchpipe)
    written_back_rows: float = 0.0   # rows device -> host per step
    table_rows: int = 0              # rows of all tables: ScratchPipe's next-use array spans them
    plan_horizon: int = 0            # batches ScratchPipe's Plan scans for victims' next use

    @property
    def row_bytes(self) -> int:
        return self.dim * FLOAT_BYTES

    @property
    def moved_row_bytes(self) -> int:
        """A row travels with its optimizer state."""
        return (self.dim + self.state_width) * FLOAT_BYTES

    @property
    def mlp_ops(self) -> int:
        # per Linear: forward matmul + activation, backward (addmm, transpose, relu: ~3 kernels
        # each), gradient accumulation, optimizer; plus the interaction (stack, bmm, index, cat and
        # their backward), the loss and zero_grad. torch.profiler counts 53 top-level ops (~320
        # nested) for `small`'s dense step; this gives 104 for its 4 layers
        return 16 * self.mlp_layers + 40

    @classmethod
    def from_config(cls, config: TrainConfig, source=None, batches: int = 4) -> "StepWork":
        """Lookups and working sets averaged over the first `batches` batches; MLP FLOPs from sizes."""
        if source is None:
            from scratchkit.data.synthetic import SyntheticSource
            source = SyntheticSource(config.data)
        if batches <= 0:
            raise ValueError(f"batches must be positive, got {batches}")
        taken = [source.batch(b) for b in range(min(batches, len(source)))]
        lookups = float(np.mean([b.lookups() for b in taken]))
        unique = float(np.mean([sum(len(np.unique(i)) for i in b.ids) for b in taken]))
        flops, layers = mlp_flops(config, source.num_dense, len(config.data.table_sizes))
        # ScratchPipe's furthest-next-use victims look 4*(D+1) batches ahead (its default horizon)
        horizon = 4 * (config.cache.depth + 1) if config.cache.victim_policy == "furthest" else 0
        return cls(batch_size=config.data.batch_size, num_tables=len(config.data.table_sizes),
                   dim=config.model.dim, state_width=config.optimizer.state_width(config.model.dim),
                   optimizer=config.optimizer.kind, lookups=lookups, unique_rows=unique,
                   mlp_flops=flops, mlp_layers=layers, num_dense=source.num_dense,
                   table_rows=int(sum(config.data.table_sizes)), plan_horizon=horizon)

    def with_counters(self, fetched_rows: float, written_back_rows: float) -> "StepWork":
        """The measured rows moved per step (a bench run's StepRecord counters)."""
        return replace(self, fetched_rows=float(fetched_rows), written_back_rows=float(written_back_rows))

    def with_hit_rate(self, hit_rate: float) -> "StepWork":
        """Rows moved per step for a demand cache with this per-lookup hit rate, when no counters
        were measured: each missed lookup of a cold row is roughly one missed distinct row, so
        fetched = min(working set, missed lookups); in steady state every fetch evicts a victim."""
        if not 0.0 <= hit_rate <= 1.0:
            raise ValueError(f"hit_rate must be in [0, 1], got {hit_rate}")
        rows = min(self.unique_rows, (1.0 - hit_rate) * self.lookups)
        return self.with_counters(rows, rows)


def mlp_flops(config: TrainConfig, num_dense: int, num_tables: int) -> tuple[float, int]:
    """(forward + backward FLOPs per step, number of Linear layers) of the dense model.

    A Linear of `i -> o` on B samples costs 2*B*i*o FLOPs forward and twice that backward (input
    and weight gradients), except the first layer, whose input (the dense features) needs no
    gradient; the interaction's batched dot products cost 2*B*(T+1)^2*dim, and twice that backward.
    """
    m, B = config.model, config.data.batch_size
    vectors = num_tables + 1
    top_in = m.dim + vectors * (vectors - 1) // 2
    widths = [(max(num_dense, 1), *m.bottom_mlp), (top_in, *m.top_mlp)]
    forward = sum(2 * B * i * o for w in widths for i, o in zip(w[:-1], w[1:]))
    forward += 2 * B * vectors * vectors * m.dim
    layers = sum(len(w) - 1 for w in widths)
    first = widths[0]
    return 3.0 * forward - 2 * B * first[0] * first[1], layers


@dataclass(frozen=True)
class Work:
    """One stage's work in one step: bytes per memory or link, FLOPs, ops launched."""

    host_stream: float = 0.0
    host_gather: float = 0.0
    host_sort: float = 0.0       # keys sorted (with their values)
    host_ops: float = 0.0
    pcie: float = 0.0
    pcie_copies: float = 0.0
    device_stream: float = 0.0
    device_gather: float = 0.0
    device_sort: float = 0.0
    device_flops: float = 0.0
    device_ops: float = 0.0

    def __add__(self, other: "Work") -> "Work":
        return Work(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def on_host(self) -> "Work":
        """The same work done by the host instead of the device (hybrid's embedding stages)."""
        return Work(host_stream=self.host_stream + self.device_stream,
                    host_gather=self.host_gather + self.device_gather,
                    host_sort=self.host_sort + self.device_sort, host_ops=self.host_ops + self.device_ops, pcie=self.pcie, pcie_copies=self.pcie_copies)

    def bytes(self) -> float:
        return self.host_stream + self.host_gather + self.pcie + self.device_stream + self.device_gather

    def seconds(self, hw: HardwareProfile) -> float:
        return (self.host_stream / hw.host_stream_bw + self.host_gather / hw.host_gather_bw
                + self.host_sort / hw.host_sort_rate + self.host_ops * hw.host_op_latency
                + self.pcie / hw.pcie_bw + self.pcie_copies * hw.pcie_latency
                + self.device_stream / hw.device_stream_bw + self.device_gather / hw.device_gather_bw
                + self.device_sort / hw.device_sort_rate + self.device_flops / hw.device_flops + self.device_ops * hw.device_op_latency)


# ---------------------------------------------------------------------------------- stage work
def _train_stages(w: StepWork, by_slot: bool) -> dict[str, Work]:
    """Forward, MLP, backward and update with every row already in device memory."""
    T, B, rb, mb = w.num_tables, w.batch_size, w.row_bytes, w.moved_row_bytes
    return {
        # gather every looked-up row, write the pooled vectors
        "embedding_forward": Work(device_gather=w.lookups * rb,
                                  device_stream=w.lookups * ID_BYTES + B * T * rb, device_ops=T + 1),
        # dense features and labels cross to the device inside the dense step
        "mlp": Work(device_flops=w.mlp_flops, device_ops=w.mlp_ops,
                    pcie=B * (w.num_dense + 1) * FLOAT_BYTES, pcie_copies=2),
        # per-lookup gradients written, then sorted with their ids to coalesce
        "embedding_backward": Work(device_stream=2 * w.lookups * rb, device_sort=w.lookups,
                                   device_ops=T * (BACKWARD_OPS + (3 if by_slot else 0))),
        # gather the touched rows and state, update them, scatter them back
        "update": Work(device_gather=2 * w.unique_rows * mb, device_stream=3 * w.unique_rows * mb,
                       device_ops=T * UPDATE_OPS[w.optimizer]),
    }


def _id_work(w: StepWork, with_slots: bool) -> Work:
    """Ids and offsets (and slots) to the device."""
    arrays = 2 if with_slots else 1
    return Work(pcie=arrays * w.lookups * ID_BYTES + w.batch_size * w.num_tables * ID_BYTES,
                pcie_copies=(arrays + 1) * w.num_tables)


def _plan_work(w: StepWork) -> Work:
    """Working sets (a sort of each table's ids) and one map probe per distinct id."""
    return Work(host_sort=w.lookups, host_gather=w.unique_rows * 2 * ID_BYTES, host_ops=6 * w.num_tables)


def _move_in(w: StepWork, rows: float) -> Work:
    """Host rows + state gathered, copied to the device, scattered into slots."""
    if rows == 0:
        return Work()
    b, T = rows * w.moved_row_bytes, w.num_tables
    return Work(host_gather=b, host_ops=2 * T, pcie=b, pcie_copies=2 * T, device_gather=b, device_ops=2 * T)


def stage_work(trainer: str, w: StepWork) -> dict[str, Work]:
    """The work of each stage of `trainer` in one step (stage names as its StepRecords use)."""
    train = _train_stages(w, by_slot=trainer not in ("gpu-only", "hybrid"))
    if trainer == "gpu-only":
        return {"transfer": _id_work(w, with_slots=False), **train}
    if trainer == "hybrid":
        pooled = w.batch_size * w.num_tables * w.row_bytes
        return {"embedding_forward": train["embedding_forward"].on_host(),
                "transfer": Work(pcie=2 * pooled, pcie_copies=2),   # pooled up, their gradients down
                "mlp": train["mlp"],
                "embedding_backward": train["embedding_backward"].on_host(),
                "update": train["update"].on_host()}
    if trainer in ("static", "lru", "lfu"):
        return {"fetch": _plan_work(w) + _move_in(w, w.fetched_rows),
                "write_back": _move_in(w, w.written_back_rows),     # the same path, reversed
                "transfer": _id_work(w, with_slots=True), **train}
    if trainer == "prefetch-lru":   # the next batch's fetch, overlapping this one's training
        return {"prefetch": _plan_work(w) + _move_in(w, w.fetched_rows),
                "prefetch_write_back": _move_in(w, w.written_back_rows),
                "transfer": _id_work(w, with_slots=True), **train}
    if trainer == "scratchpipe":
        moved_in, moved_out = w.fetched_rows * w.moved_row_bytes, w.written_back_rows * w.moved_row_bytes
        T = w.num_tables
        fused = Work()
        for part in train.values():
            fused = fused + part
        # Plan: working sets and map probes, then victims (with furthest-next-use: a next-use array
        # over the table's rows, filled from the horizon's working sets), holds and the remap
        next_use = Work(host_stream=w.table_rows * ID_BYTES,
                        host_gather=w.plan_horizon * w.unique_rows * ID_BYTES) if w.plan_horizon else Work()
        return {"plan": _plan_work(w) + next_use + Work(host_ops=4 * T),
                "collect": Work(host_gather=moved_in, host_stream=moved_in, host_ops=2 * T),
                "transfer": Work(pcie=moved_in + moved_out, pcie_copies=4 * T) + _id_work(w, with_slots=True),
                "insert": Work(device_gather=moved_in + moved_out, device_ops=4 * T),
                "write_back": Work(host_gather=moved_out, host_ops=2 * T),
                "train": fused}
    raise ValueError(f"no cost model for trainer {trainer!r}; known: gpu-only, hybrid, static, lru, "
                     "lfu, prefetch-lru, scratchpipe")


# ---------------------------------------------------------------------------------- projection
PIPELINE_HOST_STAGES = ("plan", "collect", "write_back")


@dataclass
class Projection:
    """Predicted time of one step of one trainer on one hardware profile."""

    trainer: str
    profile: str
    stage_seconds: dict[str, float]
    step_seconds: float
    samples_per_s: float
    bound_stage: str                 # the stage that sets the step time (see the module note)
    pipelined: bool
    resource_seconds: dict[str, float] = field(default_factory=dict)   # pipelined: busy time per resource
    ratio: float = 1.0               # samples/s relative to the first trainer projected with it

    def to_dict(self) -> dict:
        return asdict(self)


PREFETCH_STAGES = ("prefetch", "prefetch_write_back")


def pipeline_resources(stages: dict[str, float], host_cores: int,
                       device_is_host: bool = False) -> tuple[dict[str, float], dict[str, list[str]]]:
    """ScratchPipe's busy seconds per resource, and the stages on each (see the module note): the
    step of a pipeline is its busiest resource. (Notebook 05's exercise asks for this.)"""
    if device_is_host:
        groups = {"one stage": list(stages), "shared cores": list(stages)}
        return {"one stage": max(stages.values()), "shared cores": sum(stages.values()) / host_cores}, groups
    host = list(PIPELINE_HOST_STAGES)
    groups = {"host threads": host, "pcie": ["transfer"], "device": ["insert", "train"]}
    host_seconds = [stages[s] for s in host]
    resources = {"host threads": max(max(host_seconds), sum(host_seconds) / host_cores),
                 "pcie": stages["transfer"], "device": stages["insert"] + stages["train"]}
    return resources, groups


def project(trainer: str, work: StepWork, hw: HardwareProfile) -> Projection:
    stages = {name: part.seconds(hw) for name, part in stage_work(trainer, work).items()}
    if trainer == "prefetch-lru" and not hw.device_is_host:
        # the prefetch runs on a side stream (host gathers, copies, scatters) while the step trains
        ahead = sum(stages[s] for s in PREFETCH_STAGES)
        step_stages = {k: v for k, v in stages.items() if k not in PREFETCH_STAGES}
        train = sum(step_stages.values())
        step = max(train, ahead)
        bound = max(PREFETCH_STAGES, key=stages.get) if ahead > train else max(step_stages, key=step_stages.get)
        return Projection(trainer, hw.name, stages, step, work.batch_size / step, bound, pipelined=True,
                          resource_seconds={"train": train, "prefetch": ahead})
    if trainer != "scratchpipe":
        step = sum(stages.values())
        return Projection(trainer, hw.name, stages, step, work.batch_size / step,
                          max(stages, key=stages.get), pipelined=False, resource_seconds={"serial": step})
    resources, groups = pipeline_resources(stages, hw.host_cores, hw.device_is_host)
    bound = max(resources, key=resources.get)
    step = resources[bound]
    bound_stage = max(groups[bound], key=stages.get)
    return Projection(trainer, hw.name, stages, step, work.batch_size / step, bound_stage,
                      pipelined=True, resource_seconds=resources)


def project_all(trainers: list[str], works: list[StepWork], profiles: list[str]) -> list[dict[str, Projection]]:
    """Per trainer, {profile: Projection}; each profile's ratios relative to the first trainer."""
    out = [{p: project(t, w, get_hardware(p)) for p in profiles} for t, w in zip(trainers, works)]
    for p in profiles:
        for row in out:
            row[p].ratio = row[p].samples_per_s / out[0][p].samples_per_s
    return out


def work_for_bench(config: TrainConfig, result, base: StepWork | None = None) -> StepWork:
    """The StepWork of one measured BenchResult: the data's working sets plus its row counters."""
    base = base if base is not None else StepWork.from_config(config)
    fetched = getattr(result, "fetched_rows_per_step", None)
    if fetched is not None:
        return base.with_counters(fetched, result.written_back_rows_per_step)
    if result.hit_rate is not None and result.trainer not in ("gpu-only", "hybrid"):
        return base.with_hit_rate(result.hit_rate)
    return base


def project_bench(config: TrainConfig, results: list, profiles: list[str], source=None) -> list[dict[str, Projection]]:
    """Projections for the trainers of a `run_bench` result, with their measured counters."""
    base = StepWork.from_config(config, source)
    works = [work_for_bench(config, r, base) for r in results]
    return project_all([r.trainer for r in results], works, profiles)


# ---------------------------------------------------------------------------------- validation
@dataclass(frozen=True)
class StageError:
    """Measured vs predicted seconds per step of one stage (predicted None: not modelled)."""

    stage: str
    measured: float
    predicted: float | None

    @property
    def error(self) -> float | None:
        """Relative error, predicted / measured - 1 (None when not modelled or nothing measured)."""
        if self.predicted is None or self.measured <= 0:
            return None
        return self.predicted / self.measured - 1.0


def validate(measured_stage_seconds: dict[str, float], projection: Projection,
             measured_step_seconds: float | None = None) -> list[StageError]:
    """Stage by stage, what was measured next to what the model predicts; a final `step` row
    compares the step time (the measurement's excludes its unmodelled stages, e.g. data)."""
    rows = [StageError(s, m, projection.stage_seconds.get(s)) for s, m in measured_stage_seconds.items()]
    rows += [StageError(s, 0.0, p) for s, p in projection.stage_seconds.items() if s not in measured_stage_seconds]
    if measured_step_seconds is not None:
        unmodelled = sum(r.measured for r in rows if r.predicted is None)
        rows.append(StageError("step", measured_step_seconds - unmodelled, projection.step_seconds))
    return rows


def validate_on_this_machine(config: TrainConfig, trainers: list[str], steps: int, warmup: int = 3,
                             device: str | None = None) -> dict[str, list[StageError]]:
    """Run `trainers` here (scratchkit.measure.bench), predict them with `this-cpu`, compare per stage."""
    from scratchkit.measure.bench import run_bench

    results = run_bench(config, trainers, steps, warmup=warmup, device=device)
    projections = project_bench(config, results, ["this-cpu"])
    return {r.trainer: validate(r.stage_seconds, p["this-cpu"], r.seconds / r.steps)
            for r, p in zip(results, projections)}
