"""Torch's own ops counted as a GPU runs them: the kernels they launch, and the host waits a few
of them force (device_work.py keeps the counts).

The kit's device layer (device.py, the kernel engines) counts its own waits and launches as it
makes them. Plain torch code (the dense model and its optimizer, a sort, a concatenation) launches
kernels too, and a few of its ops make the host wait for the device. Seeing them takes a look at
every op, through torch's dispatch mode: `counting_ops(device)`, used where a count is wanted (the
tests, bench's counted step), never on a timed step, since it costs every op some microseconds.

The rules, stated once:

    a launch   every op on a tensor of `device` that is neither a view nor an allocation: ATen runs
               at least one kernel for it on a GPU (some run a few: the count is a floor)
    a wait     an op whose result's value or size only the device knows: `_local_scalar_dense`
               (`.item()`, `float(t)`, `bool(t)`), the ops torch tags "dynamic_output_shape"
               (nonzero, unique, masked_select, indexing with a mask), repeat_interleave without
               its output_size, and coalesce (its count of distinct indices)

On a CPU the same ops run (the host is the device), so a test there counts what a GPU would.
What the device layer counts itself (a read of the loss, a copy) runs inside `device_call()`,
where the ops it takes are left alone: nothing is counted twice.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from scratchkit.device_work import launched, waited

_state = threading.local()  # .quiet: depth of device_call() blocks on this thread

NO_KERNEL = frozenset(
    {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach", "lift_fresh"}
)
WAITS = frozenset({"_local_scalar_dense", "_coalesce", "equal", "is_nonzero", "allclose"})


@contextmanager
def device_call():
    """A call of the device layer, which counts its own waits and launches: its ops are not
    counted again by `counting_ops`."""
    _state.quiet = getattr(_state, "quiet", 0) + 1
    try:
        yield
    finally:
        _state.quiet -= 1


def waits_for_the_device(func, args, kwargs) -> bool:
    """Whether the op makes the host wait on a GPU (the module's rules)."""
    name = func.overloadpacket.__name__
    if name in WAITS:
        return True
    if name == "repeat_interleave":
        return kwargs.get("output_size") is None
    if torch.Tag.dynamic_output_shape not in func.tags:
        return False
    if name in ("index", "index_put", "index_put_"):  # only a mask's count is the device's
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)
    return True


class CountedOps(TorchDispatchMode):
    """`with CountedOps(device):` every op touching a tensor on `device`, counted (module note)."""

    def __init__(self, device: torch.device | str):
        super().__init__()
        self.device_type = torch.device(device).type

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if getattr(_state, "quiet", 0) or not self._touches_device(args, kwargs, result):
            return result
        name = func.overloadpacket.__name__
        if waits_for_the_device(func, args, kwargs):
            waited(f"torch.{name}")
        if not func.is_view and name not in NO_KERNEL and name not in WAITS:
            launched(f"torch.{name}")
        return result

    def _touches_device(self, args, kwargs, result) -> bool:
        tensors = (x for x in tree_leaves((args, kwargs, result)) if isinstance(x, torch.Tensor))
        return any(t.device.type == self.device_type for t in tensors)


def counting_ops(device: torch.device | str) -> CountedOps:
    """`with counting_ops(device):` torch's ops on `device` counted as launches and waits."""
    return CountedOps(device)
