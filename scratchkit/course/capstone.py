"""Notebook 09, the capstone: your planner in the real ScratchPipe trainer, beside the kit's.

ready(plan_batch)             your planner once it passes its check, else the stand-in (the
                              exercises' references, composed) so the notebook runs through
planner_name(planner)         which of the two it is, in the words every line of 09 uses
side_by_side(config, steps, planner)
                              that planner and the kit's on the same batches and the same
                              driver (threads): samples/s, the rows each moved, where the time went
first_held_victim(result)     the hazard lab's run in words: the first Plan that evicted a slot a
                              batch in flight still held (which batch, which slot, which rows)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scratchkit.course.exercises import check
from scratchkit.course.exercises.capstone import stand_in_plan_batch
from scratchkit.course.hazard_lab import LabResult
from scratchkit.course.pipeline_replay import SlotState, replay
from scratchkit.course.viz import stage_breakdown
from scratchkit.trainers import make_trainer


def ready(plan_batch):
    """`plan_batch` if it is written and passes its check; else the stand-in, and say so."""
    try:
        passed = bool(check(plan_batch))
    except NotImplementedError:
        passed = False
    if passed:
        print("plan_batch passes its check: the runs below use your planner")
        return plan_batch
    print(
        "plan_batch is not written yet (or fails its check): the runs below use a stand-in in its "
        "place; write it, then run the notebook again"
    )
    return stand_in_plan_batch


def planner_name(planner) -> str:
    """'your planner', or 'the stand-in planner' where `ready` gave the stand-in: a figure never
    says "your planner" of a run yours did not plan."""
    return "the stand-in planner" if planner is stand_in_plan_batch else "your planner"


@dataclass
class PlannerRun:
    """One planner's run: its speed, the rows it moved and where a step's time went."""

    name: str
    samples_per_s: float  # past the first step (the threads' start)
    fetched_rows: int  # rows collected from the host tables
    written_back_rows: int  # dirty victims' rows sent home
    hit_rate: float  # Train's lookups that found their row (1.0: invariant 1)
    stage_seconds: dict  # stage -> mean seconds per step

    def line(self) -> str:
        return (
            f"{self.name}: {self.samples_per_s:,.0f} samples/s, {self.fetched_rows:,} rows fetched, "
            f"{self.written_back_rows:,} written back, Train's hit rate {self.hit_rate:.3f}"
        )


def _run(name: str, config, steps: int, **options) -> PlannerRun:
    with make_trainer("scratchpipe", config, **options) as trainer:
        records = list(trainer.train(steps))
    timed = records[1:] or records
    stages = sorted({s for r in timed for s in r.stage_seconds})
    return PlannerRun(
        name,
        sum(r.samples for r in timed) / sum(r.seconds for r in timed),
        sum(r.fetched_rows for r in records),
        sum(r.written_back_rows for r in records),
        sum(r.hits for r in records) / sum(r.lookups for r in records),
        {s: float(np.mean([r.stage_seconds.get(s, 0.0) for r in timed])) for s in stages},
    )


def side_by_side(config, steps: int, planner) -> list[PlannerRun]:
    """`planner` (yours, or the stand-in: `planner_name`), then the kit's (the C++ loop, or its
    NumPy twin where it does not build), both on the threads driver, so what differs is the
    planner alone."""
    return [
        _run(planner_name(planner), config, steps, own_planner=planner),
        _run("the kit's planner", config, steps, where="thread"),
    ]


def breakdown_figure(runs: list[PlannerRun]):
    return stage_breakdown(
        {run.name: run.stage_seconds for run in runs},
        title="Where a step's time goes, per planner (Plan runs beside Train)",
    )


def first_held_victim(result: LabResult, table: int = 0) -> str:
    """The first Plan in `result`'s run that gave a miss a slot some batch in flight held: the
    replay's words, and the rows of its first such slot (the one evicted, the one put there)."""
    for moment in replay(result.events, table, result.capacities[table]):
        if moment.count(SlotState.CONFLICT):
            d = moment.decision
            slot = int(np.flatnonzero(moment.states == SlotState.CONFLICT)[0])
            evicted = int(d.victim_ids[np.flatnonzero(d.victim_slots == slot)[0]])
            return (
                f"{moment.words}\nslot {slot}: row {evicted} was evicted while a batch in flight "
                f"still needed it; row {int(moment.slot_ids[slot])} of batch {d.batch} took its place."
            )
    return "no held slot was evicted in this run"
