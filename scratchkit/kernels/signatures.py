"""The argument list of every CUDA kernel in this folder, written once.

Both ways of launching a `.cu` kernel need to know its C signature: the host build wraps each
kernel's launcher in a ctypes function with these argument types, and the CuPy loader turns Python
numbers into NumPy scalars of these widths (a Python int would otherwise be passed with the wrong
size). A test parses the `.cu` files and checks that this table matches them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import numpy as np

KERNEL_DIR = Path(__file__).resolve().parent


class Arg(Enum):
    """The C type of one kernel argument: an array (pointer) of some element type, or a scalar."""

    I64_ARRAY = "long long*"
    U64_ARRAY = "unsigned long long*"
    F32_ARRAY = "float*"
    BOOL_ARRAY = "bool*"
    I64 = "long long"
    F32 = "float"

    @property
    def is_array(self) -> bool:
        return self.value.endswith("*")

    @property
    def dtype(self) -> np.dtype:
        """NumPy dtype of the array's elements, or of the scalar."""
        return np.dtype(
            {"long long": np.int64, "unsigned long long": np.uint64, "float": np.float32, "bool": np.bool_}[
                self.value.rstrip("*")
            ]
        )


@dataclass(frozen=True)
class Kernel:
    name: str
    source: str  # file name in this folder
    args: tuple[Arg, ...]

    @property
    def path(self) -> Path:
        return KERNEL_DIR / self.source


# Short names for the table: L = long long*, U = unsigned long long*, R = float* (rows),
# B = bool*, I = long long, F = float.
L, U, R, B, I, F = Arg.I64_ARRAY, Arg.U64_ARRAY, Arg.F32_ARRAY, Arg.BOOL_ARRAY, Arg.I64, Arg.F32

KERNELS: dict[str, Kernel] = {
    k.name: k
    for k in (
        Kernel("hashmap_query", "hashmap.cu", (L, L, I, L, I, L)),
        Kernel("hashmap_insert", "hashmap.cu", (L, L, I, L, L, I, U)),
        Kernel("hashmap_erase", "hashmap.cu", (L, L, I, L, I, L)),
        Kernel("hashmap_stamp", "hashmap.cu", (L, L, I, L, I, I, L)),
        Kernel("gather_rows", "rows.cu", (R, I, L, I, R)),
        Kernel("scatter_rows", "rows.cu", (R, I, L, I, R)),
        Kernel("embedding_bag_forward", "embedding_bag.cu", (R, I, L, I, L, I, R)),
        Kernel("embedding_bag_backward_sgd", "embedding_bag.cu", (R, I, R, L, L, L, I, F)),
        Kernel("embedding_bag_backward_rowwise_adagrad", "embedding_bag.cu", (R, R, I, R, L, L, L, I, F, F)),
        Kernel("embedding_bag_backward_adagrad", "embedding_bag.cu", (R, R, I, R, L, L, L, I, F, F)),
        Kernel("first_of_runs", "plan.cu", (L, L, I, L)),
        Kernel("working_set", "plan.cu", (L, L, L, I, L, L)),
        Kernel("lower_bounds", "plan.cu", (L, I, L, I, L)),
        Kernel("in_range", "plan.cu", (L, I, I, I, L)),
        Kernel("compact", "plan.cu", (L, L, I, L)),
        Kernel("counts_at", "plan.cu", (L, L, I, L)),
        Kernel("split_hits", "plan.cu", (L, L, I, I, L, L)),
        Kernel("table_bounds", "plan.cu", (L, L, L, L, L, I, L, L, L, L, L, L)),
        Kernel("victim_keys", "plan.cu", (L, L, L, L, L, L, L, I, I, I, I, L)),
        Kernel("victims_per_table", "plan.cu", (L, I, L, I, I, L, L, L)),
        Kernel("pick_victims", "plan.cu", (L, I, L, L, L, L)),
        Kernel("evict", "plan.cu", (L, L, I, L, B, L, L)),
        Kernel("assign_miss_slots", "plan.cu", (L, L, L, L, I, L, L, I, L)),
        Kernel("place", "plan.cu", (L, L, L, L, I, I, L, B, L, B, L)),
        Kernel("mark_trained", "plan.cu", (L, I, I, B, L)),
        Kernel("to_local", "plan.cu", (L, L, L, I, L, L, L, L, L)),
        Kernel("to_global", "plan.cu", (L, L, L, I, L)),
        Kernel("gather_ids", "plan.cu", (L, L, I, L)),
        Kernel("tbe_forward", "tbe.cu", (L, I, L, L, L, L, I, I, R)),
        Kernel("tbe_backward_sgd", "tbe.cu", (L, I, R, L, L, I, L, L, L, L, I, I, F)),
        Kernel("tbe_backward_rowwise_adagrad", "tbe.cu", (L, L, I, R, L, L, I, L, L, L, L, I, I, F, F)),
        Kernel("tbe_backward_adagrad", "tbe.cu", (L, L, I, R, L, L, I, L, L, L, L, I, I, F, F)),
        Kernel("tbe_count_hits", "tbe.cu", (L, L, L, L, L, I, I, U)),
    )
}

SOURCES: tuple[str, ...] = tuple(dict.fromkeys(k.source for k in KERNELS.values()))
COMPAT_HEADER = KERNEL_DIR / "cuda_compat.h"


def check_arrays(kernel: Kernel, args: tuple) -> None:
    """Refuse array arguments of the wrong dtype or layout: a kernel would read them as raw memory."""
    for position, (arg, kind) in enumerate(zip(args, kernel.args)):
        if kind.is_array and (arg.dtype != kind.dtype or not arg.flags.c_contiguous):
            raise TypeError(
                f"{kernel.name} argument {position} must be a C-contiguous {kind.dtype} "
                f"array, got {arg.dtype} (C-contiguous: {arg.flags.c_contiguous})"
            )


def kernels_in(source: str) -> list[Kernel]:
    """The kernels defined in one `.cu` file, in table order."""
    return [k for k in KERNELS.values() if k.source == source]
