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

Every time the host waits for the device through here (a value read, a blocking copy, a
synchronize) and every copy it queues is counted (device_work.py), on any device: a CPU runs the
same lines, so a test on a CPU holds a trainer to the waits a GPU would make. A step's one
allowed wait is `read` (the loss): values the host needs later in the step (`read_later`, e.g.
ScratchPipe's hit count) are read with it, in the same copy.
"""

from __future__ import annotations

import os
import threading
from contextlib import nullcontext

import torch

from scratchkit.backend import detect, get_cupy
from scratchkit.device_ops import device_call
from scratchkit.device_work import launched, waited


class TorchCuda:
    """The runtime of a real GPU: torch.cuda, and CuPy's stream for the scratchpad's kernels."""

    def __init__(self):
        self._streams = {}  # torch's stream pointer -> CuPy's view of it (`kernel_stream`)

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

    def kernel_stream(self):
        """CuPy's kernels on torch's current stream, so they and torch's ops run in order (one
        CuPy view of each torch stream, made on first use)."""
        pointer = torch.cuda.current_stream().cuda_stream
        if pointer not in self._streams:
            cuda = get_cupy().cuda  # torch's default stream is the legacy null stream: CuPy's own
            self._streams[pointer] = cuda.Stream.null if pointer == 0 else cuda.ExternalStream(pointer)
        return self._streams[pointer]

    def new_event(self, timing: bool = False):
        return torch.cuda.Event(enable_timing=timing)

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

    def __init__(self, torch_device: torch.device | str, runtime=None, kernels=None):
        self.torch = torch.device(torch_device)
        if runtime is None and self.torch.type == "cuda":
            runtime = TorchCuda()
        self.runtime = runtime
        # the engine Train's kernels run on (kernels/engine.py), where the caller picks it (a
        # stand-in's tests); None: the embedding layer picks CuPy on a GPU (embedding/device_tbe.py)
        self.kernels = kernels
        self._pending = threading.local()  # .readings: this thread's values to read at the next wait

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
        until the stream is synchronised); from pageable memory CUDA stages it anyway. A blocking
        copy waits for the device's queue first (torch synchronises the stream): counted as a wait."""
        if tensor is None:
            return tensor
        _copied("copy to device", non_blocking)
        if self.runtime is None:
            return tensor
        with device_call():
            return self.runtime.to_device(tensor, self.torch, non_blocking)

    def to_device_together(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Host tensors of one dtype to the device in one asynchronous copy: packed into one pinned
        buffer, copied, split into views there (what a step's ids and offsets need: one copy, not
        one per array, and no wait). On a CPU: the tensors themselves."""
        _copied("copy to device", non_blocking=True)
        if self.runtime is None:
            return list(tensors)
        with device_call():
            packed = self.runtime.pin(torch.cat([t.reshape(-1) for t in tensors]))
            moved = self.runtime.to_device(packed, self.torch, True)  # the pinned block outlives the copy
            return [part.view(t.shape) for part, t in zip(moved.split([t.numel() for t in tensors]), tensors)]

    def to_host(self, tensor: torch.Tensor | None, non_blocking: bool = False) -> torch.Tensor | None:
        """device -> host. Blocking by default (a wait: the caller reads the result straight away);
        a non-blocking one is usable only after its stream is synchronised."""
        if tensor is None:
            return tensor
        _copied("copy to host", non_blocking)
        if self.runtime is None:
            return tensor
        with device_call():
            return self.runtime.to_host(tensor, non_blocking)

    # ---- values the host reads: the step's one wait
    def read(self, tensor: torch.Tensor, what: str = "loss") -> float:
        """A device scalar's value on the host: one wait, which also reads every value this thread
        asked for with `read_later` (one copy for all of them)."""
        reading = self.read_later(tensor, what)
        self.settle(what)
        return reading.value

    def read_later(self, tensor: torch.Tensor, what: str) -> "Reading":
        """A device scalar the host will need: read at this thread's next `read` (or `settle`),
        with the others, in one wait. Nothing waits now."""
        reading = Reading(self, tensor.detach(), what)
        self._readings().append(reading)
        return reading

    def settle(self, what: str) -> None:
        """Read every value this thread asked for with `read_later`: one wait (none if nothing is
        asked for). Each value comes back as a Python float (an int64 below 2^53 exactly)."""
        readings, self._pending.readings = self._readings(), []
        if not readings:
            return
        waited(what)
        with device_call():
            if len(readings) == 1:  # (the common case, without stacking)
                values = [float(readings[0].tensor)]
            else:
                values = torch.stack([r.tensor.reshape(()).to(torch.float64) for r in readings]).tolist()
        for reading, value in zip(readings, values):
            reading.tensor, reading.value = None, value

    def _readings(self) -> list:
        if not hasattr(self._pending, "readings"):
            self._pending.readings = []
        return self._pending.readings

    # ---- streams and synchronisation
    def new_stream(self):
        """A side stream for copies that overlap the training kernels (None on a CPU)."""
        return None if self.runtime is None else self.runtime.new_stream()

    def use_stream(self, stream):
        """`with device.use_stream(s):` work issued inside goes to stream s."""
        return nullcontext() if self.runtime is None else self.runtime.use_stream(stream)

    def synchronize_stream(self, stream) -> None:
        """Wait for everything issued to `stream`."""
        waited("synchronize_stream")
        if self.runtime is not None:
            self.runtime.synchronize_stream(stream)

    def synchronize_current_stream(self) -> None:
        """Wait for torch's kernels on the current stream."""
        waited("synchronize_current_stream")
        if self.runtime is not None:
            self.runtime.synchronize_current_stream()

    def synchronize_kernels(self) -> None:
        """Wait for the scratchpad's CuPy kernels (Insert's scatter, before Train reads the rows)."""
        waited("synchronize_kernels")
        if self.runtime is not None:
            self.runtime.synchronize_kernels()

    def kernel_stream(self):
        """`with device.kernel_stream():` CuPy kernels launched inside go to torch's current stream,
        in order with torch's ops (Train's kernels beside its torch ops: no wait between them)."""
        return nullcontext() if self.runtime is None else self.runtime.kernel_stream()

    # ---- events: a point in a stream's work, which another thread may wait for or time
    def record_event(self):
        """An event at the end of the work queued so far on the current stream (None on a CPU)."""
        if self.runtime is None:
            return None
        event = self.runtime.new_event()
        event.record()
        return event

    def wait_event(self, event, what: str = "event") -> None:
        """Wait on the host until `event`'s work is done (counted as a wait on this thread's path)."""
        waited(what)
        if event is not None:
            event.synchronize()

    def stage_clock(self):
        """What the stage timer reads its times from: CUDA events on a GPU (recorded in the stream,
        read once done, so measuring never stops the device), None on a CPU (the wall clock)."""
        return None if self.runtime is None else EventClock(self.runtime)

    def stage_synchronizer(self):
        """What the stage timer calls at the end of each stage (None: nothing to wait for), so
        asynchronous kernels are charged to the stage that launched them."""
        return None if self.runtime is None else self.runtime.synchronize

    def make_deterministic(self) -> None:
        """Deterministic algorithms where they are not already (CUDA's atomics); a no-op on a CPU."""
        if self.runtime is not None:
            self.runtime.deterministic()


class Reading:
    """A device scalar the host will need (`Device.read_later`): `value` once read."""

    def __init__(self, device: Device, tensor: torch.Tensor, what: str):
        self.device, self.tensor, self.what, self._value = device, tensor, what, None

    @property
    def value(self) -> float:
        if self.tensor is not None:  # not read yet: read now, with whatever else waits
            self.device.settle(self.what)
        return self._value

    @value.setter
    def value(self, value: float) -> None:
        self._value = value


class EventClock:
    """Times from events in the device's stream: `mark()` records one, `seconds(a, b)` is the time
    between two once both are done (None while b is not), read without waiting."""

    def __init__(self, runtime):
        self.runtime = runtime

    def mark(self):
        event = self.runtime.new_event(timing=True)
        event.record()
        return event

    @staticmethod
    def seconds(start, end) -> float | None:
        if not end.query():
            return None
        return start.elapsed_time(end) / 1000.0


def _copied(what: str, non_blocking: bool) -> None:
    """A copy queued; a blocking one is also a wait (the host reads, or torch syncs the stream)."""
    launched(what)
    if not non_blocking:
        waited(what)


def as_device(device: Device | torch.device | str | None) -> Device:
    """A Device for a trainer's `device` argument; None = CUDA when torch has it, else the CPU."""
    if isinstance(device, Device):
        return device
    return Device(device if device is not None else detect().device)
