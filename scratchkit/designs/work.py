"""What one training step does, counted: the cost model's first half (the second divides by a
machine's prices, a `Hardware`: scratchkit/costmodel/hardware.py).

`StepWork` (designs/step.py) says what a step touches; `Work` is the work of one stage in the
units a machine prices:

    stream          bytes read or written in order (copies, elementwise ops, outputs)
    rows            random rows gathered or scattered: (rows, row bytes, bytes of the table they
                    are in), priced by the hardware's RowCurve at that table size
    sorts           keys sorted by the kit's coalesce (torch) or by NumPy (unique, argsort), per
                    sort: (n keys, how many sorts[, depth]), priced in n x depth (log2 n unless
                    given: a search of n keys in u sorted ones goes log2 u deep) at that n's rate;
                    ("select", n, count): np.partition's n keys, at the select rate
    sort_values     floats the coalesce moves and sums beside its keys
    calls           the kit's calls, each with its fixed cost (hardware.CALL_OPS)
    mm, bmm         matmuls: (FLOPs per call, calls), and the interaction's batched small ones
    activations     floats the dense step's elementwise ops move
    plan            ScratchPipe's planner: per table, its rows, the lookups seen, the distinct ids
                    and the misses planned
    tbe             the table-batched C++ calls (table_batched.py), per table: ("lookup", n, u,
                    row bytes, table bytes, lookups of the call, repeats by distance, bags),
                    ("backward", n, u, row bytes, bags, gradient bytes,
                    lookups of the call), ("sgd", u, row bytes,
                    table bytes, rows of the call), and the fused SGD path's (fused_sgd.py)
                    ("sort", *a backward's) and ("fused", *a backward's, *an sgd's), priced by
                    the hardware's host_tbe_* curves (measured on the host: a device that is the
                    host, in bags of TBE_BAG)
    pcie            bytes and copies between host and device: `pcie` host -> device (or both ways
                    one after the other), `pcie_out` device -> host while they cross (PCIe carries
                    both directions at once: the stage's link time is its busier direction's)
    pcie_rows       rows a kernel reads from host memory or writes into it over the link, row by
                    row (zero-copy): (rows, row bytes, direction, in id order), at the copies' rate
                    in id order and at the hardware's `pcie_row_bw` in lookup order

`kit.py` counts each kit call in these units (a lookup, a backward, an update, the dense step,
np.unique...), and each design (its family's module) adds them up stage by stage, as its code
runs. A `Work` prices itself on any machine that has the prices it names (`seconds(machine)`):
designs/ knows no machine, costmodel/ knows no design.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from scratchkit.kernels.hash_map import BUCKETS_PER_SLOT

FLOAT_BYTES = 4
ID_BYTES = 8  # int64 ids, offsets and slots
CACHED_BYTES = 2.0**18  # a table this small stays in a core's cache (the curves' smallest)
TBE_BAG = 8  # lookups a bag in the table-batched curves' timings (calibration/tbe_timings.py)
BUCKET_BYTES = 16  # a bucket of the scratchpad's hash map: key and slot, int64 each
LINK_IN, LINK_OUT = "in", "out"  # the link's directions: host -> device, device -> host


@dataclass(frozen=True)
class Work:
    """One stage's work in one step, on the host and on the device (see the module note)."""

    host_stream: float = 0.0
    host_rows: tuple = ()  # (gather|scatter|lookup|update, rows of one call, row bytes, table bytes)
    host_sorts: tuple = ()  # ("torch" | "numpy", n keys, sorts[, depth])
    host_sort_values: float = 0.0
    host_calls: tuple = ()  # (call name, count)
    host_plan: tuple = ()  # ScratchPipe's planner, per table: (table rows, lookups, ids, misses,
    # slots, passes of its victim choice over them a step: 0 to 1)
    host_tbe: tuple = ()
    host_pinned: float = 0.0  # bytes copied into pinned memory (only where there is a GPU)
    pcie: float = 0.0  # host -> device (or both ways, one after the other)
    pcie_out: float = 0.0  # device -> host, crossing while `pcie` does
    pcie_rows: tuple = ()  # (rows, row bytes, LINK_IN | LINK_OUT, in id order)
    pcie_copies: float = 0.0
    device_stream: float = 0.0
    device_rows: tuple = ()
    device_sorts: tuple = ()
    device_sort_values: float = 0.0
    device_calls: tuple = ()
    device_tbe: tuple = ()  # only where the device is the host's CPU (`device_is_host`)
    device_mm: tuple = ()  # (FLOPs per call, calls)
    device_bmm: tuple = ()  # (FLOPs per matrix, matrices)
    device_activations: float = 0.0  # floats the dense step's elementwise ops move
    device_probes: tuple = ()  # (ids, map slots): probes of the scratchpad's hash map (hashmap.cu)
    touched_rows: float = 0.0  # distinct rows the whole step touches (0: not known)

    def __add__(self, other: "Work") -> "Work":
        summed = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        return Work(**summed | {"touched_rows": max(self.touched_rows, other.touched_rows)})

    def in_step(self, touched_rows: float) -> "Work":
        """This work inside a step that touches `touched_rows` distinct rows in all: a random row
        is found in the caches as far as the rows the step touches fit there, so a table counts
        as no larger than those rows (at its row width) when its rows are priced."""
        return replace(self, touched_rows=touched_rows)

    def _footprint(self, footprint: float, row_bytes: float) -> float:
        return min(footprint, self.touched_rows * max(row_bytes, 1.0)) if self.touched_rows else footprint

    def on_host(self) -> "Work":
        """The same work done by the host instead of the device (hybrid's embedding stages)."""
        moved = {
            f"host_{k}": getattr(self, f"host_{k}") + getattr(self, f"device_{k}")
            for k in ("stream", "rows", "sorts", "sort_values", "calls", "tbe")
        }
        return replace(
            self,
            **moved,
            device_stream=0.0,
            device_rows=(),
            device_sorts=(),
            device_sort_values=0.0,
            device_calls=(),
            device_tbe=(),
        )

    def bytes(self) -> float:
        """Bytes moved through memories and the link: streams, rows, PCIe."""
        rows = sum(r[1] * r[2] for r in self.host_rows + self.device_rows)
        linked = sum(n * row for n, row, *_ in self.pcie_rows)
        return self.host_stream + self.device_stream + self.pcie + self.pcie_out + linked + rows

    def seconds(self, machine, planners: float = 1.0) -> float:
        """Time on `machine`, nothing overlapped; the planner's work spread over `planners` cores."""
        return self.host_seconds(machine, planners) + self.pcie_seconds(machine) + self.device_seconds(machine)

    def host_seconds(self, machine, planners: float = 1.0) -> float:
        scan = machine.host_plan_slot_rate
        plan = sum(
            n / machine.host_plan_lookup_rate.at(rows)
            + u / machine.host_plan_id_rate.at(rows)
            + m / machine.host_plan_miss_rate.at(rows)
            + (passes * slots / scan.at(slots) if scan and passes else 0.0)
            for rows, n, u, m, slots, passes in self.host_plan
        )
        return (
            self.host_stream / machine.host_stream_bw
            + self._rows(
                self.host_rows,
                {
                    "gather": machine.host_gather,
                    "scatter": machine.host_scatter,
                    "lookup": machine.host_lookup,
                    "update": machine.host_update,
                },
            )
            + _sorts(self.host_sorts, machine.host_sort, machine.host_numpy_sort, machine.host_numpy_select)
            + self.host_sort_values / machine.host_sort_value_rate
            + self._tbe(self.host_tbe, machine)
            + sum(count * machine.call(False, name) for name, count in self.host_calls)
            + plan / max(planners, 1.0)
            + (0.0 if machine.device_is_host else self.host_pinned / machine.host_stream_bw)
        )

    def _rows(self, rows: tuple, curves: dict) -> float:
        return sum(
            curves[kind].seconds(n, row_bytes, self._footprint(footprint, row_bytes))
            for kind, n, row_bytes, footprint in rows
        )

    def _tbe(self, entries: tuple, machine) -> float:
        """The table-batched calls' per-lookup and per-row work (their fixed costs are calls)."""
        if entries and not machine.batched_host:
            raise ValueError(
                f"machine {machine.name!r} has no table-batched rates (host_tbe_*): run "
                "`scratchkit calibrate` on a machine with a C++ compiler"
            )
        if not entries:
            return 0.0
        total = 0.0
        longest = max(p[2] for p in machine.host_tbe_backward.points)  # the backward's most lookups a table timed
        for kind, *size in entries:
            if kind == "lookup":  # each distinct row from the table, each repeat from as
                n, u, row, table, call, reuse, bags = size  # far back as it was last looked up:
                # a repeat whose row was last looked up d distinct rows ago is a random row of a
                # footprint of d rows, not a row still in the core's cache (timed on the
                # embedding-bound profiles' batches, a repeat cost about twice the cached price at
                # 256 B rows and three times at 512 B). Without its distances (`reuse`), as far
                # back as the table's working set in the batch
                price = lambda rows: machine.host_tbe_lookup.seconds_per_row(
                    row, self._footprint(max(min(rows * row, table), CACHED_BYTES), row), call
                )
                bins = reuse or ((u, n - u),)
                total += (
                    u * machine.host_tbe_lookup.seconds_per_row(row, self._footprint(table, row), call)
                    + sum(count * price(d) for d, count in bins)
                    + _bags_beyond_the_curves(n, bags) * row / machine.host_stream_bw
                )
            elif kind in ("sort", "fused") and getattr(machine, f"host_tbe_{kind}") is None:
                # a machine without the fused path's curves: priced as the unfused pair it computes
                total += self._tbe((("backward", *size[:6]),) if kind == "sort" else (("sgd", *size[6:]),), machine)
            elif kind == "sort":  # the fused path's backward stage: the lookups sorted, no gradient read
                n, u, row, *_ = size
                total += n * machine.host_tbe_sort.seconds_per_row(row, n / max(u, 1.0), n)
            elif kind in ("backward", "fused"):  # the curve's middle axis: lookups per distinct id
                n, u, row, bags, grad, call = size[:6]
                curve = machine.host_tbe_backward if kind == "backward" else machine.host_tbe_fused
                # each lookup reads its bag's gradient row, in the order of its sorted id: a random
                # row of the [bags, tables, dim] gradient, where the curve's was one of n rows (8
                # tables of n/8 bags, n held at the curve's largest), priced as the C++ lookup's
                # random rows. Measured (26 tables of 4,096 lookups, 256 B rows): bags of 1 took
                # 2.8 ms more than bags of 8, 26 MiB of gradient against 3; the forward 0.9 ms more
                # (its output). A gradient smaller than the curve's is not priced cheaper: priced so
                # (and n not held), embedding-bound's backward (pooling 40) came out further under
                # its measured time than without the term
                timed = min(n, longest) * row
                row_at = lambda footprint: machine.host_tbe_lookup.seconds_per_row(row, footprint, call)
                gathered = max(row_at(grad) - row_at(timed), 0.0)
                total += n * (curve.seconds_per_row(row, n / max(u, 1.0), n) + gathered)
            else:  # the curve's last axis: the share of the table updated
                u, row, table, call = size
                density = min(u * row / max(table, 1.0), 1.0)
                total += u * machine.host_tbe_update.seconds_per_row(row, self._footprint(table, row), density)
        return total

    def pcie_seconds(self, machine) -> float:
        """The link's time: each direction's copies and rows at its own rate, the two directions
        at once (PCIe is full duplex), plus each copy's fixed cost."""
        way = {LINK_IN: self.pcie / machine.pcie_bw, LINK_OUT: self.pcie_out / machine.pcie_bw}
        for rows, row_bytes, direction, by_id in self.pcie_rows:
            way[direction] += rows * row_bytes / (machine.pcie_bw if by_id else machine.link_row_bw)
        return max(way.values()) + self.pcie_copies * machine.pcie_latency

    def launch_seconds(self, machine) -> float:
        """Of `device_seconds`, the calls' fixed costs: on a GPU the launches, which the host
        thread that issues them spends (the kernels run on the device meanwhile)."""
        return sum(count * machine.call(True, name) for name, count in self.device_calls)

    def device_seconds(self, machine) -> float:
        return (
            self.device_stream / machine.device_stream_bw
            + self._rows(
                self.device_rows,
                {
                    "gather": machine.device_gather,
                    "scatter": machine.device_scatter,
                    "lookup": machine.device_lookup,
                    "update": machine.device_update,
                },
            )
            + _sorts(self.device_sorts, machine.device_sort, machine.host_numpy_sort, machine.host_numpy_select)
            + self.device_sort_values / machine.device_sort_value_rate
            + self._tbe(self.device_tbe, machine)
            + sum(count * machine.call(True, name) for name, count in self.device_calls)
            + sum(calls * flops / machine.device_flops.at(flops) for flops, calls in self.device_mm)
            + sum(n * flops / machine.device_bmm_flops.at(flops) for flops, n in self.device_bmm)
            + self.device_activations / machine.device_activation_rate.at(self.device_activations)
            + self._probes(machine)
        )

    def _probes(self, machine) -> float:
        """The hash map's probes: at the measured rate by the map's slots where there is one,
        else as random reads of one bucket each from the map's buckets."""
        rate = machine.device_map_probe_rate
        if rate is not None:
            return sum(n / rate.at(slots) for n, slots in self.device_probes)
        buckets = lambda slots: self._footprint(BUCKETS_PER_SLOT * slots * BUCKET_BYTES, BUCKET_BYTES)
        return sum(machine.device_gather.seconds(n, BUCKET_BYTES, buckets(slots)) for n, slots in self.device_probes)


def _bags_beyond_the_curves(lookups: float, bags: float) -> float:
    """Pooled rows a lookup call writes beyond what its curve holds (timed in bags of TBE_BAG):
    a step's bags of 1 write eight times the curve's, bags of 40 lookups fewer (negative)."""
    return bags - lookups / TBE_BAG


def _sorts(sorts: tuple, torch_rate, numpy_rate, select_rate=None) -> float:
    """Sorts in key x log2 n (or x depth) at their kind's rate; selections in keys at theirs (a
    hardware without a select rate prices one as NumPy's sort of the same keys)."""
    total = 0.0
    for kind, n, count, *depth in sorts:
        if n <= 1:
            continue
        if kind == "select" and select_rate is not None:
            total += count * n / select_rate.at(n)
            continue
        units = n * depth[0] if depth else sort_units(n)
        total += count * units / (torch_rate if kind == "torch" else numpy_rate).at(n)
    return total


def sort_units(n: float) -> float:
    """The work of sorting n keys, in key x log2(keys): the unit every sort rate counts in."""
    return n * math.log2(n) if n > 1 else 0.0


def log2(x: float) -> float:
    return math.log2(x) if x > 1 else 0.0
