"""Arrays into and out of one engine's memory, for the scratchpad (scratchpad.py): a caller may
hand it a list, a NumPy or CuPy array or a torch tensor, on the host or the GPU, and gets its
results back where its input came from (host input: NumPy results; device input: CuPy results).

`xp` is the engine's array module (NumPy for the twin and the host build, CuPy on a GPU). The
kernels themselves take only engine arrays of one dtype (int64 ids, slots and offsets, float32
rows: launched.py), so everything a method is given passes through here first, and a wrong
shape or dtype is refused with the argument's name before any kernel runs.
"""

from __future__ import annotations

import numpy as np
import torch

from ..device_work import waited


class EngineArrays:
    """Conversions between the caller's arrays and the engine's (`xp`), whose torch tensors live on
    `device`."""

    def __init__(self, xp, device: torch.device):
        self.xp, self.device = xp, device

    def as_torch(self, array) -> torch.Tensor:
        """An engine array as a torch tensor sharing its memory (DLPack on a GPU)."""
        if self.xp is np:
            return torch.from_numpy(array)
        return torch.from_dlpack(array)

    def on_device(self, x) -> bool:
        """Whether x lives on the GPU (a CuPy array or a CUDA tensor): results then stay there."""
        if isinstance(x, torch.Tensor):
            return x.device.type == "cuda"
        return self.xp is not np and isinstance(x, self.xp.ndarray)

    def result(self, array, on_device: bool):
        """An engine array handed back where the input came from (see the module docstring)."""
        return array if on_device else self.to_host(array)

    def to_host(self, array) -> np.ndarray:
        """An engine array as a NumPy array (itself with the host engines). A wait for the device
        on a GPU, counted on any engine (device_work.py): a CPU runs the same lines."""
        waited("copy to host")
        return array if self.xp is np else self.xp.asnumpy(array)

    def host(self, x, name: str, dtype=np.int64) -> np.ndarray:
        """x (list, NumPy, CuPy or torch) as a 1-D C-contiguous host array of `dtype`."""
        if self.on_device(x):
            waited("copy to host")  # the device's array read back
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().numpy()
        elif self.xp is not np and isinstance(x, self.xp.ndarray):
            x = self.xp.asnumpy(x)
        x = np.asarray(x)
        if x.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {x.shape}")
        if x.size and not (np.issubdtype(x.dtype, np.integer) and x.dtype != np.bool_):
            raise ValueError(f"{name} must hold integers, got dtype {x.dtype}")
        return np.ascontiguousarray(x, dtype=dtype)

    def to_engine(self, host_array: np.ndarray):
        """A host array in the engine's memory (itself with the host engines)."""
        return host_array if self.xp is np else self.xp.asarray(host_array)

    def floats(self, x, name: str, shape: tuple[int, ...]):
        """x as a C-contiguous float32 engine array of exactly `shape`."""
        if isinstance(x, torch.Tensor):
            x = x.detach()
            x = x.cpu().numpy() if self.xp is np else self.xp.from_dlpack(x.to(self.device))
        array = self.xp.asarray(x)
        if tuple(array.shape) != shape:
            raise ValueError(f"{name} must have shape {shape}, got {tuple(array.shape)}")
        if not np.issubdtype(array.dtype, np.floating):
            raise ValueError(f"{name} must hold floats, got dtype {array.dtype}")
        return self.xp.ascontiguousarray(array, dtype=self.xp.float32)
