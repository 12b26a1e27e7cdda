"""A projection: one step of one design, its work counted once, priced on a machine, combined.

The kit runs on a laptop CPU, where "device" is the CPU too. To say what the same run would take
on a GPU server, a design counts what each of its stages *does* (random rows gathered and
scattered from tables of a given size, bytes streamed, keys sorted, matmul FLOPs at their
shapes, the kit's calls and their fixed costs, the planner's lookups and ids, bytes and copies
over PCIe: designs/work.py's units), and a machine (costmodel/hardware.py; by name:
machines.py) prices each unit:

    seconds(stage) = sum over its units of amount x the machine's price of that unit

No overlap is assumed inside a stage. `project` walks it in three steps:

    count     stage_work: the design's `count` of each stage, inside the rows the step touches
    price     each stage's seconds on the machine,                 } the design's `combine`
    combine   the step: their sum, or the busiest resource, ...    } (designs/, a family a module)

How each design combines its stages is its family's module note (designs/serial.py,
demand_cache.py, prefetch.py, scratchpipe.py, scratchpipe_device.py).

What is not modelled: the `data` stage (the step's wait for its batch, which the batch loader
made ahead beside training, data/loader.py, as a real input pipeline does; the kit's synthetic
generator is not what is measured): a validation run passes its measured seconds in (`extra`)
where the trainer spends them. measure/validate.py compares the `this-cpu` prediction with
measured stage times, so the error of the model is a figure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from scratchkit.config import TrainConfig
from scratchkit.costmodel.hardware import Hardware
from scratchkit.costmodel.servers import HostShare
from scratchkit.designs import BASELINE, PEERS, Design, Place, StepWork, Work, design_of, versus
from scratchkit.designs.host_threads import HOST_MEMORY
from scratchkit.projection.machines import get_machine

SOCKET_SHARE = HostShare.SOCKET.value  # the baseline beside its one GPU's share: a whole socket


@dataclass
class Projection:
    """Predicted time of one step of one design on one machine."""

    trainer: str  # the design's name, which its trainer has
    machine: str  # the machine's name (machines.py)
    stage_seconds: dict[str, float]
    step_seconds: float
    samples_per_s: float
    bound_stage: str  # the stage that sets the step time (its design's `combine`)
    pipelined: bool
    resource_seconds: dict[str, float] = field(default_factory=dict)  # busy time per resource
    ratio: float = 1.0  # samples/s relative to the first design projected with it

    def to_dict(self) -> dict:
        return asdict(self)


def stage_work(design: str | Design, work: StepWork, machine: Hardware | None = None) -> dict[str, Work]:
    """The work of each stage of `design` in one step (stage names as its StepRecords use), its
    rows priced as in a step that touches the working set (`Work.in_step`). `machine`: where it
    will be priced (designs.Place: whether the device is the host, and the host's C++ loops;
    None: per-table torch ops on a GPU)."""
    parts = design_of(design).count(work, Place.of(machine))
    return {name: part.in_step(work.unique_rows) for name, part in parts.items()}


def project(
    design: str | Design, work: StepWork, machine: Hardware, extra: dict[str, float] | None = None
) -> Projection:
    """One step of `design` on `machine`: counted once, priced and combined as the design says.
    `extra`: measured seconds of stages the model does not price (a validation run's `data`),
    added to the step where the trainer spends them."""
    d = design_of(design)
    timed = d.combine(stage_work(d, work, machine), work, machine, sum((extra or {}).values()))
    return Projection(
        d.name,
        machine.name,
        timed.stage_seconds,
        timed.step_seconds,
        work.batch_size / timed.step_seconds,
        timed.bound_stage,
        timed.pipelined,
        timed.resource_seconds,
    )


def project_all(designs: list[str], works: list[StepWork], machines: list[str]) -> list[dict[str, Projection]]:
    """Per design, {machine: Projection}; each machine's ratios relative to the first design."""
    out = [{m: project(d, w, get_machine(m)) for m in machines} for d, w in zip(designs, works)]
    for m in machines:
        for row in out:
            row[m].ratio = row[m].samples_per_s / out[0][m].samples_per_s
    return out


def works_of(config: TrainConfig, designs: list[str], source=None, batches: int = 4) -> list[StepWork]:
    """Per design, the StepWork of `config` as that design runs it (`Design.config_for`: one that
    fixes its depth or victim policy plans with those), made once per distinct cache."""
    made: dict = {}
    for name in designs:
        own = design_of(name).config_for(config)
        if own.cache not in made:
            made[own.cache] = StepWork.from_config(own, source, batches=batches)
    return [made[design_of(name).config_for(config).cache] for name in designs]


def work_for_bench(config: TrainConfig, result, base: StepWork | None = None) -> StepWork:
    """The StepWork of one measured BenchResult: the data's working sets plus its row counters."""
    base = base if base is not None else works_of(config, [result.trainer])[0]
    fetched = getattr(result, "fetched_rows_per_step", None)
    if fetched is not None:
        return base.with_counters(
            fetched, result.written_back_rows_per_step, getattr(result, "evicting_tables_per_step", None)
        )
    if result.hit_rate is not None and design_of(result.trainer).caches:
        return base.with_hit_rate(result.hit_rate)
    return base


def project_bench(config: TrainConfig, results: list, machines: list[str], source=None) -> list[dict[str, Projection]]:
    """Projections for the designs of a `run_bench` result, with their measured counters."""
    bases = works_of(config, [r.trainer for r in results], source)
    works = [work_for_bench(config, r, base) for r, base in zip(results, bases)]
    return project_all([r.trainer for r in results], works, machines)


def host_figures(p: Projection) -> dict:
    """The baseline's projection with the threads and memory rate its host work is priced on
    (designs/host_threads.py), and whether that memory bounds it."""
    machine = get_machine(p.machine)
    return p.to_dict() | {
        "host_threads": machine.host_cores,
        "host_memory_line_rate": machine.host_memory_line_rate,
        "host_memory_bound": p.bound_stage == HOST_MEMORY,
    }


def figures(row: list[Projection], socket: Projection | None = None) -> dict[str, dict]:
    """The projections of a run's designs on one machine as JSON, the one shape every record and
    `bench --json` write: per design its Projection, its speed over each peer's projected beside
    it (`x_hybrid`, `x_lru_device`, `x_prefetch_lru_device`: designs.versus), and for the baseline
    the threads and memory rate its host work is priced on. `socket`: the baseline priced on the
    same server with a whole socket of host (`SOCKET_SHARE`): under the baseline's `socket`, and
    every design's speed over it (`x_hybrid_socket`)."""
    by_name = {p.trainer: p for p in row}
    out = {}
    for p in row:
        out[p.trainer] = shown = host_figures(p) if p.trainer == BASELINE else p.to_dict()
        for peer in PEERS:
            if peer in by_name:
                shown[versus(peer)] = p.samples_per_s / by_name[peer].samples_per_s
        if socket is not None:
            shown[versus(BASELINE, SOCKET_SHARE)] = p.samples_per_s / socket.samples_per_s
    if socket is not None and BASELINE in out:
        out[BASELINE][SOCKET_SHARE] = host_figures(socket)
    return out
