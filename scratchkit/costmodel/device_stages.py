"""The work of `scratchpipe-device`'s stages in one step, as its code runs (kit.py's units).

`scratchpipe-device` plans on the device (scratchpipe/device_plan.py) and moves rows with the
device's kernels (scratchpipe/device_moves.py), so its per-id and per-row work is device work:

- Plan, every table at once: the working set (a sort of all the lookups), two probes of the hash
  map (the shortfall, then the plan), passes over the slots (free, held), the misses into the
  map, the slots' ids, dirty bits and plan marks, the remap of every lookup; and, in the share of
  steps that evict, the victim choice: passes over the slots for the candidates and their keys,
  one probe of the map per batch of the horizon (the urgencies), one sort of the candidates, the
  victims out of the map. Each array op is a launch (a CuPy kernel on a GPU, a NumPy call on a
  CPU), a fixed number per batch however many tables; each length the host must know (where each
  table's misses, free slots and victims start) waits for the device: a sync, priced as a small copy.
- Collect: the missed rows read from the host tables by a gather kernel, over the link on a GPU.
- Write-back: the dirty victims' rows gathered from their slots and written over the link.
- Insert: the rows scattered into their slots, the slots' dirty bits and ids.
- Train: what scratchpipe's Train does, its hit check and marks on the device's bookkeeping.

Where the device is the host's CPU (`cpu=True`) the same code runs on NumPy arrays: each op is a
NumPy call, each kernel the host build's call, each probe of the map at the rate `calibrate`
measured for it, each sort NumPy's, and the working set is `lookahead.WorkingSets`' bitmap where
the tables are small next to the batch (a mark per lookup, a pass over the rows), as it runs
there. Plan's Python per table (cutting each table's plan out) is a host call on both; Train's
check runs on the row stores' host books there, as scratchpipe's does.
"""

from __future__ import annotations

from scratchkit.costmodel import kit
from scratchkit.costmodel.work import FLOAT_BYTES, ID_BYTES, Work
from scratchkit.costmodel.step import StepWork
from scratchkit.embedding.working_sets import WorkingSets

# Counted in device_plan.py's code (a NumPy call on a CPU, a CuPy kernel or copy on a GPU, plan.cu's
# fused steps one each; a boolean index, `flatnonzero` or a count read back needs the device first:
# a sync):
PLAN_OPS = 47  # array ops a batch, every table at once: see, shortfall, plan, retire
PLAN_KERNELS = 12  # and the .cu files' kernels: 2 map queries, an insert, an erase, 7 table-local
# cuts, the misses' slots
PLAN_SYNCS = 11  # waits for the device a batch (lengths, the tables' bounds)
VICTIM_OPS = 24  # more ops a batch that evicts, beyond those per batch of the horizon,
VICTIM_KERNELS = 1  # and the victims' keys
HORIZON_OPS = 1  # per batch of the horizon: a scatter of urgencies,
HORIZON_KERNELS = 1  # and a probe of the map
VICTIM_SYNCS = 4  # the hits' slots, the candidates, their count per table, the chosen
UNIQUE_PASSES = 6  # unique(return_inverse): the sort, then ~6 passes of n int64


def _probe(ids: float, slots: float) -> Work:
    """`ids` probes of the hash map over `slots` slots (work.py prices them)."""
    return Work(device_probes=((ids, slots),)) if ids else Work()


def _slot_writes(count: float, slots: float) -> Work:
    """`count` int64 entries written into a [slots] array (ids, clocks, dirty bits)."""
    return kit.scatter(True, count, ID_BYTES, slots * ID_BYTES)


def _ops(count: float, cpu: bool) -> Work:
    """`count` array ops: kernel launches on a GPU, NumPy calls where the device is the CPU."""
    return kit.numpy_calls(count) if cpu else kit.calls(True, "op", count)


def _kernels(count: float) -> Work:
    """`count` kernels of the .cu files: launches on a GPU, the host build's calls on a CPU."""
    return kit.calls(True, "kernel", count)


def _sort(keys: float, count: float, cpu: bool) -> Work:
    return Work(device_sorts=(("numpy" if cpu else "torch", keys, count),))


def _working_set(N: float, U: float, rows: int, cpu: bool) -> Work:
    """unique(ids, return_inverse) of N lookups: a sort, or on a CPU with small tables the bitmap
    (lookahead.WorkingSets: N marks, a pass over the rows to read and clear them, U positions)."""
    if cpu and rows <= WorkingSets.BITMAP_ROWS_PER_LOOKUP * N:
        return kit.bitmap_working_set(True, N, U, rows)
    return _sort(N, 1, cpu) + kit.stream(True, UNIQUE_PASSES * N * ID_BYTES)


def plan_work(w: StepWork, fetched: list[float], written: list[float], cpu: bool = False) -> Work:
    """Plan for every table at once: the tables share one id space, one slot space, one map."""
    S = sum(t.capacity for t in w.tables)
    N, U, M = w.lookups, w.unique_rows, sum(fetched)
    f, H = w.victim_share, w.plan_horizon
    work = (
        _working_set(N, U, w.table_rows, cpu)
        + _probe(2 * U, S)
        + kit.stream(True, 4 * S * ID_BYTES)  # shortfall, plan; free, held
        + _probe(M, S)
        + _slot_writes(3 * M + 2 * U, S)  # insert; ids, dirty, marks, retire
        + kit.gather(True, N, ID_BYTES, U * ID_BYTES)  # every lookup's slot
        + _ops(PLAN_OPS, cpu)
        + _kernels(PLAN_KERNELS)
        + kit.calls(False, "device_plan_table", len(w.tables))  # each table's plan cut out
        + Work(pcie=N * ID_BYTES, pcie_copies=1 + PLAN_SYNCS)
    )  # the ids in
    evicting = [(t, v) for t, v in zip(w.tables, written) if v]
    if evicting:
        candidates = max(sum(t.capacity - t.unique for t, _ in evicting), 1)
        work += (
            kit.stream(True, f * 8 * S * ID_BYTES)
            + _probe(f * H * U, S)  # candidates, keys; urgencies
            + _slot_writes(f * H * U, S)
            + _sort(candidates, f, cpu)
            + _probe(f * sum(v for _, v in evicting), S)  # the victims out of the map
            + _ops(f * (VICTIM_OPS + HORIZON_OPS * H), cpu)
            + _kernels(f * (VICTIM_KERNELS + HORIZON_KERNELS * H))
            + Work(pcie_copies=f * VICTIM_SYNCS)
        )
    return work


def device_scratchpipe_stages(w: StepWork, train: Work, cpu: bool = False) -> dict[str, Work]:
    """Plan, Collect, Write-back, Transfer (nothing), Insert and Train of one batch. `train`:
    scratchpipe's Train less its host-side hit check and marks (stages.py), to which its check on
    the device is added; `cpu`: the device is the host's CPU (the module note), where the row
    stores keep their books on the host and `train` is scratchpipe's own."""
    fetched, written = w.share(w.fetched_rows), w.share(w.written_back_rows, evicting_only=True)
    collect, write_back, insert = Work(), Work(), Work()
    for t, m, v in zip(w.tables, fetched, written):
        for width in (w.dim, w.state_width):
            if width:
                rb = width * FLOAT_BYTES
                collect += (
                    _ops(2, cpu)
                    + Work(pcie=m * rb)  # read over the link
                    + kit.gather(True, m, rb, t.rows * rb)
                )  # from the host table
                insert += kit.scatter(True, m, rb, t.capacity * rb) + _ops(1, cpu)
                if v:
                    write_back += (
                        _ops(2, cpu)
                        + kit.gather(True, v, rb, t.capacity * rb)
                        + Work(pcie=v * rb)  # written over the link
                        + kit.scatter(True, v, rb, t.rows * rb)
                    )  # into the host table
        insert += _slot_writes(2 * m, t.capacity) + _ops(2, cpu)  # dirty bits, ids
    if not cpu:  # Train's hit check (one kernel, read with the loss) and marks, on the device's bookkeeping
        train += kit.device_hit_count(w.tables)
        for t in w.tables:
            train += _slot_writes(2 * t.unique, t.capacity) + kit.calls(True, "op", 2)
    return {
        "plan": plan_work(w, fetched, written, cpu),
        "collect": collect,
        "write_back": write_back,
        "transfer": Work(),
        "insert": insert,
        "train": train,
    }
