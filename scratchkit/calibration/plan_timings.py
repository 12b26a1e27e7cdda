"""`calibrate`'s timings of ScratchPipe's planner (the C++ loop, scratchkit/scratchpipe/plan_native.py):
what the cost model's `plan` unit is priced by (docs/costmodel.md).

    host_plan_lookup_rate   lookups/s seeing a batch            by table rows, on Zipf streams past
    host_plan_id_rate       distinct ids/s planning              their filling (one planner, one
    host_plan_miss_rate     misses/s beyond that                 table; CPU time)
    host_plan_slot_rate     slots/s of the victim choice's pass over a full scratchpad, by slots
    plan_table, plan_batch, plan_victims   (host_calls) what `PlanAhead.plan` costs beyond those
                            rates per table, per batch and per table that evicts, at a small
                            batch's shape (2,048 lookups a table)
    plan_table_few          (host_calls) the same per-table cost at 64 lookups a table (tiny's)
"""

from __future__ import annotations

import time

import numpy as np

from scratchkit.config import TrainConfig
from scratchkit.costmodel.hardware import RateCurve
from scratchkit.designs.kit import PLAN_LOOKUPS
from scratchkit.calibration.kit_timings import Bench


PLAN_ROWS = ((2**16,), (2**15, 2**18, 2**20))  # table rows the planner is timed at (quick, full)
FEW_SLOTS = 256  # the scratchpads the victim choice is timed at with 64 lookups a table (tiny has 200)


def plan_rates(quick: bool, slot_rate: RateCurve | None = None) -> tuple[RateCurve, RateCurve, RateCurve, str]:
    """ScratchPipe's planner (the C++ loop, one table) on synthetic Zipf(0.8) streams past their
    filling, at tables of 32k to 1M rows (its per-row records and bitmaps grow with the table): a
    scratchpad of the whole table (every id a hit) and one of a quarter of it (misses evict).
    Seeing batches gives lookups/s; planning the first, distinct ids/s; the second's extra time per
    miss, misses/s, less the victim choice's pass over the slots where `slot_rate` prices it
    apart. -> (each as a RateCurve by table rows, source)."""
    from scratchkit.scratchpipe.plan_native import native_planner_available

    if not native_planner_available():
        return (
            RateCurve.constant(4e7),
            RateCurve.constant(1e7),
            RateCurve.constant(5e6),
            "assumption: no C++ compiler here for the planner; rates seen on a 2-core VM",
        )
    batches = 10 if quick else 24
    lookup, ident, miss = [], [], []
    for rows in PLAN_ROWS[not quick]:
        hits, misses = _plan_stream(rows, None, batches), _plan_stream(rows, rows // 4, batches)
        id_rate = hits["ids"] / hits["plan"]
        scans = misses["scanned"] / slot_rate.at(misses["capacity"]) if slot_rate and misses["scanned"] else 0.0
        extra = misses["plan"] - misses["ids"] / id_rate - scans
        lookup.append((rows, (hits["lookups"] + misses["lookups"]) / (hits["see"] + misses["see"])))
        ident.append((rows, id_rate))
        if misses["misses"] >= 0.1 * misses["ids"]:  # enough misses to time (a small table holds most)
            miss.append((rows, misses["misses"] / max(extra, 0.05 * misses["plan"])))
    return (
        RateCurve(tuple(lookup)),
        RateCurve(tuple(ident)),
        RateCurve(tuple(miss or [(1, 5e6)])),
        f"the C++ planner (NativePlans, one planner) on one table of {PLAN_ROWS[not quick]} rows, Zipf 0.8, 32k lookups a "
        f"batch, depth 2, scratchpads of all rows (hits only) and of a quarter (misses), the "
        f"second half of {batches} batches, CPU time",
    )


def plan_slot_rate(quick: bool) -> tuple[RateCurve | None, str]:
    """Slots/s of the planner's victim choice, which counts every slot of a full scratchpad once
    per batch that evicts: one new id a batch into a full scratchpad (one victim), the time per
    batch at 2^13 .. 2^18 slots (2^16 quick) less that at 2^10, over the slots between.
    -> (rate by slots, source)."""
    from scratchkit.scratchpipe.plan_native import native_planner_available

    if not native_planner_available():
        return None, "not measured: no C++ compiler here for the planner"
    small, sizes = 2**10, (2**13, 2**16) if quick else (2**13, 2**16, 2**18)
    batches = 20 if quick else 60
    base = _evicting_batch_seconds(small, batches)
    rates = [(c, (c - small) / max(_evicting_batch_seconds(c, batches) - base, 1e-9)) for c in sizes]
    return RateCurve(tuple(rates)), (
        f"the C++ planner (one table) planning one new id and 64 hits a batch into a full scratchpad "
        f"of {sizes} slots: time per batch less at {small} slots, per slot, median, CPU time"
    )


def _timed_plans(
    ids: list[np.ndarray],
    rows: int,
    batches: int,
    slot_ids: np.ndarray,
    last_trained: np.ndarray,
    depth: int = 2,
    horizon: int = 12,
):
    """One planner (the C++ loop, one table, one thread) over the batches of `ids` (per batch, its
    lookups' ids; at least batches + horizon + 1 of them), from a scratchpad holding `slot_ids`:
    per batch b < batches, (CPU seconds seeing batch b + horizon + 1, CPU seconds planning b, the plan)."""
    from scratchkit.config import VictimPolicy
    from scratchkit.scratchpipe.plan_ahead import PlanSetup
    from scratchkit.scratchpipe.plan_native import NativePlans

    class Batch:  # what a planner reads of a batch
        def __init__(self, k):
            self.ids = [ids[k]]

    capacity = len(slot_ids)
    planner = NativePlans(
        PlanSetup(
            (rows,),
            (capacity,),
            depth,
            VictimPolicy.FURTHEST,
            True,
            horizon,
            False,
            (slot_ids,),
            (np.zeros(capacity, bool),),
            (last_trained,),
        )
    )
    for k in range(horizon + 1):
        planner.see(k, Batch(k))
    for b in range(batches):
        if b > depth:
            planner.retire(b - depth - 1)
        start = time.thread_time()
        planner.see(b + horizon + 1, Batch(b + horizon + 1))
        middle = time.thread_time()
        (plan,) = planner.plan(b, b + horizon + 1)
        yield middle - start, time.thread_time() - middle, plan


def _evicting_batch_seconds(capacity: int, batches: int, horizon: int = 12) -> float:
    """Median CPU seconds of Plan(b) on a full scratchpad of `capacity` slots, each batch one id never
    seen before (a victim every batch) and 64 resident ids (hits): the slots' last uses and next
    uses spread over the batches, as a real stream's do, so the victim choice's pass over them
    branches as it does in training (with every slot alike it runs twice as fast)."""
    rng = np.random.default_rng(1)
    last = horizon + batches + 2
    ids = [np.concatenate([[capacity + k], rng.choice(capacity, 64, replace=False)]) for k in range(last)]
    timed = _timed_plans(
        ids,
        capacity + last,
        batches,
        np.arange(capacity, dtype=np.int64),
        rng.integers(-1, 8, capacity),
        horizon=horizon,
    )
    return float(np.median([plan_s for _, plan_s, _ in timed]))


def _plan_stream(rows: int, capacity: int | None, batches: int, depth: int = 2, horizon: int = 12) -> dict[str, float]:
    """Seconds seeing and planning batches of one stream, and what they held, past the filling.
    `capacity`: slots (None: the whole table), at least what the batches in flight need."""
    from scratchkit.config import DataConfig
    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.scratchpipe.capacity import minimum_capacities

    source = SyntheticSource(
        DataConfig(table_sizes=(rows,), pooling=32, batch_size=1024, zipf=0.8, num_batches=batches + horizon + 1)
    )
    needed = minimum_capacities(source, depth, 0, batches)[0]
    capacity = rows if capacity is None else min(rows, max(capacity, needed + needed // 4))
    ids = [source.batch(b).ids[0] for b in range(batches + horizon + 1)]
    empty = np.full(capacity, -1, np.int64)
    total = dict.fromkeys(("see", "plan", "lookups", "ids", "misses", "scanned"), 0.0) | {"capacity": capacity}
    timed = _timed_plans(ids, rows, batches, empty, empty.copy(), depth, horizon)
    for b, (see_s, plan_s, plan) in enumerate(timed):
        if b >= batches // 2:  # past the filling
            for key, value in (
                ("see", see_s),
                ("plan", plan_s),
                ("lookups", len(ids[b])),
                ("ids", len(plan.decision.unique_ids)),
                ("misses", plan.fetched_rows),
                ("scanned", capacity if plan.victims else 0),
            ):
                total[key] += value
    return total


def plan_call_seconds(bench: Bench, host: dict) -> tuple[float, float, float, float, float]:
    """The planner's cost beyond what its rates in `host` price (per lookup, id, miss and slot
    scanned): `PlanAhead.plan` of batches of 2048 lookups a table, tables of 32k rows. With
    scratchpads of whole tables (no victims) at 2 and 8 tables: their difference per table, less a
    table's priced work, is the per-table cost (marshalling, the plan's arrays); what 2 tables cost
    beyond twice that, the per-batch one (from the 64-lookup tables below). With scratchpads of a quarter (misses evict) at 8 tables:
    the extra per table, less the extra priced work, is the cost of a table's victim choice
    beyond its pass over the slots (at these small batches its fixed part shows). The per-table
    cost again at 64 lookups a table: it carries per-id work the rates (timed at 32k lookups a
    batch) leave out, and priced at 2,048 lookups for every table, tiny's Plan (64 a table) came
    out far over its measured time. The victim choice again at 64 lookups a table, into
    scratchpads of 256 slots (64 lookups never fill a quarter of 32k): priced at 2,048 lookups,
    it was most of tiny's predicted Plan, which then came out far over too.
    -> (seconds per table, per batch, per table that evicts, per table at 64 lookups, per table
    that evicts at 64 lookups)."""
    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.scratchpipe.plan_ahead import PlanAhead

    rows, scan = 2**15, host["host_plan_slot_rate"]

    def seconds(tables: int, capacity: int, lookups: int = PLAN_LOOKUPS[1]) -> tuple[float, float]:
        """-> (median seconds a batch, priced seconds a table), at `lookups` a table (pooling 8)"""
        config = small_batch_config(tables, rows, capacity, 4 * bench.repeats + 24, batch_size=lookups // 8)
        planner, taken, priced = PlanAhead.fresh(config, SyntheticSource(config.data)), [], []
        for b in range(4 * bench.repeats + 8):  # wall time, less PlanAhead's reading
            start = time.perf_counter()
            planned = planner.plan(b)
            taken.append(time.perf_counter() - start - planned.read_seconds)
            priced.append(
                sum(
                    len(p.lookup_slots) / host["host_plan_lookup_rate"].at(rows)
                    + len(p.decision.unique_ids) / host["host_plan_id_rate"].at(rows)
                    + p.fetched_rows / host["host_plan_miss_rate"].at(rows)
                    + (capacity / scan.at(capacity) if scan and len(p.decision.victim_ids) else 0.0)
                    for p in planned.tables
                )
                / tables
            )
        return float(bench.statistic(taken[8:])), float(np.mean(priced[8:]))

    (two, priced_two), (eight, priced_eight) = seconds(2, rows), seconds(8, rows)
    (evicting, priced_evicting) = seconds(8, rows // 4)
    few = PLAN_LOOKUPS[0]
    (two_few, priced_two_few), (eight_few, priced_eight_few) = seconds(2, rows, few), seconds(8, rows, few)
    (evicting_few, priced_evicting_few) = seconds(8, FEW_SLOTS, few)
    table, table_few = max((eight - two) / 6, 0.0), max((eight_few - two_few) / 6, 0.0)
    victims = (evicting - eight) / 8 - (priced_evicting - priced_eight)
    victims_few = (evicting_few - eight_few) / 8 - (priced_evicting_few - priced_eight_few)
    # the per-batch cost from the 64-lookup tables: at 2,048 a table's cost (~100 us, noisy by
    # tens) buries it, and `two - 2 * table` mostly came out 0
    return (
        max(table - (priced_two + priced_eight) / 2, 0.0),
        max(two_few - 2 * table_few, 0.0),
        max(victims, 0.0),
        max(table_few - (priced_two_few + priced_eight_few) / 2, 0.0),
        max(victims_few, 0.0),
    )


def small_batch_config(
    tables: int, rows: int, capacity: int, batches: int, num_dense: int = 1, batch_size: int = 256
) -> TrainConfig:
    """The planner's calls are timed at a small batch's shape: 2048 lookups a table (256 samples,
    pooling 8) of Zipf(0.8) ids, `tables` tables of `rows` rows, scratchpads of `capacity`."""
    from scratchkit.config import CacheParams, DataConfig

    return TrainConfig(
        data=DataConfig(
            table_sizes=(rows,) * tables,
            pooling=8,
            batch_size=batch_size,
            num_dense=num_dense,
            zipf=0.8,
            num_batches=batches,
        ),
        cache=CacheParams(capacity=capacity),
    )


MAP_SLOTS = ((2**14, 2**18), (2**12, 2**16, 2**20))  # the hash map's slots it is timed at (quick, full)
PROBES = 2**14  # ids a query: a batch's distinct ids, about


def map_probe_rate(quick: bool) -> tuple[RateCurve, str]:
    """Probes/s of the scratchpad's hash map on this CPU's engine (the host build of hashmap.cu,
    else its NumPy twin), as scratchpipe-device's Plan queries it: a full map of S slots, 16k
    ids a query, half of them in it, in random order. The time of a 64-id query is taken out
    (the call's own cost is a `kernel` call of its stage). -> (rate by slots, source)."""
    from scratchkit.kernels.array_ops import ArrayOps
    from scratchkit.kernels.engine import EngineKind, make_engine, resolve
    from scratchkit.scratchpipe.device_map import DeviceSlotMap

    engine, rng, repeats = make_engine(resolve(EngineKind.AUTO, "cpu")), np.random.default_rng(7), 3 if quick else 7
    points = []
    for slots in MAP_SLOTS[not quick]:
        resident = rng.choice(4 * slots, slots, replace=False).astype(np.int64)
        table = DeviceSlotMap(slots, engine, ArrayOps(engine.xp))
        table.fill(resident, np.arange(slots, dtype=np.int64))

        def seconds(n: int) -> float:
            ids = [
                rng.permutation(
                    np.concatenate([rng.choice(resident, n // 2), rng.integers(4 * slots, 8 * slots, n - n // 2)])
                )
                for _ in range(repeats)
            ]
            taken = []
            for query in ids:
                start = time.thread_time()
                table.query(query)
                taken.append(time.thread_time() - start)
            return float(np.median(taken))

        points.append((slots, (PROBES - 64) / max(seconds(PROBES) - seconds(64), 1e-9)))
    return RateCurve(tuple(points)), (
        f"the kernels' hash map on this CPU ({engine.name} engine), full maps of "
        f"{MAP_SLOTS[not quick]} slots, {PROBES} ids a query (half in it), less a "
        f"64-id query's time, median of {repeats}, CPU time"
    )


def device_plan_table_seconds(machine) -> float:
    """What scratchpipe-device's Plan costs per table beyond what `machine` prices (its loop
    cutting each table's plan out of the joined arrays, host Python): Plan on this CPU at 2 and
    26 tables of 256 rows, 8 lookups a table and batch (so the per-id work is a few percent),
    each less its priced work (designs/scratchpipe_device.py plan_work on `machine`), the difference per table.
    Wall time less the batches' reading, median, past the filling."""
    from scratchkit.config import CacheParams, DataConfig
    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.designs.scratchpipe_device import plan_work
    from scratchkit.scratchpipe.plan_ahead import PlanAhead
    from scratchkit.designs.step import StepWork

    def unpriced(tables: int) -> float:
        config = TrainConfig(
            data=DataConfig(
                table_sizes=(256,) * tables, pooling=1, batch_size=8, num_dense=1, zipf=0.8, num_batches=64
            ),
            cache=CacheParams(capacity=256),
        )
        source, taken, moved = SyntheticSource(config.data), [], []
        planner = PlanAhead.fresh(config, source, device="cpu")
        for b in range(40):
            start = time.perf_counter()
            planned = planner.plan(b)
            taken.append(time.perf_counter() - start - planned.read_seconds)
            moved.append(
                [sum(getattr(p, k) for p in planned.tables) for k in ("fetched_rows", "written_back_rows")]
                + [sum(p.victims > 0 for p in planned.tables)]
            )
        fetched, written, evicting = np.mean(moved[16:], axis=0)
        work = StepWork.from_config(config, source, batches=8, start=16).with_counters(fetched, written, evicting)
        priced = plan_work(
            work, work.share(work.fetched_rows), work.share(work.written_back_rows, evicting_only=True), cpu=True
        )
        return float(np.median(taken[16:])) - priced.seconds(machine)

    return max((unpriced(26) - unpriced(2)) / 24, 0.0)


def handoff_call_seconds(bench: Bench, stream_bw: float) -> dict[str, float]:
    """What handing Plan(b) from the host process to Train costs on a CPU run (host_process.py):
    the plan as Train reads it (`what_train_reads`) packed into the ring and its skeleton sent
    down the pipe (the host process), then received and unpacked (the trainer's process), at 2
    and 8 tables of `plan_call_seconds`' shape. Each side's time less its copies' bytes (read and
    written once each, at `stream_bw`): the difference per table, and what 2 tables cost beyond
    twice that, per batch. CPU time, median. -> {"send_table", "send_batch", "receive_table",
    "receive_batch"} (host_calls, seconds)."""
    import multiprocessing

    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.scratchpipe.plan_ahead import PlanAhead
    from scratchkit.scratchpipe.events import Stage
    from scratchkit.scratchpipe.host_process import what_train_reads
    from scratchkit.scratchpipe.ring import PlanRing, widen_pipe

    rows, strip, context = 2**15, what_train_reads(False), multiprocessing.get_context("fork")

    def seconds(tables: int) -> tuple[float, float]:  # -> (send, receive) s a batch, less copies
        config = small_batch_config(
            tables, rows, rows, 4 * bench.repeats + 24, num_dense=13
        )  # 13 dense features, as Criteo has
        planner = PlanAhead.fresh(config, SyntheticSource(config.data))
        ring, (inbox, outbox) = PlanRing(context, 4 * planner.plan_bytes(0), slots=2), context.Pipe(duplex=False)
        widen_pipe(outbox)
        sent, received = [], []
        for b in range(4 * bench.repeats + 8):
            planned = strip(planner.plan(b))
            times = [(stage, b, 0.0, 0.0, 0.0) for stage in Stage]  # the stage times travel with it
            start = time.thread_time()
            message = ring.pack((planned, times))
            outbox.send(("result", b, message))
            middle = time.thread_time()
            ring.unpack(inbox.recv()[2])
            copy = 2 * sum(message[2]) / stream_bw  # each side's: into the ring or out of it, read + write
            sent.append(middle - start - copy)
            received.append(time.thread_time() - middle - copy)
        ring.close()
        return float(bench.statistic(sent[8:])), float(bench.statistic(received[8:]))

    (send_two, receive_two), (send_eight, receive_eight) = seconds(2), seconds(8)
    costs = {}
    for side, two, eight in (("send", send_two, send_eight), ("receive", receive_two, receive_eight)):
        costs[f"{side}_table"] = max((eight - two) / 6, 0.0)
        costs[f"{side}_batch"] = max(two - 2 * costs[f"{side}_table"], 0.0)
    return costs
