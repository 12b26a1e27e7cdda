"""The kit's calls, counted in the cost model's units (designs/work.py's `Work`).

Each function says what one call of the kit does, as its code does it, on the device
(`device=True`) or the host; each design's stages (its family's module) are sums of these. Sizes:
n lookups, u distinct rows, B bags, rows of `row_bytes`, tables of `table_bytes`.
"""

from __future__ import annotations

import math

from scratchkit.config import OptimizerKind
from scratchkit.embedding.working_sets import WorkingSets
from scratchkit.designs.work import CACHED_BYTES, FLOAT_BYTES, ID_BYTES, LINK_IN, LINK_OUT, Work, log2


def on(device: bool, **parts) -> Work:
    """A Work with `parts` (stream=, rows=, sorts=, sort_values=, calls=) on the device or the host."""
    side = "device" if device else "host"
    return Work(**{f"{side}_{k}": v for k, v in parts.items()})


def gather(device: bool, rows: float, row_bytes: float, table_bytes: float) -> Work:
    return on(device, rows=(("gather", rows, row_bytes, table_bytes),)) if rows else Work()


def scatter(device: bool, rows: float, row_bytes: float, table_bytes: float) -> Work:
    return on(device, rows=(("scatter", rows, row_bytes, table_bytes),)) if rows else Work()


def calls(device: bool, name: str, count: float = 1) -> Work:
    return on(device, calls=((name, count),)) if count else Work()


def stream(device: bool, nbytes: float) -> Work:
    return on(device, stream=nbytes)


# ---------------------------------------------------------------------------------- torch calls
def lookup(device: bool, n: float, u: float, bags: int, row_bytes: int, table_bytes: float) -> Work:
    """`pooled_lookup`: one embedding_bag of n lookups of u distinct rows: each distinct row
    fetched from the table, each repeat found in the core's cache (priced as a table of 256 KiB),
    ids read, bags written."""
    return (
        calls(device, "lookup")
        + on(device, rows=(("lookup", u, row_bytes, table_bytes), ("lookup", n - u, row_bytes, CACHED)))
        + stream(device, n * ID_BYTES + bags * (row_bytes + ID_BYTES))
    )


def backward(device: bool, n: float, bags: int, dim: int) -> Work:
    """`embedding_backward`: per-lookup gradients, then the coalesce: n keys sorted, n x dim
    floats moved and summed (the calibrated value rate holds the repeat and the sums)."""
    return calls(device, "backward") + on(device, sorts=(("torch", n, 1),), sort_values=n * dim)


def slots_of_unique(device: bool, n: float, u: float) -> Work:
    """searchsorted of n ids in u sorted ids (n x log2 u dependent probes, priced as the
    coalesce's sort of n keys going log2 u deep), then one write per lookup."""
    return (
        calls(device, "slots_of_unique")
        + on(device, sorts=(("torch", n, 1, log2(u)),))
        + scatter(device, n, ID_BYTES, u * ID_BYTES)
    )


# elementwise passes over u x dim floats beyond SGD's (in the calibrated update curve): Adagrad's
# accumulate, sqrt, divide and add about 11 more, row-wise Adagrad's about 6
EXTRA_UPDATE_PASSES = {OptimizerKind.SGD: 0, OptimizerKind.ADAGRAD: 11, OptimizerKind.ROWWISE_ADAGRAD: 6}
CACHED = CACHED_BYTES  # bytes: a table this small stays in a core's cache (the curves' smallest)


def update(device: bool, u: float, dim: int, state_width: int, optimizer: OptimizerKind, table_rows: float) -> Work:
    """`apply_update`: its torch ops, and `update_rows`."""
    return calls(device, f"update_{optimizer.value}") + update_rows(device, u, dim, state_width, optimizer, table_rows)


def update_rows(
    device: bool, u: float, dim: int, state_width: int, optimizer: OptimizerKind, table_rows: float
) -> Work:
    """u touched rows of a table of `table_rows` updated in place (the calibrated SGD update of a
    row), their optimizer state gathered and scattered likewise, Adagrad's extra elementwise passes."""
    row, state = dim * FLOAT_BYTES, state_width * FLOAT_BYTES
    work = on(device, rows=(("update", u, row, table_rows * row),)) + stream(
        device, EXTRA_UPDATE_PASSES[optimizer] * u * row
    )
    if state:
        work = work + gather(device, u, state, table_rows * state) + scatter(device, u, state, table_rows * state)
    return work


# ------------------------------------------------------------------ tbe.cu's kernels (on a GPU)
# Train on a GPU (embedding/device_tbe.py): for every table at once, one launch for the lookups, a
# sort of the lookups' keys, one launch for the backward fused with the update. Each is a "kernel"
# or an "op" of CALL_OPS: tests/test_costmodel_launches.py holds these counts to the launches a
# step makes, counted (device_work.py).
def device_lookups(tables, row_bytes: int, footprints, bags: int) -> Work:
    """`DeviceTBE.forward` (tbe_forward): one launch; per table its distinct rows from the table
    (`footprints[t]` bytes), its repeats from the core's cache, its ids read and its bags written,
    as `lookup` prices them."""
    work = calls(True, "kernel")
    for t, f in zip(tables, footprints):
        work += on(True, rows=(("lookup", t.unique, row_bytes, f), ("lookup", t.lookups - t.unique, row_bytes, CACHED)))
        work += stream(True, t.lookups * ID_BYTES + bags * (row_bytes + ID_BYTES))
    return work


def device_sort(n: float) -> Work:
    """`DeviceTBE.sort`: torch.sort(stable) of the batch's n lookup keys, one op."""
    return calls(True, "op") + on(True, sorts=(("torch", n, 1),))


def device_update(tables, dim: int, state_width: int, optimizer: OptimizerKind, table_rows, bags: int) -> Work:
    """`DeviceTBE.update` (tbe_backward_<optimizer>): one launch, the backward fused with the
    update, one pass over the gradient: the sorted keys and positions read once; each lookup's bag
    gradient (a row of the [bags, tables, dim] gradient, met in sorted-key order: a random row of
    it) read once and summed into its id's run; each table's distinct rows updated in place with
    their state (`update_rows`, `table_rows[t]` rows). No per-lookup gradient is written, sorted
    or summed apart, as a coalesce would."""
    n, row = sum(t.lookups for t in tables), dim * FLOAT_BYTES
    work = calls(True, "kernel") + stream(True, 2 * n * ID_BYTES) + gather(True, n, row, bags * len(tables) * row)
    for t, rows in zip(tables, table_rows):
        work += update_rows(True, t.unique, dim, state_width, optimizer, rows)
    return work


def rows_over_link(rows: float, row_bytes: float, *, written: bool = False, by_id: bool = True) -> Work:
    """`rows` rows a kernel reads from host memory (`written`: writes into it) over the link, row
    by row (zero-copy: scratchpipe-device's Collect and Write-back, a host-mapped table's
    lookups): `by_id`, in id order (sorted ids), as the fused update and a sorted miss list walk
    them, else in lookup order (work.py prices the two)."""
    return Work(pcie_rows=((rows, row_bytes, LINK_OUT if written else LINK_IN, by_id),)) if rows else Work()


def device_hit_count(tables) -> Work:
    """`DeviceTBE.count_hits` (tbe_count_hits): a zeroed counter (one op) and one launch reading
    each lookup's slot's id; read with the loss, so no copy of its own."""
    work = calls(True, "op") + calls(True, "kernel")
    for t in tables:
        work += gather(True, t.lookups, ID_BYTES, t.capacity * ID_BYTES)
    return work


# ------------------------------------------------------------------ table-batched calls (on a CPU)
def tbe(device: bool, *entries) -> Work:
    return on(device, tbe=tuple(entries))


def tbe_calls(device: bool, name: str, tables: int) -> Work:
    """A table-batched call's fixed cost: its own, and its marshalling of each table's pointers."""
    return calls(device, f"tbe_{name}") + calls(device, f"tbe_{name}_table", tables)


def lookup_tables(device: bool, tables, row_bytes: int, footprints, bags: int) -> Work:
    """`pooled_lookup_tables`: one C++ call for every table's `bags` bags; per table its distinct
    rows from the table (`footprints[t]` bytes), its repeats by how far back their row was last
    looked up (`TableWork.reuse`), a pooled row written per bag."""
    n = sum(t.lookups for t in tables)
    return tbe_calls(device, "forward", len(tables)) + tbe(
        device, *(("lookup", t.lookups, t.unique, row_bytes, f, n, t.reuse, bags) for t, f in zip(tables, footprints))
    )


def backward_tables(device: bool, tables, row_bytes: int, bags: int) -> Work:
    """`embedding_backward_tables`: one C++ call; per table its lookups sorted as torch sorts
    them and their gradients summed by id (addresses, for a cache, looked up in the same walk),
    each lookup's bag's gradient read from the [bags, tables, dim] gradient."""
    grad, n = bags * len(tables) * row_bytes, sum(t.lookups for t in tables)
    return tbe_calls(device, "backward", len(tables)) + tbe(
        device, *(("backward", t.lookups, t.unique, row_bytes, bags, grad, n) for t in tables)
    )


def update_tables(device: bool, tables, row_bytes: int, footprints) -> Work:
    """`apply_updates` with SGD: one C++ call updating each table's distinct rows in place."""
    u = sum(t.unique for t in tables)
    return tbe_calls(device, "sgd", len(tables)) + tbe(
        device, *(("sgd", t.unique, row_bytes, f, u) for t, f in zip(tables, footprints))
    )


def fused_sgd_tables(device: bool, tables, row_bytes: int, bags: int, footprints) -> tuple[Work, Work]:
    """The fused SGD path (fused_sgd.py), two C++ calls: `sort_lookups`, every table's lookups
    sorted as the backward sorts them (its backward stage), then `fused_sgd_update`, each id's
    gradients summed as the backward sums them and applied to its row in the same pass (its update
    stage). Each entry carries the unfused call's sizes too, for a machine that has no fused curves;
    the fixed costs are the unfused calls'. -> (backward stage, update stage)"""
    grad, n, u = bags * len(tables) * row_bytes, sum(t.lookups for t in tables), sum(t.unique for t in tables)
    backward = lambda t: (t.lookups, t.unique, row_bytes, bags, grad, n)
    sort = tbe_calls(device, "backward", len(tables)) + tbe(device, *(("sort", *backward(t)) for t in tables))
    fused = tbe_calls(device, "sgd", len(tables)) + tbe(
        device, *(("fused", *backward(t), t.unique, row_bytes, f, u) for t, f in zip(tables, footprints))
    )
    return sort, fused


PLAN_LOOKUPS = (64, 2048)  # lookups a table ScratchPipe's planner's per-table cost is timed at


def plan_tables(lookups, call: str = "plan_table", weight: float = 1.0) -> Work:
    """`PlanAhead.plan`'s cost per table beyond its rates, for tables of `lookups` a batch each:
    timed at 64 lookups a table ("plan_table_few") and at 2,048 ("plan_table"), interpolated in
    log lookups between them, held beyond (its per-id part grows with the lookups). `call`
    "plan_victims": the victim choice's, per table that evicts (timed alike, "plan_victims_few"),
    each `weight` times (the share of batches a table evicts in)."""
    few, many = PLAN_LOOKUPS
    shares = [min(max(math.log(max(n, 1.0) / few) / math.log(many / few), 0.0), 1.0) for n in lookups]
    return calls(False, call, weight * sum(shares)) + calls(False, f"{call}_few", weight * (len(shares) - sum(shares)))


def index_rows(device: bool, rows: float, row_bytes: float, from_rows: float, to_rows: float) -> Work:
    """Rows copied between two tables by index: index_select from one, index_copy_ into the other
    (a cache fill or eviction, a write-back), two torch ops."""
    return (
        calls(device, "op", 2)
        + gather(device, rows, row_bytes, from_rows * row_bytes)
        + scatter(device, rows, row_bytes, to_rows * row_bytes)
    )


def dense_matmuls(w) -> tuple[tuple, tuple]:
    """The dense step's matmuls: ((FLOPs per call, calls), ...) of the MLPs (forward, and backward
    for the input and the weights; the dense features need no gradient) and the interaction's
    ((FLOPs per matrix, matrices),): one bmm forward, two backward."""
    B, vectors = w.batch_size, w.num_tables + 1
    mm = []
    for k, widths in enumerate((w.bottom, w.top)):
        for layer, (i, o) in enumerate(zip(widths[:-1], widths[1:])):
            mm.append((2.0 * B * i * o, 2 if k == 0 and layer == 0 else 3))
    return tuple(mm), ((2.0 * vectors * vectors * w.dim, 3 * B),)


def dense_activations(w) -> float:
    """Floats the dense step's elementwise work moves: each Linear output about 8 times (forward,
    ReLU, their gradients, the bias gradient), the interaction's vectors, dot products and pairs
    about 4 times, the parameters 3 times (gradient, update)."""
    B, T, d = w.batch_size, w.num_tables, w.dim
    vectors, pairs = T + 1, T * (T + 1) // 2
    outputs = sum(w.bottom[1:]) + sum(w.top[1:])
    params = sum(i * o + o for widths in (w.bottom, w.top) for i, o in zip(widths[:-1], widths[1:]))
    return 8.0 * B * outputs + 4.0 * B * (vectors * d + vectors * vectors + d + pairs) + 3.0 * params


def dense_step(w) -> Work:
    """`Trainer.dense_step` on the device: the MLPs, the interaction, the loss and their backward,
    the dense optimizer: its fixed costs (a base and one per Linear), its matmuls by their shapes,
    its elementwise work, and the pairs' backward (one float scattered per pair)."""
    B, vectors = w.batch_size, w.num_tables + 1
    pairs = w.num_tables * vectors // 2
    layers = len(w.bottom) + len(w.top) - 2
    mm, bmm = dense_matmuls(w)
    return (
        calls(True, "dense_base")
        + calls(True, "dense_layer", layers)
        + scatter(True, B * pairs, FLOAT_BYTES, B * vectors * vectors * FLOAT_BYTES)
        + Work(device_mm=mm, device_bmm=bmm, device_activations=dense_activations(w))
    )


# ---------------------------------------------------------------------------------- NumPy calls
def numpy_calls(count: float) -> Work:
    return calls(False, "numpy", count)


def unique(n: float) -> Work:
    """np.unique(ids, return_inverse=True, return_counts=True): an argsort of n ids, then a few
    passes over them (about 6 arrays of n int64 written or read)."""
    return calls(False, "unique") + on(False, sorts=(("numpy", n, 1),), stream=6 * n * ID_BYTES)


def bitmap_working_set(device: bool, n: float, u: float, rows: float, counts: bool = False) -> Work:
    """WorkingSets' bitmap (embedding/working_sets.py) for n lookups of u distinct ids of a table
    of `rows`: n marks, a pass over the bitmap to read it and u marks cleared, u positions
    written and n read back; `counts`: a bincount of the n positions into u counters."""
    work = (
        scatter(device, n, 1, rows)
        + stream(device, 2 * rows)
        + scatter(device, u, ID_BYTES, rows * ID_BYTES)
        + gather(device, n, ID_BYTES, rows * ID_BYTES)
    )
    return work + scatter(device, n, ID_BYTES, u * ID_BYTES) if counts else work


BITMAP_CALLS = 6  # NumPy calls of the bitmap's path: mark, flatnonzero, clear, arange, positions, inverse


def working_set(n: float, u: float, rows: float, counts: bool = False) -> Work:
    """`WorkingSets(rows)(ids, counts)` on the host: the bitmap where the table is small next to
    the batch, else np.unique's sort."""
    if rows <= WorkingSets.BITMAP_ROWS_PER_LOOKUP * n:
        return numpy_calls(BITMAP_CALLS + counts) + bitmap_working_set(False, n, u, rows, counts)
    return unique(n)


def select(n: float, count: float = 1) -> Work:
    """np.partition of n int64 keys at the k-th (`embedding/victims.py`'s first_k): introselect,
    about linear in n (priced by the calibrated `host_numpy_select` rate, keys/s at n)."""
    return numpy_calls(count) + on(False, sorts=(("select", n, count),))


def from_numpy(count: float) -> Work:
    """torch.from_numpy (or a move to a CPU "device"): it wraps an array, about a NumPy call."""
    return numpy_calls(count)


def map_lookup(u: float, table_rows: float) -> Work:
    """u ids looked up in a dense id -> slot array of the table's rows (one 8 B read each)."""
    return numpy_calls(1) + gather(False, u, ID_BYTES, table_rows * ID_BYTES)


def map_write(u: float, slots: float) -> Work:
    """u entries written into an array of `slots` int64 (a map, a clock, a dirty bit)."""
    return numpy_calls(1) + scatter(False, u, ID_BYTES, slots * ID_BYTES)


def scan(elements: float, passes: int = 1) -> Work:
    """NumPy passes over an array of `elements` int64 (flatnonzero, a comparison, zeros)."""
    return numpy_calls(passes) + stream(False, passes * elements * ID_BYTES)
