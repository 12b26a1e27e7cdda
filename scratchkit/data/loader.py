"""Batches made ahead of the trainer, off the step's path, as torch's DataLoader makes them with
workers and `pin_memory`: while step b trains, threads of their own make batches b+1, b+2, ...

    loader = BatchLoader(source, table_sizes, start, stop, ahead=2, pin=dev.pin, workers=1)
    batch = loader.take(b)    # batch b: made already (or waited for), through the door, pinned
    loader.close()            # the threads stop (also `with BatchLoader(...) as loader:`)

`workers` threads each make whole batches, the next index not yet taken by another: a source
makes any batch on demand, in any order, on any thread (data/synthetic.py), so a batch is the same
whatever the count, and `workers` batches are made at once where one core cannot keep up with the
device (NumPy lets go of the interpreter's lock in its array loops).

What it promises, and why each:

- The source's batches, value for value. `take(b)` is `source.batch(b)`; on a GPU its arrays are
  copied into page-locked memory (`pin`, the Device's: its copies to the device may then be
  asynchronous), so a batch trains exactly as it would have, made on the step's path.
- The door runs here (data/checks.py), off the step's path too. What making or checking batch b
  raised (a BadBatchError naming the batch, or the source's own error) is kept with b and raised
  by `take(b)`: in the step that would train b, never earlier, so a step is still all or nothing
  and its message is the same as every trainer's. After an error no thread starts another batch.
- In order, each batch once. The threads make start, start+1, ... up to `ahead` batches (at
  least one a worker) beyond those taken, never one at or past `stop` (a `train()` call's end: a call never reads a batch
  it does not train). A batch is handed out once: `take(i)` for any index other than the next
  (a step taken again after it failed, a batch read again once its source was repaired) drops
  what was made and starts again at i, from the source: nothing stale is ever trained.
- Nothing outlives `close()`: the threads are joined (each finishes the batch it is making first).
  Ctrl-C lands in the trainer's thread, between steps (trainers/interrupt.py); the `train()`
  loop's exit closes its loader, as does an error.

`ahead=0` keeps no thread: `take(b)` makes batch b right there, in the caller's thread (a call of
one step, where a thread could not get ahead), unpinned. The threads' host waits, if a source has
any, count on the loader's path (device_work.Path.DATA), not on Train's.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import replace

import numpy as np
import torch

from scratchkit.data.checks import check_batch
from scratchkit.device_work import Path, on_path

KEPT = 2  # batches handed out that the loader keeps alive (`BatchLoader._handed`)


def pinned(batch, pin):
    """`batch` with each array copied into page-locked memory by `pin` (host tensor -> pinned
    copy): the arrays are NumPy views of the pinned tensors, which they keep alive. Other fields
    (a routed batch's) are kept as they are."""

    def page_locked(array):
        array = np.asarray(array)
        tensor = torch.from_numpy(array if array.flags.writeable else array.copy())
        return pin(tensor).numpy()

    return replace(
        batch,
        dense=page_locked(batch.dense),
        ids=tuple(page_locked(i) for i in batch.ids),
        offsets=tuple(page_locked(o) for o in batch.offsets),
        labels=page_locked(batch.labels),
    )


class _Made:
    """Batch `index` as made: the batch, or what making or checking it raised."""

    __slots__ = ("batch", "error")

    def __init__(self, batch=None, error: BaseException | None = None):
        self.batch, self.error = batch, error

    def get(self):
        if self.error is not None:
            raise self.error
        return self.batch


class BatchLoader:
    """Batches start..stop-1 of `source` made ahead on `workers` threads (module docstring)."""

    def __init__(self, source, table_sizes, start: int, stop: int, ahead: int = 2, pin=None, workers: int = 1):
        if ahead < 0 or workers < 1:
            raise ValueError(f"a loader needs ahead >= 0 batches and workers >= 1, got {ahead} and {workers}")
        self.source, self.table_sizes, self.stop = source, tuple(table_sizes), stop
        self.ahead = max(ahead, workers) if ahead > 0 else 0  # room for every worker's batch
        # pinned by the threads only: on the step's path a copy into pinned memory would cost what
        # the copy from pageable memory it saves costs (CUDA stages that through pinned memory)
        self.pin = pin if ahead > 0 else None
        self._cond = threading.Condition()
        self._wanted = start  # the next batch the trainer takes
        self._next = start  # the next batch the thread makes
        self._made: dict[int, _Made] = {}  # made, not yet taken
        # the last batches handed out, kept alive: a non-blocking copy from a pinned batch's NumPy
        # views is one torch's host allocator cannot see, so their pinned memory must not be freed
        # (and handed to the next batch) until the step that copied them has waited for the
        # device, as each step does for its loss
        self._handed: deque = deque(maxlen=KEPT)
        self._generation = 0  # a restart's number: a batch made before it is dropped
        self._stopped_at_error = False
        self._closed = False
        self._broken: BaseException | None = None  # the thread's own failure (a bug), for `take`
        self._threads = [
            threading.Thread(target=self._run, name="batch-loader", daemon=True) for _ in range(workers if ahead else 0)
        ]
        for thread in self._threads:
            thread.start()

    def make(self, index: int):
        """Batch `index` made here and now: read, checked at the door, pinned."""
        batch = self.source.batch(index)
        # the model's dense width is its source's (trainers/base.py builds it from this one)
        check_batch(batch, self.table_sizes, index, num_dense=self.source.num_dense)
        return batch if self.pin is None else pinned(batch, self.pin)

    def take(self, index: int):
        """Batch `index`, once made; raises what making it raised (module docstring). A batch at
        or past `stop`, which the thread never makes, is made here."""
        if not self._threads or index >= self.stop:
            return self.make(index)
        with self._cond:
            if self._closed:
                raise RuntimeError("the batch loader is closed")
            if index not in self._made and (index != self._wanted or self._stopped_at_error):
                self._generation += 1  # not the next batch, or none comes after an error: start again
                self._made.clear()
                self._next, self._stopped_at_error = index, False
            for passed in [k for k in self._made if k < index]:
                del self._made[passed]
            self._wanted = index + 1  # the thread may make up to `ahead` beyond this one
            self._cond.notify_all()
            while index not in self._made:
                if self._broken is not None:
                    raise RuntimeError("a batch loader's thread failed") from self._broken
                self._cond.wait()
            made = self._made.pop(index)
            self._handed.append(made)
        return made.get()

    def close(self) -> None:
        """Stop the threads (each after the batch it is making) and drop what was made. Safe twice."""
        with self._cond:
            self._closed = True
            self._made.clear()
            self._cond.notify_all()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- the thread --------------------------------------------------------------------------------
    def _room(self) -> bool:
        """Whether a thread may take batch `_next` to make now."""
        return not self._stopped_at_error and self._next < self.stop and self._next < self._wanted + self.ahead

    def _run(self) -> None:
        try:
            with on_path(Path.DATA):
                self._make_ahead()
        except BaseException as error:  # noqa: BLE001 - a bug here: `take` says so, never hangs
            with self._cond:
                self._broken = error
                self._cond.notify_all()

    def _make_ahead(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._room():
                    self._cond.wait()
                if self._closed:
                    return
                index, generation = self._next, self._generation
                self._next += 1  # this thread's; the others take the ones after it
            try:
                made = _Made(self.make(index))
            except Exception as error:  # kept for the step that would train batch `index`
                made = _Made(error=error)
            with self._cond:
                if generation == self._generation and not self._closed:
                    self._made[index] = made
                    self._stopped_at_error |= made.error is not None
                    self._cond.notify_all()


__all__ = ["BatchLoader", "pinned"]
