"""Stand-ins for what only a GPU has, so the kit's GPU code paths run in CI on a CPU.

`StandInCuda` is a CUDA runtime for `scratchkit.device.Device`: the trainers' CUDA lines (pinning,
copies, side stream, syncs) run on the CPU and every call is recorded (tests/test_device.py).

`StandInCupy` is the names of the cupy module that `CupyLauncher` uses (and asarray/asnumpy,
which a kernel puzzle's check uses to move its arrays). The launcher
compiles with the real NVRTC (kernels-ci extra), caches and loads the real cubin; the stand-in's
RawModule looks each kernel up in that cubin's symbol table, as cuModuleGetFunction would, and its
kernels check the argument types CuPy would pack (8-byte ints, 4-byte floats, arrays) against the
signature before running the same `.cu` kernel through the host build, serially. So a name the
cubin lacks, or a scalar of the wrong width, fails in CI; results are compared with the twins by
the kernel tests, which run this engine next to the others (conftest.py's `engine` fixture).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from scratchkit.kernels.compiled import PTX_PARAM, cubin_functions, ptx_entries
from scratchkit.kernels.signatures import KERNELS

# The NumPy scalar CuPy must be handed for a scalar parameter of each PTX type: it packs the
# scalar's own bytes (a Python int would go in as whatever CuPy picks, not the kernel's width).
_SCALAR_FOR = {"u64": np.int64, "f32": np.float32}


class StandInKernel:
    """`kernel((grid,), (block,), args)`, checked like a launch, run by the host build."""

    def __init__(self, name: str, host_launcher, launches: list):
        self.name, self.host, self.launches = name, host_launcher, launches

    def __call__(self, grid: tuple, block: tuple, args: tuple) -> None:
        kernel = KERNELS[self.name]
        if len(grid) != 1 or len(block) != 1 or len(args) != len(kernel.args):
            raise TypeError(
                f"{self.name}: launched with grid {grid}, block {block} and "
                f"{len(args)} arguments; the kernel takes {len(kernel.args)}"
            )
        for position, (arg, kind) in enumerate(zip(args, kernel.args)):
            wanted = np.ndarray if kind.is_array else _SCALAR_FOR[PTX_PARAM[kind]]
            if type(arg) is not wanted:
                raise TypeError(
                    f"{self.name} argument {position}: CuPy would pack a "
                    f"{type(arg).__name__}, the kernel reads {kind.value}"
                )
        self.launches.append((self.name, grid[0], block[0]))
        self.host.launch(self.name, grid[0], block[0], args)


class StandInModule:
    """`RawModule(path=...)`: the compiled file, its kernels found by name as the driver would."""

    def __init__(self, path: str, host_launcher, launches: list):
        data = Path(path).read_bytes()
        self.path = path
        self.exported = cubin_functions(data) if data[:4] == b"\x7fELF" else set(ptx_entries(data.decode()))
        self.host, self.launches = host_launcher, launches

    def get_function(self, name: str) -> StandInKernel:
        if name not in self.exported:  # CUDA_ERROR_NOT_FOUND from cuModuleGetFunction
            raise RuntimeError(f"named symbol not found: {name!r} in {self.path}")
        return StandInKernel(name, self.host, self.launches)


class StandInCupy:
    """The cupy names `CupyLauncher` uses, for a device of `compute_capability` (e.g. 90)."""

    def __init__(self, compute_capability: int, host_launcher):
        self.launches: list[tuple[str, int, int]] = []  # (kernel, grid, block) per launch
        self.modules: list[StandInModule] = []
        device = SimpleNamespace(compute_capability=str(compute_capability))
        self.cuda = SimpleNamespace(Device=lambda: device)
        self._host = host_launcher

    @staticmethod
    def asarray(array) -> np.ndarray:
        """cupy.asarray: here the "device" array is a NumPy copy (a kernel puzzle moves its inputs so)."""
        return np.array(array, copy=True)

    @staticmethod
    def asnumpy(array) -> np.ndarray:
        return np.asarray(array)

    def RawModule(self, path: str) -> StandInModule:  # noqa: N802 (cupy's name)
        module = StandInModule(path, self._host, self.launches)
        self.modules.append(module)
        return module


class StandInStream:
    def __init__(self, number: int):
        self.number = number

    def __repr__(self) -> str:
        return f"stream{self.number}"


class StandInEvent:
    """A CUDA event that records its calls and the wall time it was recorded at: the host runs the
    work before it at once, so it is done as soon as it is recorded."""

    def __init__(self, runtime: "StandInCuda", timing: bool):
        self.runtime, self.timing, self.at = runtime, timing, None

    def record(self) -> None:
        self.at = time.perf_counter()
        self.runtime._record("record_event", event=self)

    def synchronize(self) -> None:
        self.runtime._record("synchronize_event", event=self)

    def query(self) -> bool:
        return self.at is not None

    def elapsed_time(self, end: "StandInEvent") -> float:
        if not (self.timing and end.timing):
            raise RuntimeError("elapsed_time needs two events made with enable_timing=True")
        return (end.at - self.at) * 1000.0


class StandInCuda:
    """A CUDA runtime for `scratchkit.device.Device` that records every call, with the calling
    thread and the stream in use, and keeps the tensors on the CPU: `Device("cpu", StandInCuda())`
    makes a trainer run its CUDA lines in CI. `pin` returns a copy it remembers, so a test can ask
    whether an asynchronous copy really came from pinned memory. Train's kernels run on the
    `kernels` engine given to the Device (default: the embedding layer's choice, the NumPy twins);
    `cupy_stand_in_engine` (conftest.py) runs the CuPy launcher's own lines instead."""

    def __init__(self):
        self.calls: list[tuple[str, str, dict]] = []  # (thread name, call, details)
        self._pinned: dict[int, object] = {}  # data_ptr -> the pinned copy (kept alive)
        self._lock = threading.Lock()
        self._stream = threading.local()  # the stream each thread has entered
        self._streams = 0

    def _record(self, call: str, **details) -> None:
        details.setdefault("stream", getattr(self._stream, "current", None))
        with self._lock:
            self.calls.append((threading.current_thread().name, call, details))

    def calls_of(self, thread: str | None = None) -> list[tuple[str, dict]]:
        with self._lock:
            return [(c, d) for t, c, d in self.calls if thread is None or t == thread]

    def is_pinned(self, tensor) -> bool:
        return tensor.data_ptr() in self._pinned

    # ---- the runtime interface (scratchkit.device.TorchCuda)
    def pin(self, tensor):
        pinned = tensor.clone()
        with self._lock:
            self._pinned[pinned.data_ptr()] = pinned
        self._record("pin", shape=tuple(tensor.shape))
        return pinned

    def to_device(self, tensor, device, non_blocking: bool):
        self._record("to_device", non_blocking=non_blocking, pinned=self.is_pinned(tensor), shape=tuple(tensor.shape))
        return tensor.to(device)

    def to_host(self, tensor, non_blocking: bool):
        self._record("to_host", non_blocking=non_blocking, shape=tuple(tensor.shape))
        return tensor

    def new_stream(self) -> StandInStream:
        with self._lock:
            self._streams += 1
            stream = StandInStream(self._streams)
        self._record("new_stream", created=stream)
        return stream

    @contextmanager
    def use_stream(self, stream):
        self._record("enter_stream", entered=stream)
        previous, self._stream.current = getattr(self._stream, "current", None), stream
        try:
            yield
        finally:
            self._stream.current = previous
            self._record("exit_stream", exited=stream)

    def synchronize_stream(self, stream) -> None:
        self._record("synchronize_stream", waited=stream)

    def synchronize_current_stream(self) -> None:
        self._record("synchronize_current_stream")

    def synchronize(self) -> None:
        self._record("synchronize")

    def synchronize_kernels(self) -> None:
        self._record("synchronize_kernels")

    @contextmanager
    def kernel_stream(self):
        self._record("enter_kernel_stream")
        yield

    def new_event(self, timing: bool = False) -> StandInEvent:
        return StandInEvent(self, timing)

    def deterministic(self) -> None:
        self._record("deterministic")


def scratchpipe_at(where: str, config, source=None, **options):
    """ScratchPipe with its stages at `where` (drivers.PlanIn's names): "device" is the trainer that
    plans there (scratchpipe-device, on `options`' device), any other place the host planner's."""
    from scratchkit.trainers.scratchpipe import DeviceScratchPipeTrainer, ScratchPipeTrainer

    if where == "device":
        return DeviceScratchPipeTrainer(config, source, **options)
    return ScratchPipeTrainer(config, source, where=where, **options)
