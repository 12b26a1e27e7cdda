"""What every trainer shares: construction from a config, the dense step, per-step records.

A trainer consumes batches 0, 1, 2, ... of its source. `train(steps)` yields one `StepRecord` per
step. All trainers compute the same math; they differ only in where embedding rows live and how
they get to the computation, which is what the stage timers make visible.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

from scratchkit.allocator import keep_step_memory
from scratchkit.config import OnNonFiniteLoss, TrainConfig
from scratchkit.data.loader import BatchLoader
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.device import Device, as_device
from scratchkit.device_work import DeviceWork, Path, snapshot
from scratchkit.model import init_dense_model
from scratchkit.embedding.optim import make_dense_optimizer
from scratchkit.embedding.table_batched import BackwardWorkspace, Coalesced, embedding_backward_tables
from scratchkit.embedding.tbe_native import set_host_threads
from scratchkit.embedding.tables import HostTables
from scratchkit.trainers.timing import StageTimer
from scratchkit.trainers.interrupt import InterruptFlag


class StepTornError(RuntimeError):
    """A step failed inside its update, part of it applied; the trainer trains no further."""


class NonFiniteLossError(ValueError):
    """A step's loss was NaN or infinite; the message names the step."""


@dataclass
class StepRecord:
    """One training step: the loss, the speed, and where the time went."""

    step: int
    loss: float
    samples: int
    seconds: float
    stage_seconds: dict[str, float] = field(default_factory=dict)
    lookups: int = 0  # embedding lookups in the step
    hits: int | None = None  # lookups served by the device-side cache (None: trainer has none)
    fetched_rows: int = 0  # rows copied host -> device for the step
    written_back_rows: int = 0  # rows copied device -> host for the step
    evicting_tables: int = 0  # tables that chose victims for the step (its victim choice ran)
    stale_reads: int = 0  # rows read from the host before a pending write-back landed
    # what Train's path asked of the device in the step (device_work.py): the times the host
    # waited for it, by cause, and the kernels and copies it queued, as the device layer counts
    # them (torch's own ops too where `device_ops.counting_ops` is on: bench's counted step)
    host_syncs: int = 0
    kernel_launches: int = 0
    waits: dict[str, int] = field(default_factory=dict)
    launches: dict[str, int] = field(default_factory=dict)

    def count_work(self, work: DeviceWork) -> None:
        """Take the step's waits and launches (a difference of two `device_work.snapshot`s)."""
        self.host_syncs, self.kernel_launches = work.host_syncs, work.kernel_launches
        self.waits, self.launches = dict(work.waits), dict(work.launches)

    plan_syncs: int = 0  # times ScratchPipe's Plan of the step's batch waited for the device
    plan_launches: int = 0  # kernels (and array-library calls) that Plan launched on the device

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else float("inf")

    def to_dict(self) -> dict:
        return asdict(self) | {"samples_per_s": self.samples_per_s}


class Trainer(ABC):
    """Construct from a `TrainConfig` (and optionally a batch source); call `train(steps)`.

    device: a torch device name, or a `scratchkit.device.Device` (tests pass one with a stand-in
    CUDA runtime); None = CUDA when torch has it, else the CPU. `self.dev` makes every CUDA-only
    call (pinning, copies, streams, syncs), `self.device` is its torch device.
    """

    name: str = "?"

    def __init__(self, config: TrainConfig, source=None, device: Device | str | None = None):
        self.config = config
        self.source = source if source is not None else SyntheticSource(config.data)
        if tuple(self.source.table_sizes) != tuple(config.data.table_sizes):
            raise ValueError(
                f"the source's table sizes {tuple(self.source.table_sizes)} differ from "
                f"the config's {config.data.table_sizes}: make the config from the "
                f"source, scratchkit.data.config_for(source) (scratchkit.data.open "
                f"returns both)"
            )
        self.dev = as_device(device)
        self.device = self.dev.torch
        if config.cpu_threads is not None:
            torch.set_num_threads(config.cpu_threads)  # process-wide, like the switch below
        # the host's embedding loops: the config's threads, less the cores the run's other
        # processes take; set again before each step (trainers may alternate steps)
        self.host_threads = config.host_threads(self.reserved_cores())
        set_host_threads(self.host_threads)
        keep_step_memory()  # a step's temporaries reused (allocator.py)
        if config.deterministic:
            self.dev.make_deterministic()  # CUDA's atomics; the CPU's ops already are
        num_tables = len(config.data.table_sizes)
        self.model = init_dense_model(config.model, self.source.num_dense, num_tables, config.seed).to(self.device)
        self.dense_optimizer = make_dense_optimizer(self.model.parameters(), config.optimizer)
        self.timer = StageTimer(events=self.dev.stage_clock())
        self.backward_workspace = BackwardWorkspace()  # the C++ backward's buffers, step after step
        self.next_batch = 0  # index of the batch the next step trains on
        self.call_end = 0  # the running train() call trains batches up to, not including, this
        # where steps take their batches: the running call's loader, else one that makes each
        # batch as it is taken (`_loading`)
        self.loader = self.batch_loader(0, len(self.source), 0)
        self.torn: str | None = None  # why this trainer trains no further (`update_weights`)

    # --- the interface -------------------------------------------------------------------------
    def train(self, steps: int) -> Iterator[StepRecord]:
        """Train `steps` more steps, yielding a record after each.

        Ctrl-C lands between steps (scratchkit/trainers/interrupt.py): the step in flight
        finishes and is yielded, then the next iteration raises KeyboardInterrupt.
        """
        interrupted = InterruptFlag()
        batches = self._steps(steps)
        self.call_end = batches.stop
        with self._loading(batches):
            for _ in batches:
                set_host_threads(self.host_threads)  # process-wide: another trainer may have run between
                before = snapshot(Path.TRAIN)
                with interrupted:
                    record = self.train_step()
                record.count_work(snapshot(Path.TRAIN) - before)
                yield record
                if interrupted.raised:
                    raise KeyboardInterrupt

    @contextmanager
    def _loading(self, batches: range):
        """While inside: `self.loader` makes this call's batches ahead on threads of its own
        (data/loader.py), closed however the call ends. A call of one step makes its batch in
        the step, as does a step taken outside a call (`train_step()`)."""
        ahead = self.config.batches_ahead if len(batches) > 1 else 0
        self.loader = self.batch_loader(batches.start, batches.stop, ahead)
        try:
            yield
        finally:
            self.loader.close()
            self.loader = self.batch_loader(self.next_batch, len(self.source), 0)

    def batch_loader(self, start: int, stop: int, ahead: int) -> BatchLoader:
        """A loader of batches start..stop-1 of the source, `ahead` of the trainer (0: made when
        taken), checked at the door and, on a GPU, pinned."""
        pin = self.dev.pin if self.dev.is_cuda else None
        sizes, workers = self.config.data.table_sizes, self.config.loader_threads
        return BatchLoader(self.source, sizes, start, stop, ahead, pin=pin, workers=workers)

    def _steps(self, steps: int) -> range:
        """The batch indices the next `steps` steps train on, checked against the source."""
        if self.torn is not None:
            raise StepTornError(self.torn)
        if steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps}")
        end = self.next_batch + steps
        if end > len(self.source):
            raise ValueError(f"the source has {len(self.source)} batches; cannot train up to batch {end}")
        return range(self.next_batch, end)

    def reserved_cores(self) -> int:
        """Cores this trainer's run keeps from its host embedding loops when the config leaves their
        threads to the machine, beside the batch loader's (`TrainConfig.host_threads`): 0, as it
        runs in this process alone."""
        return 0

    @abstractmethod
    def train_step(self) -> StepRecord:
        """Train on batch `self.next_batch` and advance."""

    @abstractmethod
    def embedding_weights(self) -> list[torch.Tensor]:
        """Complete, current rows of every table, on the host (caches flushed first)."""

    def embedding_state(self) -> list[torch.Tensor | None]:
        """Optimizer state of every table's rows, on the host (None for SGD)."""
        return [None] * len(self.config.data.table_sizes)

    def close(self) -> None:
        """Flush and stop anything running (the batch loader's thread, if a call left one
        running: a loop not yet finished). Safe to call twice."""
        self.loader.close()

    def make_tables(self, pin: bool = True) -> HostTables:
        """The host tables this trainer starts from: drawn from the config's seed
        (`init_embedding_weights`), pinned on a GPU if `pin`. A sharded rank's trainer starts
        from its shard of the global tables, or from a checkpoint, instead
        (scratchkit/distributed/shard.py overrides this)."""
        return HostTables(
            self.config.data.table_sizes,
            self.config.model.dim,
            self.config.optimizer,
            self.config.seed,
            pin=self.dev.pin if pin else None,
        )

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- shared pieces ---------------------------------------------------------------------------
    def load_batch(self, batch=None):
        """Batch `next_batch` (`batch`, if the trainer took it from its loader already) with its ids
        and offsets as host tensors. The loader made it ahead and checked it at the door
        (scratchkit/data/checks.py): a bad batch raises here, before any of its step is trained.
        What is left on the step's path is the wait for it, if it is not made yet."""
        batch = self.loader.take(self.next_batch) if batch is None else batch
        ids = [torch.from_numpy(i) for i in batch.ids]
        offsets = [torch.from_numpy(o) for o in batch.offsets]
        return batch, ids, offsets

    def embedding_backward(self, ids, offsets, grad: torch.Tensor, num_rows: list[int], addresses=None) -> Coalesced:
        """Every table's distinct ids and summed gradients (table_batched.embedding_backward_tables),
        in the config's summation order, into this trainer's buffers (valid until the next call)."""
        return embedding_backward_tables(
            ids,
            offsets,
            grad,
            num_rows,
            addresses=addresses,
            workspace=self.backward_workspace,
            order=self.config.summation_order,
        )

    def dense_step(self, batch, pooled: torch.Tensor, step: int) -> tuple[float, torch.Tensor]:
        """Forward and backward of the MLPs on the device; their gradients wait in `.grad` for
        `update_weights`, so nothing here changes a weight.

        pooled [B, T, dim] on the device -> (loss, grad of pooled [B, T, dim]). A non-finite loss
        stops here, before the backward pass (`TrainConfig.nonfinite_loss` may let it through).
        The loss's read is the step's one wait for the device (`Device.read`).
        """
        loss, value, pooled = dense_loss(self.model, self.dev, batch, pooled, step, self.config.nonfinite_loss)
        self.dense_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        return value, pooled.grad

    def update_weights(self, update_tables: Callable[[], None]) -> None:
        """The one place a step changes weights: the dense optimizer's step, then the tables'
        (`update_tables`, which marks what it changed, e.g. dirty cache rows). Then the step
        counts as trained: `next_batch` moves on.

        Every part of a step that can fail (the door, the fetches, the forward and backward
        passes) runs before this, so a step that fails there has changed nothing and is simply
        taken again. A failure in here leaves part of the step applied; no undo would be cheaper
        than a checkpoint, so the trainer says so and refuses every later step (StepTornError).
        """
        if self.torn is not None:
            raise StepTornError(self.torn)
        step = self.next_batch
        try:
            with self.timer.stage("mlp"):  # the MLPs' time includes their optimizer, as priced
                self.dense_optimizer.step()
            with self.timer.stage("update"):
                update_tables()
        except Exception as error:
            self.torn = (
                f"step {step} failed inside its update ({type(error).__name__}: {error}), "
                "with part of it applied, so this trainer trains no further: resume from a "
                "checkpoint or start again"
            )
            raise StepTornError(self.torn) from error
        self.next_batch = step + 1

    def make_record(self, loss: float, batch, started: float, **counters) -> StepRecord:
        """The record of the step `update_weights` just counted as trained."""
        return StepRecord(
            step=self.next_batch - 1,
            loss=loss,
            samples=batch.batch_size,
            seconds=time.perf_counter() - started,
            stage_seconds=self.timer.take(),
            lookups=batch.lookups(),
            **counters,
        )


def dense_loss(
    model, dev: Device, batch, pooled: torch.Tensor, step: int, nonfinite_loss: OnNonFiniteLoss
) -> tuple[torch.Tensor, float, torch.Tensor]:
    """The dense model's loss on `batch`: (loss, its value, `pooled` [B, T, dim] as a leaf whose
    .grad the backward fills). The value is read from the device with whatever the step asked to
    read later (`Device.read`): the step's one wait. A NaN or infinite loss raises NonFiniteLossError naming the step, before any
    backward, unless `nonfinite_loss` is CONTINUE. Every trainer's dense step starts here (and a
    sharded rank's: scratchkit/distributed/replica.py)."""
    dense, labels = dev.to_device_together([torch.from_numpy(batch.dense), torch.from_numpy(batch.labels)])
    pooled = pooled.detach().requires_grad_(True)
    loss = F.binary_cross_entropy_with_logits(model(dense, pooled), labels)
    value = dev.read(loss)  # the step's one wait: with it, whatever the step asked to read later
    if not math.isfinite(value) and nonfinite_loss is OnNonFiniteLoss.RAISE:
        raise NonFiniteLossError(
            f"step {step}: the loss is {value}, so training stopped before "
            "this step changed any weight (nonfinite_loss='continue' in "
            "TrainConfig trains on)"
        )
    return loss, value, pooled


class HostTablesTrainer(Trainer):
    """A trainer whose tables live in host memory, `self.tables`, perhaps cached on the device.

    `flush()` writes changed cached rows back; after it the host tables are complete, which is
    what `embedding_weights()`, `embedding_state()` and `close()` rely on.
    """

    def __init__(self, config: TrainConfig, source=None, device: Device | str | None = None):
        super().__init__(config, source, device)
        self.tables = self.make_tables()

    def flush(self) -> int:
        """Write cached changes back to the host tables; returns the rows written."""
        return 0

    def embedding_weights(self):
        self.flush()
        return list(self.tables.weights)

    def embedding_state(self):
        self.flush()
        return list(self.tables.state)

    def close(self) -> None:
        self.flush()
        super().close()
