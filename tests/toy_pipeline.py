"""A hand-made ScratchPipe event trace for the visualizer's tests, independent of the trainer.

A toy planner runs the stages of each batch one after another (tick k: Plan/Collect/Transfer/
Insert/Write-back of batch k, then Train of batch k-D), keeps its own id -> slot map and holds,
and records what it did in an EventLog. With `holds=False` it evicts slots that batches in flight
still use: the hazard the replay must flag. It also returns its own final slot map and the holds
at every tick, so tests compare the replay with a second, independent account.
"""

from __future__ import annotations

import numpy as np

from scratchkit.scratchpipe.events import EventLog, PlanDecision, Stage

HOST_STAGES = (Stage.PLAN, Stage.COLLECT, Stage.TRANSFER, Stage.INSERT, Stage.WRITE_BACK)


def toy_log(batches: list[np.ndarray], capacity: int, depth: int, holds: bool = True, table: int = 0):
    """-> (log, final slot_ids [capacity], held_at: {(stage, batch): {slot: newest holder}})."""
    log = EventLog(origin=0.0)
    slot_of: dict[int, int] = {}
    slot_ids = np.full(capacity, -1, dtype=np.int64)
    in_flight: dict[int, np.ndarray] = {}  # batch -> its slots
    last_use = np.full(capacity, -1, dtype=np.int64)
    held_at = {}
    clock = 0.0

    def event(b, stage):
        nonlocal clock
        log.stage(b, stage, clock, clock + 1.0)
        clock += 1.0

    def holders():
        out = {}
        for b in sorted(in_flight):
            for s in in_flight[b]:
                out[int(s)] = b
        return out

    n = len(batches)
    for tick in range(n + depth):
        b = tick
        if b < n:
            uniq = np.unique(batches[b])
            hit = np.array([u in slot_of for u in uniq], dtype=bool)
            held = set(int(s) for ss in in_flight.values() for s in ss) if holds else set()
            mine = set(slot_of[u] for u in uniq[hit])
            free = [s for s in range(capacity) if slot_ids[s] < 0]
            victims = sorted(
                (s for s in range(capacity) if slot_ids[s] >= 0 and s not in held and s not in mine),
                key=lambda s: last_use[s],
            )
            slots = np.empty(uniq.size, dtype=np.int64)
            victim_ids, victim_slots = [], []
            for i, u in enumerate(uniq):
                if hit[i]:
                    slots[i] = slot_of[int(u)]
                    continue
                if free:
                    s = free.pop(0)
                else:
                    if not victims:
                        raise ValueError("toy planner: capacity too small")
                    s = victims.pop(0)
                    victim_ids.append(int(slot_ids[s]))
                    victim_slots.append(s)
                    del slot_of[int(slot_ids[s])]
                slot_ids[s] = u
                slot_of[int(u)] = s
                slots[i] = s
            last_use[slots] = b
            held_before = np.array(sorted(set(int(s) for ss in in_flight.values() for s in ss)), dtype=np.int64)
            log.plan(
                PlanDecision(
                    b,
                    table,
                    uniq.astype(np.int64),
                    slots,
                    hit,
                    np.array(victim_ids, dtype=np.int64),
                    np.array(victim_slots, dtype=np.int64),
                    held_before,
                )
            )
            in_flight[b] = slots
            for stage in HOST_STAGES:  # what each moment should show: holds including b's
                held_at[(stage, b)] = holders()
                event(b, stage)
        t = tick - depth
        if 0 <= t < n:
            held_at[(Stage.TRAIN, t)] = holders()
            event(t, Stage.TRAIN)
            del in_flight[t]
    return log, slot_ids, held_at
