"""A cost model: the work of one training step, stage by stage, turned into time on a machine.

The kit runs on a laptop CPU, where "device" is the CPU too. To say what the same run would take on
a GPU server, `costmodel/work.py`, `kit.py` and `stages.py` count what each stage of each trainer *does*
(random rows gathered and scattered from tables of a given size, bytes streamed, keys sorted,
matmul FLOPs at their shapes, the kit's calls and their fixed costs, the planner's lookups and
ids, bytes and copies over PCIe), and a `Hardware` (hardware.py) prices each unit:

    seconds(stage) = sum over its units of amount x the hardware's price of that unit

No overlap is assumed inside a stage. Across stages (`project`):

- `gpu-only`, `hybrid`, `static`, `lru`, `lfu` run their stages one after another: the step
  time is the **sum** of the stages (a cache miss stalls the step while its row is fetched).
  Hybrid's host embedding stages run on the host's threads, capped by its memory
  (costmodel/host_threads.py); `bound_stage` is "host memory" where the cap holds its largest.
- `prefetch-lru` on a GPU fetches the next batch (the device's row kernels reading the host
  tables over the link) on a thread and stream of its own while this one trains, and joins it
  before the update: the step is the larger of the prefetch and the stages before the update,
  plus the update. On a CPU the prefetch runs inline, before Train (trainers/prefetch.py):
  the sum.
- `scratchpipe` is a pipeline; its step is the busiest of the resources its stages occupy.
  On a GPU server: Plan in its own process, spread over `min(planners, cores left)` cores (the
  cores less Train's, Collect's and the write-back thread's); Collect on a thread; Write-back,
  Transfer and Insert one after another on another thread; the link (Transfer, the victims'
  rows); the device (Insert's scatters, the victims' gathers, Train). On a CPU run (no GPU)
  every host stage runs in one forked process and Train in the trainer's: the step is the
  larger of the two, or their sum over the cores when there are fewer cores than the two; each
  side also spends the hand-off of every plan (`stages.plan_handoff`: pickled into a ring of
  shared memory, its skeleton down a pipe), which no stage's clock counts.
  On a CPU run with two cores or more, the two sides get the cores the calibration measured two
  processes getting at once (`co_run_cores`, calibration/co_run.py: 2 where each has one, 1 where
  they take turns); where that is under two, they take turns for part of the step, and `co_run`
  stretches each side's stages by the turns the other side's work takes from it.
  `bound_stage` names the largest stage within the busiest resource.
- `scratchpipe-device` (Plan and the row moves on the device, costmodel/device_stages.py) is a pipeline of
  threads too, but its stages are the device's kernels, each thread's on a stream of its own. On
  a GPU server its resources are the trainer's thread (Train), Plan's, Collect's and the
  write-back thread's; the link (rows Collect reads over it, rows written back); the device's
  cores (every stage's kernels, not their launches: while a thread launches, the other streams'
  kernels run); and the interpreter (every launch of every thread, one at a time). On a CPU run
  its stages run inline, one after another in the trainer's thread (scratchpipe/inline.py): the
  step is their sum.

What is not modelled: the `data` stage (the step's wait for its batch, which the batch loader
made ahead beside training, data/loader.py, as a real input pipeline does; the kit's synthetic
generator is not what is measured): a validation run passes its measured seconds in (`extra`)
where the trainer spends them. `measure/validate.py` compares the
`this-cpu` prediction with measured stage times, so the error of the model is a figure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from scratchkit.config import TrainConfig
from scratchkit.calibration.co_run import HOST_PROCESS_STAGES
from scratchkit.projection.hardware import Hardware, get_hardware
from scratchkit.costmodel.host_threads import HOST_MEMORY, hybrid_stage_seconds
from scratchkit.costmodel.stages import plan_handoff, stage_work
from scratchkit.costmodel.work import Work
from scratchkit.costmodel.step import StepWork, mlp_flops
from scratchkit.trainers import TRAINERS, TrainerKind, priced_as, trainer_config

__all__ = [
    "PREFETCH_STAGES",
    "Projection",
    "StageError",
    "StepWork",
    "Work",
    "mlp_flops",
    "plan_cores",
    "project",
    "project_all",
    "project_bench",
    "stage_work",
    "validate",
    "work_for_bench",
    "TRAINERS",
]

PREFETCH_STAGES = ("prefetch", "prefetch_write_back")


@dataclass
class Projection:
    """Predicted time of one step of one trainer on one hardware."""

    trainer: str
    hardware: str  # the machine's name (projection/hardware.py)
    stage_seconds: dict[str, float]
    step_seconds: float
    samples_per_s: float
    bound_stage: str  # the stage that sets the step time (see the module note)
    pipelined: bool
    resource_seconds: dict[str, float] = field(default_factory=dict)  # busy time per resource
    ratio: float = 1.0  # samples/s relative to the first trainer projected with it

    def to_dict(self) -> dict:
        return asdict(self)


def plan_cores(work: StepWork, hw: Hardware) -> int:
    """Cores ScratchPipe's planners run on at once: as many as there are planners, up to the
    cores left by the other host threads (Train's; on a GPU also Collect's and the write-back's)."""
    others = 1 if hw.device_is_host else 3
    return max(1, min(work.plan_parallelism, hw.host_cores - others))


def _stage_seconds(trainer: str, work: StepWork, hw: Hardware) -> dict[str, float]:
    if priced_as(trainer) is TrainerKind.HYBRID:
        return hybrid_stage_seconds(stage_work(trainer, work, hw), work, hw)[0]
    planners = plan_cores(work, hw) if priced_as(trainer) is TrainerKind.SCRATCHPIPE else 1
    return {name: part.seconds(hw, planners) for name, part in stage_work(trainer, work, hw).items()}


def _hybrid(
    work: StepWork, hw: Hardware, stages: dict[str, float], extra_s: float
) -> tuple[float, str, dict[str, float]]:
    """Hybrid's step, what bounds it and its resources: its stages one after another, the host
    embedding stages spread over the host's threads and capped by its memory (host_threads.py).
    The bound is HOST_MEMORY where the largest stage is held by the memory system, not the cores."""
    spreads = hybrid_stage_seconds(stage_work("hybrid", work, hw), work, hw)[1]
    step = sum(stages.values()) + extra_s
    bound = max(stages, key=stages.get)
    if bound in spreads and spreads[bound].memory_bound:
        bound = HOST_MEMORY
    resources = {
        "serial": step,
        "host cores": sum(x.cores_seconds for x in spreads.values()),
        HOST_MEMORY: sum(x.memory_seconds for x in spreads.values()),
    }
    return step, bound, resources


def co_run(stages: dict[str, float], work: StepWork, hw: Hardware, extra_s: float = 0.0) -> tuple[float, float]:
    """ScratchPipe on a CPU run with two cores or more: the factors by which (its host process's,
    Train's) priced seconds a step grow beside each other, where the run gets P = hw.co_run_cores
    cores at once (calibration/co_run.py). While both sides have work each runs at P/2 of a core:
    with `a` the less busy side's seconds a step alone and `b` the busier's, the first takes
    a x 2/P and the second b + a x (2/P - 1), its own work and the turns it gave the other's.
    P >= 2: each has a core (1, 1); P = 1: they take turns, the busier side's step is a + b.
    `extra_s`, the host process's measured seconds (the batch's reading), is work of its side but
    stays as measured: the side's turns land on its priced stages. With one core, or on a GPU
    server (the host's threads priced alone, the device's kernels Train's), (1, 1): the "shared
    cores" resource adds the one core's turns up (`project`)."""
    if not hw.device_is_host or hw.host_cores < 2:
        return 1.0, 1.0
    turns = 2.0 / min(max(hw.co_run_cores or hw.host_cores, 1.0), 2.0) - 1.0  # 0 .. 1
    send, receive = (part.seconds(hw) for part in plan_handoff(work))
    host = sum(stages[s] for s in HOST_PROCESS_STAGES) + send
    train = stages["train"] + receive
    if min(host, train) <= 0:
        return 1.0, 1.0
    a, b = sorted((host + extra_s, train))
    beside = lambda side: b + a * turns if side == b else a * (1.0 + turns)
    return (beside(host + extra_s) - extra_s) / host, beside(train) / train


def project(trainer: str, work: StepWork, hw: Hardware, extra: dict[str, float] | None = None) -> Projection:
    """One step of `trainer` on `hw`. `extra`: measured seconds of stages the model does not
    price (a validation run's `data`), added to the step where the trainer spends them."""
    stages = _stage_seconds(trainer, work, hw)
    kind = priced_as(trainer)  # how its registry entry says it is priced
    extra_s = sum((extra or {}).values())
    beside = co_run(stages, work, hw, extra_s) if kind is TrainerKind.SCRATCHPIPE else (1.0, 1.0)
    stages = {
        s: v * (beside[1] if s == "train" else beside[0] if s in HOST_PROCESS_STAGES else 1.0)
        for s, v in stages.items()
    }
    made = lambda step, bound, pipelined, resources: Projection(
        trainer, hw.name, stages, step, work.batch_size / step, bound, pipelined, resources
    )
    if kind is TrainerKind.PREFETCH_LRU and not hw.device_is_host:
        # the prefetch (the device's row kernels on a stream and thread of their own) runs beside
        # the step's Train and joins before its update (trainers/prefetch.py)
        ahead = sum(stages[s] for s in PREFETCH_STAGES)
        step_stages = {k: v for k, v in stages.items() if k not in PREFETCH_STAGES}
        train = sum(step_stages.values()) + extra_s
        beside = train - step_stages.get("update", 0.0)
        bound = max(PREFETCH_STAGES, key=stages.get) if ahead > beside else max(step_stages, key=step_stages.get)
        return made(max(beside, ahead) + train - beside, bound, True, {"train": train, "prefetch": ahead})
    if kind is TrainerKind.HYBRID:
        step, bound, resources = _hybrid(work, hw, stages, extra_s)
        return made(step, bound, False, resources)
    if not kind.pipelined or (kind is TrainerKind.SCRATCHPIPE_DEVICE and hw.device_is_host):
        step = sum(stages.values()) + extra_s  # (the device planner on a CPU runs inline)
        return made(step, max(stages, key=stages.get), False, {"serial": step})
    groups, resources = _pipeline_resources(trainer, work, hw, stages, extra_s, beside)
    bound = max(resources, key=resources.get)
    return made(resources[bound], max(groups[bound], key=stages.get), True, resources)


def _pipeline_resources(
    trainer: str,
    work: StepWork,
    hw: Hardware,
    stages: dict[str, float],
    extra_s: float,
    beside: tuple[float, float] = (1.0, 1.0),
) -> tuple[dict[str, list[str]], dict[str, float]]:
    """ScratchPipe's resources and their busy time per step (the module note); `beside`: each
    side's stretch beside the other (`co_run`), already in `stages`, applied to the hand-off."""
    if hw.device_is_host:
        host = list(HOST_PROCESS_STAGES)
        send, receive = (part.seconds(hw) for part in plan_handoff(work))  # on no stage's clock
        # the host process reads the batches too (`extra_s`: measured there, beside Train already)
        busy = sum(stages[s] for s in host) + extra_s + send * beside[0]
        train = stages["train"] + receive * beside[1]
        groups = {"host process": host, "train": ["train"], "shared cores": list(stages)}
        return groups, {"host process": busy, "train": train, "shared cores": (busy + train) / hw.host_cores}
    parts = stage_work(trainer, work, hw)
    link = lambda s: parts[s].pcie_seconds(hw)
    groups = {"plan": ["plan"], "collect": ["collect"], "write-back thread": ["write_back", "transfer", "insert"]}
    resources = {
        "plan": stages["plan"],
        "collect": stages["collect"],
        "write-back thread": stages["write_back"] + stages["transfer"] + stages["insert"],
    }
    if priced_as(trainer) is TrainerKind.SCRATCHPIPE:
        on_device = lambda s: parts[s].device_seconds(hw)
        groups |= {"pcie": ["transfer", "write_back"], "device": ["train", "insert", "write_back"]}
        resources |= {
            "pcie": max(link("transfer"), link("write_back")),  # one direction each
            "device": stages["train"] + extra_s + on_device("insert") + on_device("write_back"),
        }
        return groups, resources
    # the device planner's: every stage is the device's kernels, Plan's, Collect's (which reads
    # the rows over the link itself) and the others' each on a stream of its own. The trainer's
    # thread runs Train; the device's cores are busy for every stage's kernels, not for their
    # launches (while a thread launches, the other streams' kernels run); and every thread
    # launches from one interpreter, which its lock lets do one thing at a time
    kernels = lambda s: parts[s].device_seconds(hw) - parts[s].launch_seconds(hw)
    groups |= {
        "train": ["train"],
        "pcie": ["collect", "write_back"],
        "device": list(stages),
        "interpreter": list(stages),
    }
    resources |= {
        "train": stages["train"] + extra_s,
        "pcie": max(link("collect"), link("write_back")),
        "device": sum(kernels(s) for s in stages),
        "interpreter": sum(parts[s].launch_seconds(hw) + parts[s].host_seconds(hw) for s in stages),
    }
    return groups, resources


def project_all(trainers: list[str], works: list[StepWork], machines: list[str]) -> list[dict[str, Projection]]:
    """Per trainer, {machine: Projection}; each machine's ratios relative to the first trainer."""
    out = [{p: project(t, w, get_hardware(p)) for p in machines} for t, w in zip(trainers, works)]
    for p in machines:
        for row in out:
            row[p].ratio = row[p].samples_per_s / out[0][p].samples_per_s
    return out


def works_of(config: TrainConfig, trainers: list[str], source=None, batches: int = 4) -> list[StepWork]:
    """Per trainer, the StepWork of `config` as that trainer runs it (`trainer_config`: a trainer
    that fixes its depth or victim policy plans with those), made once per distinct cache."""
    made: dict = {}
    for t in trainers:
        own = trainer_config(t, config)
        if own.cache not in made:
            made[own.cache] = StepWork.from_config(own, source, batches=batches)
    return [made[trainer_config(t, config).cache] for t in trainers]


def work_for_bench(config: TrainConfig, result, base: StepWork | None = None) -> StepWork:
    """The StepWork of one measured BenchResult: the data's working sets plus its row counters."""
    base = base if base is not None else works_of(config, [result.trainer])[0]
    fetched = getattr(result, "fetched_rows_per_step", None)
    if fetched is not None:
        return base.with_counters(
            fetched, result.written_back_rows_per_step, getattr(result, "evicting_tables_per_step", None)
        )
    if result.hit_rate is not None and priced_as(result.trainer).caches:
        return base.with_hit_rate(result.hit_rate)
    return base


def project_bench(config: TrainConfig, results: list, machines: list[str], source=None) -> list[dict[str, Projection]]:
    """Projections for the trainers of a `run_bench` result, with their measured counters."""
    bases = works_of(config, [r.trainer for r in results], source)
    works = [work_for_bench(config, r, base) for r, base in zip(results, bases)]
    return project_all([r.trainer for r in results], works, machines)


# ---------------------------------------------------------------------------------- comparison
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


def validate(
    measured_stage_seconds: dict[str, float], projection: Projection, measured_step_seconds: float | None = None
) -> list[StageError]:
    """Stage by stage, what was measured next to what the model predicts; a final `step` row
    compares the step time (the measurement's excludes its unmodelled stages, e.g. data)."""
    rows = [StageError(s, m, projection.stage_seconds.get(s)) for s, m in measured_stage_seconds.items()]
    rows += [StageError(s, 0.0, p) for s, p in projection.stage_seconds.items() if s not in measured_stage_seconds]
    if measured_step_seconds is not None:
        unmodelled = sum(r.measured for r in rows if r.predicted is None)
        rows.append(StageError("step", measured_step_seconds - unmodelled, projection.step_seconds))
    return rows
