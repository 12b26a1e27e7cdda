"""Hardware: the handful of speeds the cost model divides work by, each with its source.

Most speeds are one number (a bandwidth, a latency). Three depend on the size of what is done, so
they are small curves (costmodel/curves.py: `RowCurve` by row and table bytes, `RateCurve` by the
size of a call). Hardware round-trips through JSON (`to_json`, `from_json`); `load_hardware` reads
a saved one and names the file in any error.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from scratchkit.costmodel.curves import RateCurve, RowCurve

GB = 1e9
US = 1e-6
MB = 2**20


# The kit's calls whose fixed cost hardware states, and how many ops (host torch ops, or device
# kernels) each launches, counted in scratchkit/embedding/optim.py and scratchkit/model.py: a
# datasheet's hardware prices a call as ops x its launch cost; `calibrate` times each call where it
# occurs (scratchkit/calibration/fixed_costs.py) or on tiny inputs (calibration/kit_timings.py).
CALL_OPS = {
    "forward_stage": 1,  # once per stage of lookups: the stack of the pooled vectors (and, timed
    "backward_stage": 0,  # in a step, the first call's colder caches); likewise once per stage of
    "update_stage": 0,  # backwards and of updates (no op of their own)
    "lookup": 1,  # pooled_lookup: one embedding_bag
    "backward": 9,  # embedding_backward: diff, arange, repeat_interleave, sparse tensor, coalesce
    "slots_of_unique": 3,  # searchsorted, empty_like, index_put_
    "update_sgd": 3,  # apply_update: index_select, add_, index_copy_
    "update_adagrad": 10,
    "update_rowwise_adagrad": 11,
    "dense_base": 40,  # the dense step less its layers: interaction, loss, backward engine, optimizer
    "dense_layer": 16,  # one Linear (+ ReLU) forward, backward, gradient and update
    "op": 1,  # any other torch op
    "numpy": 1,  # a NumPy call (host only)
    "unique": 8,  # np.unique(return_inverse, return_counts): argsort, take, diff, cumsum...
    "plan_table": 16,  # the planner's calls per table and batch around its loop (NumPy, host)
    "plan_table_few": 16,  # the same at 64 lookups a table (plan_timings.plan_table_weights)
    "plan_batch": 40,  # and per batch: the batch's bookkeeping, retiring, the shortfall (host)
    "plan_victims": 8,  # and per table that evicts: its victim choice beyond the pass over the slots
    "plan_victims_few": 8,  # the same at 64 lookups a table into a scratchpad of 256 slots (tiny's shape)
    "kernel": 1,  # a kernel of kernels/*.cu (scratchpipe-device): a launch on a GPU, the
    # host build's call on a CPU (ctypes, its arrays' checks: ~5x a NumPy call)
    "device_plan_table": 8,  # scratchpipe-device's Plan, per table (host Python): its part of the plan
    "send_batch": 10,  # a CPU run's host process hands Plan(b) to Train (pickle, the ring, the
    "send_table": 4,  # pipe; scratchpipe/ring.py): per batch and per table in the host process,
    "receive_batch": 8,  # and in the trainer's, as it receives and unpacks it (host); the arrays'
    "receive_table": 1,  # bytes priced apart, as copies
}


# calls hardware saved by an earlier kit lacks: `this-cpu` measures afresh rather than refuse it
LATER_CALLS = frozenset(
    {
        "plan_batch",
        "plan_victims",
        "plan_table_few",
        "plan_victims_few",
        "kernel",
        "device_plan_table",
        "send_batch",
        "send_table",
        "receive_batch",
        "receive_table",
    }
)


class OutdatedHardwareError(ValueError):
    """Saved hardware from an earlier kit: it lacks calls this one prices (LATER_CALLS)."""


TBE_CALLS = ("forward", "backward", "sgd")  # the table-batched calls: one each per step, all tables


def calls_from_ops(op_latency: float) -> dict[str, float]:
    """Each call's fixed cost as its op count times one op latency (datasheet machines)."""
    return {name: ops * op_latency for name, ops in CALL_OPS.items()}


@dataclass(frozen=True)
class Hardware:
    """Bandwidths in bytes/s, latencies in seconds, rates per second. The host runs the kit's
    Python, NumPy and host torch ops; the device runs the trainers' device-side torch ops (on a
    machine without a GPU it is the same CPU: `device_is_host`)."""

    name: str
    description: str
    host_cores: int  # cores the host's threads (pipeline stages, planners) can use
    host_stream_bw: float  # host DRAM, large sequential copies (read + write bytes)
    host_gather: RowCurve  # random rows read (torch index_select, embedding_bag, NumPy fancy index)
    host_scatter: RowCurve  # random rows written (index_copy_, NumPy fancy assignment)
    host_lookup: RowCurve  # rows looked up and summed into bags (embedding_bag)
    host_update: RowCurve  # rows updated in place by SGD (apply_update: gather, add, scatter)
    host_op_latency: float  # fixed cost of one host torch op (dispatch, allocation)
    host_numpy_op_latency: float  # fixed cost of one NumPy call
    host_calls: dict[str, float]  # fixed cost of each kit call on the host (CALL_OPS names)
    host_sort: RateCurve  # the kit's coalesce on the host: keys x log2 n per second, at n keys
    host_sort_value_rate: float  # floats per second coalesce moves and sums beside its keys
    host_numpy_sort: RateCurve  # np.unique / argsort: keys x log2 n per second, at n keys
    host_plan_lookup_rate: RateCurve  # ScratchPipe's planner, per core, by table rows: lookups/s seeing a batch,
    host_plan_id_rate: RateCurve  # distinct ids/s planning (hit or miss, hold, remap), and
    host_plan_miss_rate: RateCurve  # misses/s beyond that (a victim chosen, the map updated)
    pcie_bw: float  # host <-> device copies, per direction (PCIe carries both at once)
    pcie_latency: float  # fixed cost of one host <-> device copy
    device_stream_bw: float  # device memory, streaming
    device_gather: RowCurve  # device memory, random rows read
    device_scatter: RowCurve  # device memory, random rows written
    device_lookup: RowCurve  # device memory, rows looked up and summed into bags
    device_update: RowCurve  # device memory, rows updated in place by SGD
    device_op_latency: float  # fixed cost of one device kernel (eager launch)
    device_calls: dict[str, float]  # fixed cost of each kit call on the device
    device_sort: RateCurve  # coalesce on the device: keys x log2 n per second, at n keys
    device_sort_value_rate: float  # floats per second coalesce moves beside its keys
    device_flops: RateCurve  # float32 matmul FLOP/s, by FLOPs per call
    device_bmm_flops: RateCurve  # float32 batched small matmuls (the interaction), by FLOPs per matrix
    device_activation_rate: RateCurve  # floats/s the dense step's elementwise ops move, by floats a step
    device_is_host: bool = False  # True: no GPU, the "device" stages share the host's cores
    # the table-batched C++ calls (scratchkit/embedding/table_batched.py), which the trainers make
    # on a CPU instead of optim.py's per-table ops: seconds per lookup (forward: by row bytes,
    # table bytes and lookups of the call; backward: by row bytes, lookups per distinct id in the
    # footprint's place, and a table's lookups) and per distinct row updated by SGD (by row bytes,
    # table bytes and the share of the table's rows updated, in the rows' place); their fixed costs are
    # host_calls' "tbe_forward", "tbe_backward", "tbe_sgd" (+ "tbe_*_table" per table). None: not measured (datasheet
    # machines, no compiler): the per-table pricing
    host_tbe_lookup: RowCurve | None = None
    host_tbe_backward: RowCurve | None = None
    host_tbe_update: RowCurve | None = None
    # the fused SGD path's two calls (fused_sgd.py: gpu-only's step on a CPU), seconds per lookup by
    # the backward's axes: the sort (its backward stage) and the update that sums and applies each
    # id's gradient in one pass. None (datasheet machines, hardware saved before they were
    # measured): the fused path priced as the unfused backward and update it computes bit for bit
    host_tbe_sort: RowCurve | None = None
    host_tbe_fused: RowCurve | None = None
    # ScratchPipe's planner choosing victims: slots/s of its pass over a full scratchpad (every
    # slot's urgency counted, plan_loop.cpp's choose_victims), by the scratchpad's slots, once per
    # table and batch with a victim. None (hardware saved before it was measured): not priced
    host_plan_slot_rate: RateCurve | None = None
    # np.partition (a demand cache's victim choice, embedding/victims.py's first_k): int64 keys/s
    # by the keys of a call. None (hardware saved before it was measured): priced as a NumPy sort
    host_numpy_select: RateCurve | None = None
    # the scratchpad's hash map (kernels/hashmap.cu), as scratchpipe-device probes it: probes/s
    # by the map's slots, in calls of 16k ids. None (a GPU server; hardware saved before it was
    # measured): priced as a random read of one bucket per probe (device_gather)
    device_map_probe_rate: RateCurve | None = None
    # ScratchPipe on a CPU: the cores two busy processes get at once (calibration/co_run.py), 1 to
    # host_cores: where under 2, its host process and Train take turns (costmodel.co_run). None: not
    # measured (a GPU server: its host threads are priced alone; hardware saved before it was)
    co_run_cores: float | None = None
    # random 64 B lines a second the host's memory system serves one GPU's share of the cores, all
    # of them at once: the cap on host embedding work spread over the cores (designs/host_threads.py).
    # None: not known (a calibrated CPU, whose run's few threads are priced on the curves alone)
    host_memory_line_rate: float | None = None
    # rows a kernel reads from (or writes into) host memory over the link in lookup order, row by
    # row (zero-copy, as scratchpipe-device's Collect and FBGEMM's UVM tables): bytes/s per
    # direction. In id order such rows cross at the copies' rate (`pcie_bw`). None: not known
    # (a calibrated machine; hardware saved before it was stated): priced as the copies
    pcie_row_bw: float | None = None
    # the builds of the kit's C++ loops the curves were measured with (calibrate.loop_builds: a
    # library -> its build name): hardware of other builds prices loops this kit no longer runs
    native_builds: dict[str, str] = field(default_factory=dict, compare=False)
    sources: dict[str, str] = field(default_factory=dict, compare=False)  # field -> why this number
    origin: str = field(default="", compare=False)  # where the hardware came from (file, date, machine)

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "float" and f.name.endswith(("_bw", "_rate")) and not value > 0:
                raise ValueError(f"hardware {self.name!r}: {f.name} must be > 0, got {value}")
            if f.type == "float" and f.name.endswith("_latency") and not value >= 0:
                raise ValueError(f"hardware {self.name!r}: {f.name} must be >= 0, got {value}")
        if self.host_tbe_update is not None and any(p[2] > 1 for p in self.host_tbe_update.points):
            raise OutdatedHardwareError(
                f"hardware {self.name!r}: host_tbe_update is by rows of the call; "
                "this kit prices an update by the share of the table it updates"
            )
        if self.co_run_cores is not None and not 1 <= self.co_run_cores <= self.host_cores:
            raise ValueError(
                f"hardware {self.name!r}: co_run_cores must be 1 to host_cores "
                f"({self.host_cores}) or None, got {self.co_run_cores}"
            )
        if self.host_memory_line_rate is not None and not self.host_memory_line_rate > 0:
            raise ValueError(
                f"hardware {self.name!r}: host_memory_line_rate must be > 0 or None, got {self.host_memory_line_rate}"
            )
        if self.pcie_row_bw is not None and not self.pcie_row_bw > 0:
            raise ValueError(f"hardware {self.name!r}: pcie_row_bw must be > 0 or None, got {self.pcie_row_bw}")
        if self.host_cores < 1:
            raise ValueError(f"hardware {self.name!r}: host_cores must be >= 1, got {self.host_cores}")
        for side in ("host_calls", "device_calls"):
            calls = getattr(self, side)
            missing = [c for c in CALL_OPS if c not in calls]
            if missing or any(not v >= 0 for v in calls.values()):
                error = OutdatedHardwareError if missing and set(missing) <= LATER_CALLS else ValueError
                raise error(
                    f"hardware {self.name!r}: {side} needs a fixed cost >= 0 for each of "
                    f"{', '.join(CALL_OPS)}; missing {missing or 'none'}"
                )

    @property
    def batched_host(self) -> bool:
        """Whether the host's embedding stages run (and are priced) as table-batched calls."""
        curves = (self.host_tbe_lookup, self.host_tbe_backward, self.host_tbe_update)
        return all(c is not None for c in curves) and all(
            f"tbe_{k}{part}" in self.host_calls for k in TBE_CALLS for part in ("", "_table")
        )

    @property
    def link_row_bw(self) -> float:
        """Bytes/s of rows a kernel moves over the link in lookup order (`pcie_row_bw`, else the copies')."""
        return self.pcie_row_bw if self.pcie_row_bw is not None else self.pcie_bw

    def call(self, on_device: bool, name: str) -> float:
        """The fixed cost of one kit call `name` (a CALL_OPS key) on the device or the host."""
        return (self.device_calls if on_device else self.host_calls)[name]

    # ---- JSON
    def to_json(self) -> dict:
        data = asdict(self)
        for f in fields(self):  # curves as lists of points; infinities as strings JSON can hold
            value = getattr(self, f.name)
            if isinstance(value, (RowCurve, RateCurve)):
                data[f.name] = [list(p) for p in value.points]
            elif isinstance(value, float) and math.isinf(value):
                data[f.name] = "inf"
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Hardware":
        """The inverse of `to_json`. A missing or extra field, or a bad value, raises ValueError."""
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        if "host_co_run" in data:  # the two sides' slowdown factors, before the cores they get
            raise OutdatedHardwareError(
                "it prices ScratchPipe's two sides by slowdown factors, not by the cores they get at once"
            )
        names = {f.name: f for f in fields(cls)}
        missing = [n for n, f in names.items() if n not in data and f.default is f.default_factory is _MISSING]
        unknown = sorted(set(data) - set(names))
        if missing or unknown:
            raise ValueError(f"fields missing: {missing or 'none'}; unknown fields: {unknown or 'none'}")
        return cls(**{name: field_from_json(name, value) for name, value in data.items()})


def field_from_json(name: str, value):
    """One field of `Hardware` from its JSON form (`to_json`'s): curves from lists of points,
    numbers by the field's type. A bad value raises ValueError naming the field."""
    kind = {f.name: f.type for f in fields(Hardware)}[name]
    try:
        if value is None and kind.endswith("| None"):
            return None
        if kind.startswith(("RowCurve", "RateCurve")):
            curve = RowCurve if kind.startswith("RowCurve") else RateCurve
            return curve(tuple(tuple(float(x) for x in p) for p in value))
        if kind in ("float", "float | None"):
            return float(value)
        if kind == "int":
            return int(value)
        if kind == "bool":
            return bool(value)
        if kind == "dict[str, float]":
            return {str(k): float(v) for k, v in value.items()}
        if kind == "dict[str, str]":
            return {str(k): str(v) for k, v in value.items()}
        return value
    except (TypeError, ValueError) as err:
        raise ValueError(f"field {name!r}: {err}") from None


_MISSING = fields(Hardware)[0].default  # dataclasses.MISSING, without importing a private name


def median_hardware(machines: list[Hardware]) -> Hardware:
    """Calibrations of the same machine as one: every figure, every curve's every point and every
    call's cost the median over `machines` (which must have been measured alike: the same fields,
    curves at the same points). The first one's name, sources and origin."""
    if not machines:
        raise ValueError("no machines to take the median of")
    forms = [p.to_json() for p in machines]
    median = lambda xs: float(np.median(xs))
    out = dict(forms[0])
    for name, value in forms[0].items():
        values = [form[name] for form in forms]
        if isinstance(value, float):
            out[name] = median(values)
        elif isinstance(value, dict) and name.endswith("_calls"):
            out[name] = {k: median([v[k] for v in values]) for k in value}
        elif isinstance(value, list) and value and isinstance(value[0], list):
            if any(len(v) != len(value) or [p[:-1] for p in v] != [p[:-1] for p in value] for v in values):
                raise ValueError(f"{name}: the machines' curves are not measured at the same points")
            out[name] = [point[:-1] + [median([v[i][-1] for v in values])] for i, point in enumerate(value)]
    return Hardware.from_json(out)


def save_hardware(machine: Hardware, path: Path) -> Path:
    """Write `machine` as JSON to `path` (folders made), whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(machine.to_json(), indent=2) + "\n")
    partial.replace(path)
    return path


def load_hardware(path: Path) -> Hardware:
    """Saved hardware. Anything wrong with the file is one ValueError line that names it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        return Hardware.from_json(data)
    except OutdatedHardwareError as err:
        raise OutdatedHardwareError(f"hardware {path} was saved by an earlier scratchkit ({err})") from None
    except (OSError, UnicodeDecodeError, ValueError, TypeError) as err:
        raise ValueError(
            f"hardware {path}: cannot be read ({err}); run `scratchkit calibrate` to write it again, or delete it"
        ) from None
