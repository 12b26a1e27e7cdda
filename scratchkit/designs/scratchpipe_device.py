"""ScratchPipe planned on the device (`scratchpipe-device`, trainers/scratchpipe.py), and its
production peer `prefetch-lru-device` (prefetch.py), priced as it is: its stages in one step, as
its code runs (kit.py's units), and its step.

`scratchpipe-device` plans on the device (scratchpipe/device_plan.py) and moves rows with the
device's kernels (scratchpipe/device_moves.py), so its per-id and per-row work is device work:

- Plan, every table at once (device_plan.py): the working set (a sort of all the lookups, then
  passes over them), one probe of the hash map, passes over the working set's buffers (the misses
  flagged, scanned, compacted, placed, made table-local), the misses into the map, the slots'
  ids, dirty bits and plan marks, the remap of every lookup; while a slot is free, a pass over
  the slots for them; and, in the share of steps that may evict, the victim choice: a key per
  slot, one sort of the slots' keys, passes over the slots for the rest (the chosen flagged,
  scanned, compacted), one stamp of the map per batch of the horizon (the urgencies), the victims
  out of the map. Each array op is a launch (a CuPy call on a GPU, a NumPy call on a CPU), each kernel
  of the .cu files one, a fixed number per batch however many tables; the host reads every
  table's counts once a batch, at the end: one sync, priced as a small copy.
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

Its step (`device_pipeline_step`) on a GPU server is a pipeline of threads, but its stages are the
device's kernels, each thread's on a stream of its own: its resources are the trainer's thread
(Train), Plan's, Collect's and the write-back thread's; the link (rows Collect reads over it, rows
written back); the device's cores (every stage's kernels, not their launches: while a thread
launches, the other streams' kernels run); and the interpreter (every launch of every thread, one
at a time). On a CPU run its stages run inline, one after another in the trainer's thread
(scratchpipe/inline.py): the step is their sum. It moves the rows ScratchPipe's planner plans
(scratchpipe.py: the device planner's plans are the host planner's, array for array).
"""

from __future__ import annotations

from scratchkit.designs import kit
from scratchkit.designs.design import Design, Place, StepTime
from scratchkit.designs.scratchpipe import STAGES, busiest, host_threads, planned_moves, scratchpipe_stages
from scratchkit.designs.serial import one_after_another
from scratchkit.designs.step import StepWork
from scratchkit.designs.train import id_transfer, total, train_stages
from scratchkit.designs.work import FLOAT_BYTES, ID_BYTES, Work
from scratchkit.embedding.working_sets import WorkingSets

# Plan's launches and waits a batch, counted in device_plan.py's code as a GPU runs it (device_work.py
# counts each as it runs; tests/test_device_plan_waits.py holds these to those counts): array ops
# (sorts, scans, fills: a launch on a GPU, a NumPy call on a CPU) and the .cu files' kernels.
PLAN_OPS = 2  # every batch: the counts' array zeroed, the misses' scan;
PLAN_KERNELS = 12  # and the trained batch marked, the working set's table starts, the probe, the
# hits split, the misses compacted, the tables' bounds, the misses' slots, the insert, the place,
# two table-local cuts, every lookup's slot
WORKING_SET_OPS = 2  # a GPU's working set: the sort, the scan (a CPU's is a bitmap: _working_set)
WORKING_SET_KERNELS = 2  # and each run's first id, the buffers
FREE_OPS = 1  # while a slot is free: the scan of the free ones,
FREE_KERNELS = 2  # their flags, their compaction
VICTIM_OPS = 5  # a batch that may evict: the keys' sort, the chosen zeroed, three scans
# (victims per table, the chosen, the written ones)
VICTIM_KERNELS = 10  # the keys, each table's share, the pick, their compaction, the eviction,
# the erase, a table-local cut, two compactions of the written victims, their starts
URGENCY_OPS = 1  # furthest next use: the urgencies zeroed,
HORIZON_KERNELS = 1  # and a stamp of the map per batch of the horizon
PLAN_SYNCS = 1  # the one read of every table's counts, a batch
UNIQUE_PASSES = 10  # a GPU's working set after its sort: ~10 passes of n int64 (runs, scan, buffers)
NUMPY_UNIQUE_PASSES = 6  # np.unique(return_inverse) after its sort, on a CPU
PLAN_PASSES = 12  # the working set's buffers: flags, scan, compaction, place, table-local, remap
VICTIM_PASSES = 20  # over the slots, to choose victims: the keys' inputs, the pick, scans, compactions
FREE_PASSES = 3  # over the slots, for the free ones: flags, scan, compaction


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
    """unique(ids, return_inverse) of N lookups: on a GPU a sort, its passes and kernels; on a CPU
    embedding/working_sets.py's, the bitmap where the tables are small next to the batch (N marks,
    a pass over the rows to read and clear them, U positions), else np.unique (a sort, ~6 passes)."""
    if cpu and rows <= WorkingSets.BITMAP_ROWS_PER_LOOKUP * N:
        return kit.bitmap_working_set(True, N, U, rows)
    if cpu:
        return _sort(N, 1, cpu) + kit.stream(True, NUMPY_UNIQUE_PASSES * N * ID_BYTES)
    return (
        _sort(N, 1, cpu)
        + kit.stream(True, UNIQUE_PASSES * N * ID_BYTES)
        + _ops(WORKING_SET_OPS, cpu)
        + _kernels(WORKING_SET_KERNELS)
    )


def plan_work(w: StepWork, fetched: list[float], written: list[float], cpu: bool = False) -> Work:
    """Plan for every table at once: the tables share one id space, one slot space, one map."""
    S = sum(t.capacity for t in w.tables)
    N, U, M = w.lookups, w.unique_rows, sum(fetched)
    f, H = w.victim_share, w.plan_horizon
    work = (
        _working_set(N, U, w.table_rows, cpu)
        + _probe(U, S)  # hits and misses
        + kit.stream(True, PLAN_PASSES * N * ID_BYTES)
        + _probe(M, S)  # the misses into the map
        + _slot_writes(3 * M + 2 * U, S)  # ids, dirty, marks; retire
        + kit.gather(True, N, ID_BYTES, U * ID_BYTES)  # every lookup's slot
        + _ops(PLAN_OPS, cpu)
        + _kernels(PLAN_KERNELS)
        + kit.calls(False, "device_plan_table", len(w.tables))  # each table's plan cut out
        + Work(pcie=N * ID_BYTES, pcie_copies=1 + PLAN_SYNCS)  # the ids in, the counts out
    )
    filling = 1.0 - f  # a slot is free while the scratchpads fill: the steps that do not evict
    work += kit.stream(True, filling * FREE_PASSES * S * ID_BYTES) + _ops(filling * FREE_OPS, cpu)
    work += _kernels(filling * FREE_KERNELS)
    if any(written):
        work += (
            kit.stream(True, f * VICTIM_PASSES * S * ID_BYTES)
            + _probe(f * H * U, S)  # the urgencies: the horizon's working sets through the map
            + _slot_writes(f * H * U, S)
            + _sort(S, f, cpu)  # every slot's key
            + _probe(f * sum(written), S)  # the victims out of the map
            + _ops(f * (VICTIM_OPS + URGENCY_OPS * (H > 0)), cpu)
            + _kernels(f * (VICTIM_KERNELS + HORIZON_KERNELS * H))
        )
    return work


def device_scratchpipe_stages(w: StepWork, place: Place) -> dict[str, Work]:
    """Plan, Collect, Write-back, Transfer (nothing), Insert and Train of one batch. Train is what
    scratchpipe's does less its host-side hit check and marks, to which its check on the device is
    added; where the device is the host's CPU (the module note) the row stores keep their books on
    the host, and Train is scratchpipe's own (rows.py)."""
    if place.device_is_host:
        return device_stages(w, scratchpipe_stages(w, place)["train"], cpu=True)
    train = total(train_stages(w, footprint="capacity", by_slot=False, kernels=True).values())
    # the ids and offsets in one copy; the slots, Plan's on the device, joined there (one op)
    return device_stages(w, train + id_transfer(w, arrays=1, kernels=True) + kit.calls(True, "op"))


def device_stages(w: StepWork, train: Work, cpu: bool = False) -> dict[str, Work]:
    """The stages around `train` (the module note); `cpu`: the device is the host's CPU."""
    fetched, written = w.share(w.fetched_rows), w.share(w.written_back_rows, evicting_only=True)
    collect, write_back, insert = Work(), Work(), Work()
    for t, m, v in zip(w.tables, fetched, written):
        for width in (w.dim, w.state_width):
            if width:
                rb = width * FLOAT_BYTES
                collect += (
                    _ops(1, cpu)  # one gather kernel a width
                    + (Work(pcie=m * rb) if cpu else kit.rows_over_link(m, rb))  # read over the link, in id order
                    + kit.gather(True, m, rb, t.rows * rb)
                )  # from the host table
                insert += kit.scatter(True, m, rb, t.capacity * rb) + _ops(1, cpu)
                if v:
                    write_back += (
                        _ops(2, cpu)
                        + kit.gather(True, v, rb, t.capacity * rb)
                        # written over the link in the victims' (slot) order, not by id
                        + (Work(pcie=v * rb) if cpu else kit.rows_over_link(v, rb, written=True, by_id=False))
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


def device_pipeline_step(parts: dict[str, Work], w: StepWork, machine, extra_s: float) -> StepTime:
    """The busiest resource on a GPU server (the module note); on a CPU run, the stages' sum."""
    if machine.device_is_host:  # the device planner on a CPU runs inline
        return one_after_another(parts, w, machine, extra_s)
    stages = {name: part.seconds(machine) for name, part in parts.items()}
    groups, resources = host_threads(stages)
    link = lambda s: parts[s].pcie_seconds(machine)
    # every stage is the device's kernels, Plan's, Collect's (which reads the rows over the link
    # itself) and the others' each on a stream of its own. The trainer's thread runs Train; the
    # device's cores are busy for every stage's kernels, not for their launches (while a thread
    # launches, the other streams' kernels run); and every thread launches from one interpreter,
    # which its lock lets do one thing at a time
    kernels = lambda s: parts[s].device_seconds(machine) - parts[s].launch_seconds(machine)
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
        "interpreter": sum(parts[s].launch_seconds(machine) + parts[s].host_seconds(machine) for s in stages),
    }
    return busiest(stages, groups, resources)


SCRATCHPIPE_DEVICE = Design(
    "scratchpipe-device",
    "scratchkit.trainers.scratchpipe:DeviceScratchPipeTrainer",
    "ScratchPipe planned and filled by the device",
    stages=STAGES,
    count=device_scratchpipe_stages,
    combine=device_pipeline_step,
    moves=planned_moves,  # the device planner's plans are the host planner's
    plans_ahead=True,
)
