"""The work of each stage of each trainer in one step, as its code runs (kit.py's calls, added up).
A trainer is priced as its registry entry says (`priced_as`, trainers/registry.py): one of the
kit's own trainers below.

The stage names are the trainers' own (`StepRecord.stage_seconds`). Where a stage runs:

- gpu-only: tables on the device; the ids cross (transfer).
- hybrid: the embedding stages on the host (`Work.on_host`), pooled vectors and gradients cross.
- static, lru, lfu (trainers/cached.py): `fetch` is the map lookup of the working set (WorkingSets:
  a bitmap or np.unique; the id -> slot array) and the demand fill (for a full cache first the
  victims' choice: a selection among the cached rows the batch does not use; then the misses read
  by the device's row kernels from the host tables mapped into the device, over the link, and
  scattered into their slots: `device_move_rows`, as scratchpipe-device's Collect and Insert);
  `write_back` the dirty victims' rows gathered from their slots and written over the link into
  the host tables by the same kernels; then the batch trains on the cache's rows by slot.
- prefetch-lru: the same fetch for the next batch, named `prefetch` / `prefetch_write_back`.
- scratchpipe: Plan (the planner's per-lookup and per-id work, plus its per-table calls),
  Collect (host rows gathered, pinned on a GPU), Write-back, Transfer, Insert (one scatter per
  table into the scratchpad), Train (what gpu-only's stages do, on the scratchpad's rows by slot,
  with the check that every lookup hits).

A row of a cache or scratchpad moves with its optimizer state (`moved_row_bytes`); the rows
fetched and written back in a step are the measured counters, split over the tables by their
distinct ids (`StepWork.share`).
"""

from __future__ import annotations

from scratchkit.config import OptimizerKind
from scratchkit.costmodel import kit
from scratchkit.costmodel.device_stages import device_scratchpipe_stages
from scratchkit.costmodel.work import FLOAT_BYTES, ID_BYTES, Work
from scratchkit.costmodel.step import StepWork
from scratchkit.trainers import TrainerKind, priced_as


def _total(parts) -> Work:
    total = Work()
    for part in parts:
        total = total + part
    return total


def train_stages(
    w: StepWork, *, footprint: str, by_slot: bool, batched: bool = False, kernels: bool = False
) -> dict[str, Work]:
    """Forward, MLP, backward and update with every row in device memory: in tables of their own
    (`footprint="table"`) or in a cache or scratchpad of `capacity` rows (`"capacity"`).
    `batched`: the device is a CPU with the C++ loops, so the trainers make one table-batched
    call per stage for all tables (table_batched.py; Adagrad's update stays optim.py's, per table).
    `kernels`: the device is a GPU, where Train runs tbe.cu's kernels for every table at once
    (embedding/device_tbe.py), the dense features and labels crossing in one copy."""
    B, rb, d = w.batch_size, w.row_bytes, w.dim
    rows = lambda t: t.rows if footprint == "table" else t.capacity
    mlp = kit.dense_step(w) + Work(pcie=B * (w.num_dense + 1) * FLOAT_BYTES, pcie_copies=1 if kernels else 2)
    if kernels:
        return {
            "embedding_forward": kit.device_lookups(w.tables, rb, [rows(t) * rb for t in w.tables], B),
            "mlp": mlp,
            "embedding_backward": kit.device_sort(w.lookups),
            "update": kit.device_update(w.tables, d, w.state_width, w.optimizer, [rows(t) for t in w.tables]),
        }
    per_table_update = _total(
        kit.update(True, t.unique, d, w.state_width, w.optimizer, rows(t)) for t in w.tables
    ) + kit.calls(True, "update_stage")
    if batched:
        footprints = [rows(t) * rb for t in w.tables]
        update = (
            kit.update_tables(True, w.tables, rb, footprints) if w.optimizer is OptimizerKind.SGD else per_table_update
        )
        return {
            "embedding_forward": kit.lookup_tables(True, w.tables, rb, footprints, B),
            "mlp": mlp,
            "embedding_backward": kit.backward_tables(True, w.tables, rb, B),
            "update": update,
        }
    forward = _total(kit.lookup(True, t.lookups, t.unique, B, rb, rows(t) * rb) for t in w.tables)
    forward += kit.calls(True, "forward_stage") + kit.stream(True, 2 * B * w.num_tables * rb)  # the stack
    backward = _total(kit.backward(True, t.lookups, B, d) for t in w.tables) + kit.calls(True, "backward_stage")
    if by_slot:  # the coalesced ids' slots: searchsorted in the working set
        backward += _total(kit.slots_of_unique(True, t.lookups, t.unique) for t in w.tables)
    return {"embedding_forward": forward, "mlp": mlp, "embedding_backward": backward, "update": per_table_update}


def id_transfer(w: StepWork, arrays: int, kernels: bool = False) -> Work:
    """Each table's ids (and slots: `arrays`=2) and offsets to the device: a copy each, or with
    `kernels` (a GPU: embedding/device_tbe.py) every table's packed into one."""
    return Work(
        pcie=arrays * w.lookups * ID_BYTES + w.batch_size * w.num_tables * ID_BYTES,
        pcie_copies=1 if kernels else (arrays + 1) * w.num_tables,
    )


def device_move_rows(w: StepWork, rows: float, from_rows: float, to_rows: float, *, cpu: bool) -> Work:
    """Rows with their state between a host table mapped into the device and device slots, moved
    by the device's row kernels (embedding/device_cache.py): per width a `gather_rows` from where
    they are and a `scatter_rows` to where they go, both device work, the rows crossing the link
    as the kernel reads (a fill) or writes (a write-back) them; on a GPU the ids and the slots go
    to the device first. `cpu`: the device is the host's CPU, where each kernel is a NumPy call."""
    if not rows:
        return Work()
    work = Work(pcie=rows * w.moved_row_bytes)
    if not cpu:
        work += Work(pcie=2 * rows * ID_BYTES, pcie_copies=2)
    for width in (w.dim, w.state_width):
        if width:
            rb = width * FLOAT_BYTES
            work += (
                (kit.numpy_calls(2) if cpu else kit.calls(True, "kernel", 2))
                + kit.gather(True, rows, rb, from_rows * rb)
                + kit.scatter(True, rows, rb, to_rows * rb)
            )
    return work


def cache_fetch(w: StepWork, trainer: str, cpu: bool = False) -> Work:
    """A demand cache's fetch stage for one batch (trainers/cached.py: serve, admit, fill, touch).
    `cpu`: the device is the host's CPU."""
    fetched, victims = w.share(w.fetched_rows), w.share(w.written_back_rows, evicting_only=True)
    f = w.victim_share  # the victim choice runs in this share of the tables' steps
    work = Work()
    for t, m, v in zip(w.tables, fetched, victims):
        C = t.capacity
        work += (
            kit.working_set(t.lookups, t.unique, t.rows, counts=True)
            + kit.map_lookup(t.unique, t.rows)
            + kit.scan(t.unique, 3)
            + kit.scan(C, 2)
        )  # misses; free slots
        if trainer == "static":  # misses into transient slots past the cache
            work += device_move_rows(w, m, t.rows, C + m, cpu=cpu)
            continue
        if v:  # a full cache: of the cached rows the batch does not use, the
            candidates = max(C - t.unique, 1)  # first by recency (lfu: by count, then recency)
            keys = 2 if trainer == "lfu" else 1
            chosen = v / max(f, 1e-9)  # victims in a step that chooses (first_k: split, then sorted)
            work += (
                kit.scan(f * C, 3)
                + kit.map_write(f * t.unique, C)
                + kit.gather(False, f * candidates, ID_BYTES, C * ID_BYTES)  # the first key
                + kit.select(candidates, f * keys)
                + kit.scan(candidates, 4 * f)  # <, ==, taken
                + kit.gather(False, f * keys * chosen, ID_BYTES, C * ID_BYTES)
                + Work(host_sorts=(("numpy", chosen, f * keys),))
                + kit.numpy_calls(3 * f)
            )
        # the fill, the map (slot_of_id, id_of_slot, dirty, the batch's slots), the clock
        work += (
            device_move_rows(w, m, t.rows, C, cpu=cpu)
            + kit.map_write(m, t.rows)
            + kit.map_write(m, C)
            + kit.map_write(m, C)
            + kit.map_write(m, t.unique)
            + kit.scan(t.unique, 2)
            + kit.map_write(t.unique, C)
        )
        if trainer == "lfu":
            work += kit.gather(False, t.unique, ID_BYTES, C * ID_BYTES) + kit.map_write(t.unique, C)
    return work


def cache_write_back(w: StepWork, trainer: str, cpu: bool = False) -> Work:
    """Victims' rows home before their slots are reused (static: the step's transient rows), by
    the device's kernels over the link. `cpu`: the device is the host's CPU."""
    work = Work()
    for t, v in zip(w.tables, w.share(w.written_back_rows, evicting_only=trainer != "static")):
        if not v:
            continue
        work += device_move_rows(w, v, t.capacity, t.rows, cpu=cpu)
        if trainer != "static":  # the map: the victims' ids forgotten, slots freed
            work += (
                kit.gather(False, v, 1, t.capacity)
                + kit.gather(False, v, ID_BYTES, t.capacity * ID_BYTES)
                + kit.map_write(v, t.rows)
                + kit.map_write(v, t.capacity)
                + kit.map_write(v, t.capacity)
            )
    return work


def scratchpipe_stages(w: StepWork, batched: bool = False, kernels: bool = False) -> dict[str, Work]:
    """Plan, Collect, Write-back, Transfer, Insert and Train of one batch (`kernels`: on a GPU,
    Train runs tbe.cu's kernels, its ids, offsets and slots in one copy)."""
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
    train = _total(train_stages(w, footprint="capacity", by_slot=False, batched=batched, kernels=kernels).values())
    train += _total(
        kit.map_lookup(t.unique, t.capacity)
        + kit.scan(t.unique, 2)  # every lookup hits
        + kit.map_write(t.unique, t.capacity)
        + kit.map_write(t.unique, t.capacity)
        + kit.from_numpy(4)
        for t in w.tables
    )  # slots, ids, offsets
    transfer = Work(pcie=w.fetched_rows * mb, pcie_copies=2 * w.num_tables) + id_transfer(w, arrays=2, kernels=kernels)
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


def stage_work(trainer: str, w: StepWork, hw=None) -> dict[str, Work]:
    """The work of each stage of `trainer` in one step (stage names as its StepRecords use),
    its rows priced as in a step that touches the working set (`Work.in_step`). `hw`: the
    Hardware it will be priced on; where its host has the table-batched C++ loops
    (`batched_host`), the embedding stages that run on that CPU are counted as they run there:
    hybrid's always, the others' where the device is the host (None: per-table torch ops)."""
    host = hw is not None and hw.batched_host
    device_is_host = hw is not None and hw.device_is_host
    kernels = hw is not None and not hw.device_is_host  # a GPU: Train runs tbe.cu's kernels
    parts = _stage_work(priced_as(trainer), w, host, host and device_is_host, device_is_host, kernels)
    return {name: work.in_step(w.unique_rows) for name, work in parts.items()}


def _stage_work(
    kind: TrainerKind, w: StepWork, host_batched: bool, device_batched: bool, device_is_host: bool, kernels: bool
) -> dict[str, Work]:
    """The stages of a trainer priced as `kind` (its registry entry's `priced_as`)."""
    trainer = kind.value
    if kind is TrainerKind.GPU_ONLY:
        return {
            "transfer": id_transfer(w, arrays=1, kernels=kernels),
            **train_stages(w, footprint="table", by_slot=False, batched=device_batched, kernels=kernels),
        }
    if kind is TrainerKind.HYBRID:
        device = train_stages(w, footprint="table", by_slot=False, batched=host_batched)
        pooled = w.batch_size * w.num_tables * w.row_bytes
        return {
            "embedding_forward": device["embedding_forward"].on_host(),
            "transfer": Work(pcie=2 * pooled, pcie_copies=2),  # pooled up, their gradients down
            "mlp": device["mlp"],
            "embedding_backward": device["embedding_backward"].on_host(),
            "update": device["update"].on_host(),
        }
    if kind in (TrainerKind.STATIC, TrainerKind.LRU, TrainerKind.LFU, TrainerKind.PREFETCH_LRU):
        by_slot = not kernels  # tbe.cu reads each lookup's slot: no searchsorted of the distinct ids
        train = train_stages(w, footprint="capacity", by_slot=by_slot, batched=device_batched, kernels=kernels)
        train["update"] += _total(kit.map_write(t.unique, t.capacity) for t in w.tables)  # dirty bits
        names = ("prefetch", "prefetch_write_back") if kind is TrainerKind.PREFETCH_LRU else ("fetch", "write_back")
        return {
            names[0]: cache_fetch(w, trainer, device_is_host),
            names[1]: cache_write_back(w, trainer, device_is_host),
            "transfer": id_transfer(w, arrays=2, kernels=kernels) + kit.calls(False, "op", w.num_tables),
            **train,
        }
    if kind is TrainerKind.SCRATCHPIPE:
        return scratchpipe_stages(w, device_batched, kernels)
    if kind is TrainerKind.SCRATCHPIPE_DEVICE:  # Train as scratchpipe's, its check on the device (device_stages.py)
        if device_is_host:  # where the device is the CPU, the very same Train (rows.py)
            return device_scratchpipe_stages(w, scratchpipe_stages(w, device_batched)["train"], cpu=True)
        train = _total(train_stages(w, footprint="capacity", by_slot=False, kernels=True).values())
        # the ids and offsets in one copy; the slots, Plan's on the device, joined there (one op)
        return device_scratchpipe_stages(w, train + id_transfer(w, arrays=1, kernels=True) + kit.calls(True, "op"))
    raise ValueError(f"no cost model for {kind!r}")
