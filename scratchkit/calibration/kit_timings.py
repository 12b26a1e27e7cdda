"""The torch measurements `calibrate` makes, on whichever device runs them: the host's CPU, or a
GPU through `scratchkit.device.Device` (tests run the GPU lines through a stand-in CUDA runtime).

A `Bench` says how to put a tensor where it is measured and how to wait for it; on a CPU the
clock is the thread's CPU time (what this machine can do, not what its neighbours leave of it), on
a GPU the wall clock between two synchronisations. Every function times the kit's own calls at the
sizes the trainers run them and returns what `Hardware` stores.

A call timed a hundred times in a row runs from warm caches, with the same rows each time; inside
a training step it does not: the batch is new, and the stages before it (making the batch, the
MLP) have streamed megabytes through the core's private caches. Measured in a loop, a lookup of
`small` took a third of its time in a step. So each timed run here gets fresh random indices and
follows a flush (4 MiB streamed: more than the private L1 + L2 of current server cores, a small
part of their shared last-level cache), a call's fixed cost is timed over 8 tables' inputs in turn
(as the trainers loop over tables), and each figure is the median of its runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from scratchkit.costmodel.hardware import MB, RateCurve, RowCurve
from scratchkit.designs.work import sort_units

# sizes measured: (quick, full)
ROW_BYTES = ((64, 256), (64, 256, 512))
FOOTPRINTS = ((2**18, 2**22, 2**26), (2**18, 2**20, 2**22, 2**25, 2**28))
SORT_SIZES = ((2048, 32768), (512, 2048, 8192, 32768, 131072))
MM_SHAPES = (
    ((256, 64, 64), (2048, 128, 128)),
    (
        (256, 64, 16),
        (256, 64, 64),
        (1024, 128, 64),
        (2048, 128, 128),
        (4096, 128, 128),
        (4096, 416, 128),
        (512, 16, 64),
    ),
)
# quick: the shapes of the profiles `bench --validate` holds the model to (small, criteo-like,
# embedding-bound): between two points by FLOPs a matrix, criteo-like's (27, 16) was priced 1.3x slow
BMM_SHAPES = (((9, 16), (27, 16), (27, 64)), ((9, 16), (9, 64), (9, 128), (27, 16), (27, 64)))
CALL_ROWS = ((512, 8192), (256, 2048, 16384))  # rows moved by one call
ROWS_PER_RUN = 2**14  # rows moved by one timed run
MAX_CALLS = 64  # calls of one timed run, at most

FLUSH_BYTES = 4 * MB
TABLES = 8  # inputs a call's fixed cost is timed over, in turn


@dataclass
class Bench:
    """Where and how to time: `to_device` moves a host tensor to the measured device, `sync`
    waits for its work, `clock` reads the time. `repeats`: timed runs per figure (the median)."""

    repeats: int = 7
    to_device: Callable[[torch.Tensor], torch.Tensor] = lambda t: t
    sync: Callable[[], None] = lambda: None
    clock: Callable[[], float] = time.thread_time
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    _junk: np.ndarray = field(default_factory=lambda: np.ones(FLUSH_BYTES // 8), repr=False)
    statistic = staticmethod(np.median)  # of the timed runs (the median: robust to a noisy neighbour)

    def flush(self) -> None:
        """Stream 4 MiB through the core, as a step's other stages do between two calls."""
        self._junk += 1.0

    def median(self, run: Callable[[int], object], prepare: Callable[[int], object] | None = None) -> float:
        """The median time of `run(k)` over k = 0 .. repeats-1 (each may use fresh inputs k),
        each after a flush (and `prepare(k)`, untimed); one untimed run first."""
        run(0)
        self.sync()
        times = []
        for k in range(self.repeats):
            self.flush()
            if prepare is not None:
                prepare(k)
            self.sync()
            start = self.clock()
            run(k)
            self.sync()
            times.append(self.clock() - start)
        return max(float(self.statistic(times)), 1e-9)

    def per_call(self, call: Callable[[int], object], tables: int = TABLES) -> float:
        """Seconds per call of `call(t)`, a call on table t's inputs, over `tables` tables in turn."""
        return self.median(lambda _: [call(t) for t in range(tables)]) / tables

    def randint(self, high: int, n: int) -> torch.Tensor:
        return self.to_device(torch.from_numpy(self.rng.integers(0, high, n)))

    def fresh(self, high: int, n: int) -> list:
        """One random index [n] in [0, high) per timed run (a tensor on the device; `numpy`: an array)."""
        return [self.randint(high, n) for _ in range(self.repeats)]

    def fresh_numpy(self, high: int, n: int) -> list[np.ndarray]:
        return [self.rng.integers(0, high, n) for _ in range(self.repeats)]


def row_curves(bench: Bench, quick: bool) -> tuple[list, list, list, list]:
    """Seconds per row gathered (index_select), scattered (index_copy_), looked up into bags of 8
    (the kit's pooled_lookup) and updated by SGD (the kit's apply_update of distinct rows just
    read, as a step's update follows its lookups), as points (row bytes, table bytes, rows per
    call, seconds per row), each call's fixed cost (its time on 2 rows) taken out. Tables are
    views of one buffer."""
    from scratchkit.config import OptimizerConfig
    from scratchkit.embedding.optim import apply_update, pooled_lookup

    footprints = FOOTPRINTS[not quick]
    buffer = bench.to_device(torch.ones(footprints[-1] // 4))
    gathers, scatters, lookups, updates = [], [], [], []
    sgd = OptimizerConfig()
    rows_out = lambda n, width: bench.to_device(torch.empty(n, width))
    for row in ROW_BYTES[not quick]:
        for footprint in footprints:
            tables = [
                buffer[r * footprint // 4 : (r + 1) * footprint // 4].view(-1, row // 4)
                for r in range(buffer.numel() * 4 // footprint)
            ]
            fresh = lambda n: bench.randint(tables[0].shape[0], n)
            out = lambda n: rows_out(n, row // 4)
            bags = lambda n: bench.to_device(torch.arange(0, n, 8))
            gathers += row_points(
                bench,
                quick,
                row,
                footprint,
                len(tables),
                out,
                fresh,
                lambda r, index, o: torch.index_select(tables[r], 0, index, out=o),
            )
            scatters += row_points(
                bench,
                quick,
                row,
                footprint,
                len(tables),
                out,
                fresh,
                lambda r, index, o: tables[r].index_copy_(0, index, o),
            )
            lookups += row_points(
                bench,
                quick,
                row,
                footprint,
                len(tables),
                bags,
                fresh,
                lambda r, index, offsets: pooled_lookup(tables[r], index, offsets),
            )
            distinct = lambda n: torch.unique(fresh(n))  # coalesced rows: sorted, distinct
            updates += row_points(
                bench,
                quick,
                row,
                footprint,
                len(tables),
                out,
                distinct,
                lambda r, index, grads: apply_update(tables[r], None, index, grads[: len(index)], sgd),
                warm=lambda r, index: torch.index_select(tables[r], 0, index),
            )
    return gathers, scatters, lookups, updates


def row_points(
    bench: Bench, quick: bool, row: int, footprint: int, regions: int, make_out, fresh, move, warm=None
) -> list:
    """(row, footprint, n, seconds per row) at each call size n. A timed run makes calls of n
    rows, `move(table, index, out)`, on as many different tables (up to `regions`) as it takes
    to move ~16k rows (64 calls at most), as a stage loops over its tables; indices are fresh
    for each call. `warm(table, index)`: done to each call's rows after the flush, untimed (the
    rows an update writes were just read by the step's lookups)."""

    def seconds(n: int) -> float:
        calls = max(1, min(regions, ROWS_PER_RUN // n, MAX_CALLS))
        index = [[fresh(n) for _ in range(calls)] for _ in range(bench.repeats)]
        out = make_out(n)
        prepare = None if warm is None else (lambda k: [warm(r, index[k][r]) for r in range(calls)])
        return bench.median(lambda k: [move(r, index[k][r], out) for r in range(calls)], prepare) / calls

    fixed = seconds(2)
    return [(row, footprint, n, max(seconds(n) - fixed, 1e-3 * fixed) / n) for n in CALL_ROWS[not quick]]


def call_latencies(bench: Bench, device=None, steps: int = 15) -> dict[str, float]:
    """The fixed cost of each torch call of the kit (hardware.CALL_OPS): those a trainer makes
    per table and per step from tiny training runs (fixed_costs.py); a generic op and
    slots_of_unique on tiny inputs, over 8 tables' inputs in turn after a flush."""
    from scratchkit.embedding.optim import slots_of_unique
    from scratchkit.calibration.fixed_costs import step_fixed_costs

    d = bench.to_device
    ids = [d(torch.tensor([1, 2, 2, 3]) + t) for t in range(TABLES)]
    rows, index = [d(torch.randn(16, 16)) for _ in range(TABLES)], d(torch.tensor([1, 2, 3]))
    return {
        "slots_of_unique": bench.per_call(lambda t: slots_of_unique(index + t, ids[t], ids[t])),
        "op": bench.per_call(lambda t: rows[t].index_select(0, index)),
        **step_fixed_costs(steps, bench.statistic, device, clock=bench.clock),
    }


def coalesce_rates(bench: Bench, quick: bool) -> tuple[RateCurve, float]:
    """The kit's embedding_backward at n lookups (bags of 8), dims 16 and 64, over 8 tables'
    inputs in turn. The extra time of the wider rows gives floats/s; what is left after the
    call's time on 2 lookups (timed the same way) and the floats is the sort, in n log2 n per
    second at each n."""
    from scratchkit.embedding.optim import embedding_backward

    def seconds(n: int, dim: int) -> float:
        tables = max(1, min(TABLES, 2**16 // n))  # a table's ids each, as in a step
        ids = [bench.randint(4 * n, n) for _ in range(tables)]
        offsets = bench.to_device(torch.arange(0, n, 8))
        grad = bench.to_device(torch.randn(len(offsets), dim))
        return bench.per_call(lambda t: embedding_backward(ids[t], offsets, grad, 4 * n), tables)

    sizes = SORT_SIZES[not quick]
    fixed = seconds(2, 16)
    times = {(n, dim): seconds(n, dim) for n in sizes for dim in (16, 64)}
    slopes = [(48 * n) / max(times[n, 64] - times[n, 16], 1e-9) for n in sizes]
    value_rate = float(np.median(slopes))  # floats per second
    points = []
    for n in sizes:
        sort = max(times[n, 16] - fixed - 16 * n / value_rate, 0.1 * times[n, 16])
        points.append((n, sort_units(n) / sort))
    return RateCurve(tuple(points)), value_rate


def matmul_rates(bench: Bench, quick: bool, op: float) -> tuple[RateCurve, RateCurve]:
    """torch.mm at the MLPs' shapes (FLOP/s by FLOPs per call) and the interaction's bmm of 1024
    small (T+1) x dim matrices (FLOP/s by FLOPs per matrix), each op's fixed cost taken out."""
    mm = []
    for b, i, o in MM_SHAPES[not quick]:
        x, w = bench.to_device(torch.randn(b, i)), bench.to_device(torch.randn(i, o))
        flops = 2 * b * i * o
        t = bench.median(lambda _: torch.mm(x, w))
        mm.append((flops, flops / max(t - op, 0.5 * t)))
    bmm = []
    for vectors, dim in BMM_SHAPES[not quick]:
        v = bench.to_device(torch.randn(1024, vectors, dim))
        flops = 2 * vectors * vectors * dim
        t = bench.median(lambda _: torch.bmm(v, v.transpose(1, 2)))
        bmm.append((flops, 1024 * flops / max(t - op, 0.5 * t)))
    return RateCurve(tuple(mm)), RateCurve(tuple(bmm))


# the profiles' dense steps (batch, tables, dim, width, table rows, pooling): tiny, small,
# criteo-like, embedding-bound, -wide, criteo-skew. tiny's is nearly all fixed costs, which run
# slower inside a step than in the loop `call_latencies` times them in: without its own point the
# rate at small's held for it, and tiny's MLP came out well under its measured time in every
# trainer. Its lookups stay in the caches (3 tables of a few hundred rows), so its point's do
# too: behind 16k-row tables the same dense step runs slower than behind tiny's
TINY_SHAPE = (32, 3, 8, 16, 512, 2)
# (quick: those of the profiles `bench --validate` holds the model to, as BMM_SHAPES)
DENSE_SHAPES = (
    (TINY_SHAPE, (256, 8, 16, 64, 2**14, 8), (512, 26, 16, 64, 2**14, 8), (2048, 8, 64, 128, 2**14, 8)),
    (
        TINY_SHAPE,
        (256, 8, 16, 64, 2**14, 8),
        (512, 26, 16, 64, 2**14, 8),
        (2048, 8, 64, 128, 2**14, 8),
        (4096, 8, 128, 128, 2**14, 8),
        (4096, 26, 64, 128, 2**14, 8),
    ),
)
# timed steps, and warm-up steps by batch: the first steps of a ~1 ms dense step run slower than
# its steady state, so a small batch warms up longer; a big batch's first steps are few
DENSE_STEPS, DENSE_WARMUP = lambda repeats: 2 * repeats + 1, lambda batch: 20 if batch <= 512 else 3


def activation_rate(
    bench: Bench, quick: bool, calls: dict, mm: RateCurve, bmm: RateCurve, scatter: RowCurve, device=None
) -> RateCurve:
    """Floats per second of the dense step's elementwise work (kit.dense_activations), by the
    floats of a step, from the kit's dense step at the MLPs' shapes (batch, tables, dim, width):
    what its fixed costs, its matmuls and the pairs' scatter leave of each step's time.

    The dense step is timed where it runs, inside `gpu-only`'s training steps (its `mlp` stage,
    the median of DENSE_STEPS (15 at 7 repeats) after DENSE_WARMUP; `device`: where they run; timed
    by the Bench's clock, as every other constant), after an embedding
    lookup of the shape's tables (16k rows but tiny's) has streamed its rows through the caches.
    Timed alone in a loop, the same step ran 1.2x faster on `small` and its first runs (the
    allocator's first pages) 1.3x slower: fitted to those, the model missed a step's MLP by -30%
    on `small` and +50% on `embedding-bound`."""
    from scratchkit.config import DataConfig, ModelConfig, TrainConfig
    from scratchkit.designs import kit
    from scratchkit.calibration.fixed_costs import stage_times
    from scratchkit.designs.step import StepWork

    points = []
    for batch, tables, dim, width, rows, pooling in DENSE_SHAPES[not quick]:
        config = TrainConfig(
            data=DataConfig(table_sizes=(rows,) * tables, pooling=pooling, batch_size=batch, num_dense=13),
            model=ModelConfig(dim=dim, bottom_mlp=(width, dim), top_mlp=(width, 1)),
        )
        w = StepWork.from_config(config, batches=1)
        step = stage_times(
            config, DENSE_STEPS(bench.repeats), bench.statistic, device, warmup=DENSE_WARMUP(batch), clock=bench.clock
        )["mlp"]
        matmuls, batched = kit.dense_matmuls(w)
        vectors = tables + 1
        known = (
            calls["dense_base"]
            + (len(w.bottom) + len(w.top) - 2) * calls["dense_layer"]
            + sum(n * f / mm.at(f) for f, n in matmuls)
            + sum(n * f / bmm.at(f) for f, n in batched)
            + scatter.seconds(batch * tables * vectors // 2, 4, batch * vectors * vectors * 4)
        )
        floats = kit.dense_activations(w)
        points.append((floats, floats / max(step - known, 0.05 * step)))
    return RateCurve(tuple(points))


def stream_bandwidth(bench: Bench) -> float:
    """A copy of 64 MiB on the measured device (read + write bytes)."""
    src = bench.to_device(torch.ones(16 * MB))
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / bench.median(lambda _: dst.copy_(src))


def link_rates(bench: Bench, dev, quick: bool) -> tuple[float, float, float]:
    """Host <-> device through `dev` (a scratchkit.device.Device): (host->device bytes/s from
    pinned memory, device->host bytes/s, seconds per small copy)."""
    size = (16 if quick else 64) * MB
    pinned = dev.pin(torch.ones(size // 4))
    on_device = dev.to_device(pinned, non_blocking=True)
    bench.sync()
    up = size / bench.median(lambda _: dev.to_device(pinned, non_blocking=True))
    down = size / bench.median(lambda _: dev.to_host(on_device))
    tiny = dev.pin(torch.ones(2))
    latency = bench.per_call(lambda _: dev.to_device(tiny, non_blocking=True))
    return up, down, latency
