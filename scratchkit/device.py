"""Every CUDA-only call the trainers make, behind one object, so the same lines run on a CPU.

The trainers need a few things only CUDA has: pinned (page-locked) host memory, so host -> device
copies can be asynchronous; non-blocking copies; a side stream for ScratchPipe's Transfer, so
Train's kernels keep running; and synchronisation (the stage timer, Insert before Train). The
trainers call `Device` for each, unconditionally. `Device` decides what each call means, and a
*runtime* makes the calls:

    TorchCuda         a GPU: torch.cuda, and CuPy's current stream for the scratchpad kernels
    none (CPU)        pin and moves are identities, the stream is None, syncs do nothing
    a stand-in        tests/stand_ins.py's StandInCuda: records every call, tensors stay on the CPU

With the stand-in, a trainer runs its CUDA branch in CI (the same lines, not a copy), and a test
checks the sequence it issues: rows pinned before their asynchronous copy, the side stream
synchronised before Insert reads what Transfer moved, and so on. What only a real GPU can prove
(that the copies really overlap, that the kernels are fast) is listed in docs/gpu.md.
"""

from __future__ import annotations

import os
from contextlib import nullcontext

import torch

from scratchkit.backend import detect, get_cupy


class TorchCuda:
    """The runtime of a real GPU: torch.cuda, and CuPy's stream for the scratchpad's kernels."""

    def pin(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.pin_memory()

    def to_device(self, tensor: torch.Tensor, device: torch.device, non_blocking: bool) -> torch.Tensor:
        return tensor.to(device, non_blocking=non_blocking)

    def to_host(self, tensor: torch.Tensor, non_blocking: bool) -> torch.Tensor:
        return tensor.to("cpu", non_blocking=non_blocking)

    def new_stream(self):
        return torch.cuda.Stream()

    def use_stream(self, stream):
        return torch.cuda.stream(stream)

    def synchronize_stream(self, stream) -> None:
        stream.synchronize()

    def synchronize_current_stream(self) -> None:
        torch.cuda.current_stream().synchronize()

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    def synchronize_kernels(self) -> None:
        get_cupy().cuda.get_current_stream().synchronize()

    def deterministic(self) -> None:
        # Process-wide torch switch for CUDA, where some kernels use atomics. The CPU ops the kit
        # uses are deterministic already (the bit-exact tests check it), so the CPU goes without
        # it. torch.use_deterministic_algorithms would also set torch.compile's flag, importing
        # torch._inductor and torch._dynamo (seconds, for a compiler the kit never uses): the
        # switch itself is torch._C's, set here alone.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS needs it
        torch._C._set_deterministic_algorithms(True, warn_only=True)


class Device:
    """A torch device and the CUDA calls for it (`runtime`; None on a CPU).

    torch_device: where tensors go ("cpu", "cuda", "cuda:1"). runtime: TorchCuda for a CUDA
    device (the default there), None for the CPU, or a stand-in (tests) with a CPU torch_device.
    """

    def __init__(self, torch_device: torch.device | str, runtime=None):
        self.torch = torch.device(torch_device)
        if runtime is None and self.torch.type == "cuda":
            runtime = TorchCuda()
        self.runtime = runtime

    def __repr__(self) -> str:
        return f"Device({str(self.torch)!r}, runtime={type(self.runtime).__name__})"

    @property
    def is_cuda(self) -> bool:
        """Whether the CUDA lines run (on a GPU, or on a stand-in)."""
        return self.runtime is not None

    # ---- memory and copies
    def pin(self, tensor: torch.Tensor | None) -> torch.Tensor | None:
        """Page-locked copy of a host tensor, so its copy to the device can be asynchronous."""
        return tensor if tensor is None or self.runtime is None else self.runtime.pin(tensor)

    def to_device(self, tensor: torch.Tensor | None, non_blocking: bool = False) -> torch.Tensor | None:
        """host -> device. non_blocking: asynchronous when the source is pinned (keep it alive
        until the stream is synchronised); from pageable memory CUDA stages it anyway."""
        if tensor is None or self.runtime is None:
            return tensor
        return self.runtime.to_device(tensor, self.torch, non_blocking)

    def to_host(self, tensor: torch.Tensor | None, non_blocking: bool = False) -> torch.Tensor | None:
        """device -> host. Blocking by default: the caller reads the result straight away; a
        non-blocking one is usable only after its stream is synchronised."""
        if tensor is None or self.runtime is None:
            return tensor
        return self.runtime.to_host(tensor, non_blocking)

    # ---- streams and synchronisation
    def new_stream(self):
        """A side stream for copies that overlap the training kernels (None on a CPU)."""
        return None if self.runtime is None else self.runtime.new_stream()

    def use_stream(self, stream):
        """`with device.use_stream(s):` work issued inside goes to stream s."""
        return nullcontext() if self.runtime is None else self.runtime.use_stream(stream)

    def synchronize_stream(self, stream) -> None:
        """Wait for everything issued to `stream`."""
        if self.runtime is not None:
            self.runtime.synchronize_stream(stream)

    def synchronize_current_stream(self) -> None:
        """Wait for torch's kernels on the current stream (Train's update, before its slots free)."""
        if self.runtime is not None:
            self.runtime.synchronize_current_stream()

    def synchronize_kernels(self) -> None:
        """Wait for the scratchpad's CuPy kernels (Insert's scatter, before Train reads the rows)."""
        if self.runtime is not None:
            self.runtime.synchronize_kernels()

    def stage_synchronizer(self):
        """What the stage timer calls at the end of each stage (None: nothing to wait for), so
        asynchronous kernels are charged to the stage that launched them."""
        return None if self.runtime is None else self.runtime.synchronize

    def make_deterministic(self) -> None:
        """Deterministic algorithms where they are not already (CUDA's atomics); a no-op on a CPU."""
        if self.runtime is not None:
            self.runtime.deterministic()


def as_device(device: Device | torch.device | str | None) -> Device:
    """A Device for a trainer's `device` argument; None = CUDA when torch has it, else the CPU."""
    if isinstance(device, Device):
        return device
    return Device(device if device is not None else detect().device)
