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

KERNEL_DIR = Path(__file__).resolve().parent


class Arg(Enum):
    """The C type of one kernel argument."""

    PTR = "pointer"      # a device array (a NumPy array on the host build)
    I64 = "long long"
    F32 = "float"


@dataclass(frozen=True)
class Kernel:
    name: str
    source: str              # file name in this folder
    args: tuple[Arg, ...]

    @property
    def path(self) -> Path:
        return KERNEL_DIR / self.source


P, I, F = Arg.PTR, Arg.I64, Arg.F32

KERNELS: dict[str, Kernel] = {k.name: k for k in (
    Kernel("hashmap_query", "hashmap.cu", (P, P, I, P, I, P)),
    Kernel("hashmap_insert", "hashmap.cu", (P, P, I, P, P, I, P)),
    Kernel("hashmap_erase", "hashmap.cu", (P, P, I, P, I, P)),
    Kernel("gather_rows", "rows.cu", (P, I, P, I, P)),
    Kernel("scatter_rows", "rows.cu", (P, I, P, I, P)),
    Kernel("embedding_bag_forward", "embedding_bag.cu", (P, I, P, I, P, I, P)),
    Kernel("embedding_bag_backward_sgd", "embedding_bag.cu", (P, I, P, P, P, P, I, F)),
    Kernel("embedding_bag_backward_rowwise_adagrad", "embedding_bag.cu",
           (P, P, I, P, P, P, P, I, F, F)),
    Kernel("embedding_bag_backward_adagrad", "embedding_bag.cu", (P, P, I, P, P, P, P, I, F, F)),
)}

SOURCES: tuple[str, ...] = tuple(dict.fromkeys(k.source for k in KERNELS.values()))
COMPAT_HEADER = KERNEL_DIR / "cuda_compat.h"


def kernels_in(source: str) -> list[Kernel]:
    """The kernels defined in one `.cu` file, in table order."""
    return [k for k in KERNELS.values() if k.source == source]
