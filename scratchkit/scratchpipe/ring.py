"""How plans cross from a forked process to the trainer: their arrays through shared memory.

A plan is mostly arrays (hundreds of KB for the `small` profile). Pickled whole through the pipe,
it is copied four times and costs the trainer about a millisecond a step, in its own process and
under its GIL. Here the arrays go out of band (pickle protocol 5) into one slot of a ring of
shared memory, mapped before the fork; only the pickle's skeleton (a few KB) goes through the pipe.
The trainer copies the slot out in one memcpy, frees it, and unpickles the skeleton over the copy:
its arrays are private and writable, whatever happens to the slot next.

    planner process                               trainer
    free.acquire(); arrays -> slot[k % slots]
    pipe <- (skeleton, array sizes, k)    ---->   copy slot[k % slots]; free.release(); loads

The ring holds `slots` plans; a planner that gets that far ahead waits for a free slot. A plan too
big for a slot (the size is an estimate) crosses the pipe whole instead: slower, still right.
"""

from __future__ import annotations

import mmap
import pickle
from typing import Callable

ALIGN = 64  # each array starts on a cache line, so the copies are aligned as NumPy likes them
PIPE_BYTES = 4 << 20  # room for a few plans' skeletons in the pipe; Linux caps it at fs/pipe-max-size
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, named in the fcntl module only from Python 3.10 on Linux


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


class PlanRing:
    """Shared memory for `slots` plans of up to `slot_bytes` bytes of arrays each.

    Make it before forking; `pack` runs in the planner process, `unpack` in the trainer.
    """

    def __init__(self, context, slot_bytes: int, slots: int = 4, poll: float = 0.05):
        if slot_bytes <= 0 or slots <= 0:
            raise ValueError(f"a plan ring needs positive sizes, got {slots} slots of {slot_bytes} bytes")
        self.slot_bytes, self.slots, self.poll = _aligned(slot_bytes), slots, poll
        # anonymous and shared: the forked planner writes the very pages the trainer reads
        self.memory = mmap.mmap(-1, self.slot_bytes * slots)
        self.free = context.Semaphore(slots)  # slots the planner may write
        self._sent = 0  # plans put in the ring (planner side)
        self._taken = 0  # plans taken out of it (trainer side)

    def pack(self, obj, halted: Callable[[], bool] = lambda: False) -> tuple | None:
        """In the planner: a message for the pipe. Waits while every slot is in use, looking at
        `halted` every `poll` seconds; None once it says the trainer stopped."""
        buffers: list[pickle.PickleBuffer] = []
        skeleton = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        raws = [b.raw() for b in buffers]  # contiguous byte views of each array
        sizes = [r.nbytes for r in raws]
        if sum(_aligned(n) for n in sizes) > self.slot_bytes:
            return ("inline", pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        while not self.free.acquire(timeout=self.poll):
            if halted():
                return None
        offset = (self._sent % self.slots) * self.slot_bytes
        for raw, n in zip(raws, sizes):
            self.memory[offset : offset + n] = raw
            offset += _aligned(n)
        self._sent += 1
        return ("ring", skeleton, sizes)

    def unpack(self, message: tuple):
        """In the trainer: the object `pack` was given, its arrays in private memory."""
        if message[0] == "inline":
            return pickle.loads(message[1])
        _, skeleton, sizes = message
        start = (self._taken % self.slots) * self.slot_bytes
        used = sum(_aligned(n) for n in sizes)
        copy = bytearray(memoryview(self.memory)[start : start + used])  # one memcpy; then it is free
        self._taken += 1
        self.free.release()
        view, offset, buffers = memoryview(copy), 0, []
        for n in sizes:
            buffers.append(view[offset : offset + n])
            offset += _aligned(n)
        return pickle.loads(skeleton, buffers=buffers)

    def close(self) -> None:
        self.memory.close()


def widen_pipe(conn) -> None:
    """Let a whole message sit in the pipe, so it crosses in one write and one read rather than
    in 64 KB turns of the two processes (Linux: F_SETPIPE_SZ; elsewhere nothing)."""
    try:
        import fcntl  # POSIX only; only a forked process (Linux) gets here

        with open("/proc/sys/fs/pipe-max-size") as limit:
            size = min(int(limit.read()), PIPE_BYTES)
        fcntl.fcntl(conn.fileno(), F_SETPIPE_SZ, size)
    except (OSError, ValueError):
        pass
