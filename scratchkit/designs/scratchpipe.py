"""ScratchPipe planned on the host (`scratchpipe`, trainers/scratchpipe.py): a look-forward
scratchpad filled by a pipeline, so Train always hits.

Its stages: Plan (the planner's per-lookup and per-id work, plus its per-table calls), Collect
(host rows gathered, pinned on a GPU), Write-back, Transfer, Insert (one scatter per table into
the scratchpad), Train (what gpu-only's stages do, on the scratchpad's rows by slot, with the
check that every lookup hits).

Its step is the busiest of the resources its stages occupy (`pipeline_step`):

- On a GPU server: Plan in its own process, spread over `min(planners, cores left)` cores (the
  cores less Train's, Collect's and the write-back thread's: `plan_cores`); Collect on a thread;
  Write-back, Transfer and Insert one after another on another thread; the link (Transfer, the
  victims' rows); the device (Insert's scatters, the victims' gathers, Train).
- On a CPU run (no GPU) every host stage runs in one forked process and Train in the trainer's:
  the step is the larger of the two, or their sum over the cores when there are fewer cores than
  the two; each side also spends the hand-off of every plan (`plan_handoff`: pickled into a ring
  of shared memory, its skeleton down a pipe), which no stage's clock counts. With two cores or
  more, the two sides get the cores the calibration measured two processes getting at once
  (`co_run_cores`, calibration/co_run.py: 2 where each has one, 1 where they take turns); where
  that is under two, they take turns for part of the step, and `co_run` stretches each side's
  stages by the turns the other side's work takes from it.

`bound_stage` names the largest stage within the busiest resource. Which rows it moves, without
training: ScratchPipe's planner itself (`PlanAhead`, the C++ loop where it builds) plans the
batches at the design's depth and victim policy: its misses are the rows fetched, its dirty
victims the rows written back (`planned_moves`).
"""

from __future__ import annotations

import numpy as np

from scratchkit.config import TrainConfig
from scratchkit.designs import kit
from scratchkit.designs.design import Design, Place, StepTime
from scratchkit.designs.step import StepWork
from scratchkit.designs.train import id_transfer, total, train_stages
from scratchkit.designs.work import FLOAT_BYTES, ID_BYTES, Work
from scratchkit.scratchpipe.schedule import HOST_PROCESS_STAGES

STAGES = ("plan", "collect", "write_back", "transfer", "insert", "train")


def scratchpipe_stages(w: StepWork, place: Place) -> dict[str, Work]:
    """Plan, Collect, Write-back, Transfer, Insert and Train of one batch."""
    fetched, written = w.share(w.fetched_rows), w.share(w.written_back_rows, evicting_only=True)
    mb = w.moved_row_bytes
    plan = (
        Work(
            host_plan=tuple(
                (t.rows, t.lookups, t.unique, m, t.capacity, w.victim_share if v else 0.0)
                for t, m, v in zip(w.tables, fetched, written)
            )
        )
        + kit.plan_tables([t.lookups for t in w.tables])
        + kit.calls(False, "plan_batch")
        + kit.plan_tables([t.lookups for t, v in zip(w.tables, written) if v > 0], "plan_victims", w.victim_share)
    )
    collect, write_back, insert = Work(), Work(), Work()
    for t, m, v in zip(w.tables, fetched, written):
        for width in (w.dim, w.state_width):
            if width:
                rb = width * FLOAT_BYTES
                collect += (
                    kit.calls(False, "op", 2) + kit.gather(False, m, rb, t.rows * rb) + Work(host_pinned=2 * m * rb)
                )  # pinned for Transfer, on a GPU
                insert += kit.scatter(True, m, rb, t.capacity * rb) + kit.calls(True, "op")
                if v:
                    write_back += (
                        kit.calls(True, "op", 2)
                        + kit.gather(True, v, rb, t.capacity * rb)
                        + kit.calls(False, "op")
                        + kit.scatter(False, v, rb, t.rows * rb)
                        + Work(pcie=v * rb, pcie_copies=1)
                    )
        insert += kit.map_write(m, t.capacity) + kit.map_write(m, t.capacity)  # dirty bits, ids
    train = total(
        train_stages(
            w, footprint="capacity", by_slot=False, batched=place.device_batched, kernels=place.kernels
        ).values()
    )
    train += total(
        kit.map_lookup(t.unique, t.capacity)
        + kit.scan(t.unique, 2)  # every lookup hits
        + kit.map_write(t.unique, t.capacity)
        + kit.map_write(t.unique, t.capacity)
        + kit.from_numpy(4)
        for t in w.tables
    )  # slots, ids, offsets
    transfer = Work(pcie=w.fetched_rows * mb, pcie_copies=2 * w.num_tables) + id_transfer(
        w, arrays=2, kernels=place.kernels
    )
    return {
        "plan": plan,
        "collect": collect,
        "write_back": write_back,
        "transfer": transfer,
        "insert": insert,
        "train": train,
    }


def plan_handoff(w: StepWork) -> tuple[Work, Work]:
    """A CPU run's hand-off of Plan(b) from the host process to Train (scratchpipe/ring.py), on
    no stage's clock: (what the host process spends sending it, what the trainer's spends
    receiving it). Its arrays, as Train reads them: per table the ids and their slots [n], the
    offsets [B], the working set's ids and slots [u]; the dense features and labels. Each side
    copies them once (into the ring, out of it): read and written."""
    nbytes = (
        sum(2 * t.lookups + w.batch_size + 2 * t.unique for t in w.tables) * ID_BYTES
        + w.batch_size * (w.num_dense + 1) * FLOAT_BYTES
    )
    side = lambda name: (
        kit.calls(False, f"{name}_batch")
        + kit.calls(False, f"{name}_table", w.num_tables)
        + kit.stream(False, 2 * nbytes)
    )
    return side("send"), side("receive")


def plan_cores(w: StepWork, machine) -> int:
    """Cores ScratchPipe's planners run on at once: as many as there are planners, up to the
    cores left by the other host threads (Train's; on a GPU also Collect's and the write-back's)."""
    others = 1 if machine.device_is_host else 3
    return max(1, min(w.plan_parallelism, machine.host_cores - others))


def co_run(
    stages: dict[str, float], handoff: tuple[float, float], machine, extra_s: float = 0.0
) -> tuple[float, float]:
    """ScratchPipe on a CPU run with two cores or more: the factors by which (its host process's,
    Train's) priced seconds a step grow beside each other, where the run gets P = co_run_cores
    cores at once (calibration/co_run.py). While both sides have work each runs at P/2 of a core:
    with `a` the less busy side's seconds a step alone and `b` the busier's, the first takes
    a x 2/P and the second b + a x (2/P - 1), its own work and the turns it gave the other's.
    P >= 2: each has a core (1, 1); P = 1: they take turns, the busier side's step is a + b.
    `handoff`: the seconds each side spends handing a plan over (`plan_handoff`). `extra_s`, the
    host process's measured seconds (the batch's reading), is work of its side but stays as
    measured: the side's turns land on its priced stages. With one core, or on a GPU server (the
    host's threads priced alone, the device's kernels Train's), (1, 1): the "shared cores"
    resource adds the one core's turns up (`pipeline_step`)."""
    if not machine.device_is_host or machine.host_cores < 2:
        return 1.0, 1.0
    turns = 2.0 / min(max(machine.co_run_cores or machine.host_cores, 1.0), 2.0) - 1.0  # 0 .. 1
    send, receive = handoff
    host = sum(stages[s] for s in HOST_PROCESS_STAGES) + send
    train = stages["train"] + receive
    if min(host, train) <= 0:
        return 1.0, 1.0
    a, b = sorted((host + extra_s, train))
    beside = lambda side: b + a * turns if side == b else a * (1.0 + turns)
    return (beside(host + extra_s) - extra_s) / host, beside(train) / train


def host_threads(stages: dict[str, float]) -> tuple[dict[str, list[str]], dict[str, float]]:
    """The host's threads on a GPU server (both ScratchPipes): Plan's, Collect's, and the thread
    that runs Write-back, Transfer and Insert one after another. -> (their stages, busy seconds)."""
    groups = {"plan": ["plan"], "collect": ["collect"], "write-back thread": ["write_back", "transfer", "insert"]}
    resources = {
        "plan": stages["plan"],
        "collect": stages["collect"],
        "write-back thread": stages["write_back"] + stages["transfer"] + stages["insert"],
    }
    return groups, resources


def busiest(stages: dict[str, float], groups: dict[str, list[str]], resources: dict[str, float]) -> StepTime:
    """A pipeline's step: its busiest resource, bound by that resource's largest stage."""
    bound = max(resources, key=resources.get)
    return StepTime(stages, resources[bound], max(groups[bound], key=stages.get), True, resources)


def pipeline_step(parts: dict[str, Work], w: StepWork, machine, extra_s: float) -> StepTime:
    """The busiest resource (the module note): Plan spread over `plan_cores`; on a CPU run the two
    processes beside each other (`co_run`), on a GPU server the threads, the link and the device."""
    planners = plan_cores(w, machine)
    stages = {name: part.seconds(machine, planners) for name, part in parts.items()}
    if not machine.device_is_host:
        groups, resources = host_threads(stages)
        link = lambda s: parts[s].pcie_seconds(machine)
        on_device = lambda s: parts[s].device_seconds(machine)
        groups |= {"pcie": ["transfer", "write_back"], "device": ["train", "insert", "write_back"]}
        resources |= {
            "pcie": max(link("transfer"), link("write_back")),  # one direction each
            "device": stages["train"] + extra_s + on_device("insert") + on_device("write_back"),
        }
        return busiest(stages, groups, resources)
    send, receive = handoff = tuple(part.seconds(machine) for part in plan_handoff(w))  # on no stage's clock
    beside = co_run(stages, handoff, machine, extra_s)
    stages = {
        s: v * (beside[1] if s == "train" else beside[0] if s in HOST_PROCESS_STAGES else 1.0)
        for s, v in stages.items()
    }
    host = list(HOST_PROCESS_STAGES)
    # the host process reads the batches too (`extra_s`: measured there, beside Train already)
    busy = sum(stages[s] for s in host) + extra_s + send * beside[0]
    train = stages["train"] + receive * beside[1]
    groups = {"host process": host, "train": ["train"], "shared cores": list(stages)}
    resources = {"host process": busy, "train": train, "shared cores": (busy + train) / machine.host_cores}
    return busiest(stages, groups, resources)


def planned_moves(config: TrainConfig, source, batches: int, depth: int | None = None) -> tuple[float, float]:
    """ScratchPipe's planner on empty scratchpads, batch after batch, as a `train()` call plans:
    (its misses, its dirty victims) a step, the mean over the second half of the batches.
    `depth`: plan at this look-ahead depth, not the config's (0: a cache filled on demand)."""
    from scratchkit.scratchpipe.plan_ahead import PlanAhead  # torch: only once rows are counted

    planner = PlanAhead.fresh(config, source, depth=depth)
    moved = []
    for b in range(batches):
        planned = planner.plan(b)
        moved.append((sum(p.fetched_rows for p in planned.tables), sum(p.written_back_rows for p in planned.tables)))
    fetched, written = np.mean(moved[batches // 2 :], axis=0)
    return float(fetched), float(written)


SCRATCHPIPE = Design(
    "scratchpipe",
    "scratchkit.trainers.scratchpipe:ScratchPipeTrainer",
    "look-forward scratchpad, pipelined (ScratchPipe)",
    stages=STAGES,
    count=scratchpipe_stages,
    combine=pipeline_step,
    moves=planned_moves,
    plans_ahead=True,
    planners_on_a_cpu=1,  # its host process plans the tables one after another
)
