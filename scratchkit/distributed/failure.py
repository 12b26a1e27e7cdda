"""When a rank fails: every rank stops, within a bounded time, and says which rank failed and why.

A rank can fail three ways, and each reaches the others differently:

    it raises    its handler posts a report to the job's store (`report`) and exits; its peers'
                 next collective fails at once ("Connection closed by peer")
    it dies      (SIGKILL, a crash by signal) no report; its peers' next collective fails at
                 once, and its `ProgressBoard` posts stop
    it hangs     no report, no exit; its peers wait in their next collective until the process
                 group's timeout (`hang_timeout`) and then fail

A collective that fails raises `PeerLost` (exchange.py, replica.py). The rank that sees it asks
`diagnose` who is to blame before it reports and exits: a rank that posted a report of its own
error; else a rank whose board went quiet (dead); else the rank furthest behind (hung). The job's
store outlives any rank (torchrun's agent hosts it, or scratchkit's launcher: launch.py), so the
reports are there to read. The launcher then stops what is left (launch.py states the bounds).

Faults for the tests: `Fault.parse("raise@1:3")` raises in rank 1 as Train(3) reaches the
exchanges; "kill@1:3" SIGKILLs it there; "hang@1:3" makes it sleep forever.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from enum import Enum

from scratchkit.choices import parse_choice

PREFIX = "scratchkit/"
POST_EVERY = 0.5  # seconds between a board's posts
QUIET = 3.0  # a board silent this long belongs to a dead rank
# a step's phases in order: the rank furthest behind in (step, phase) is the one the others wait for
PHASES = ("train", "all_to_all ids", "all_to_all rows", "dense", "all_gather dense", "all_to_all gradients", "update")


class PeerLost(RuntimeError):
    """A collective failed: a peer died, hung past the timeout, or raised and left."""

    def __init__(self, step: int, phase: str, error: BaseException):
        self.step, self.phase = step, phase
        super().__init__(f"step {step}: {phase} failed: {backend_words(error)}")


def backend_words(error: BaseException) -> str:
    """A backend's error in a few words: gloo's source location and its advice left out."""
    text = (str(error).splitlines() or [repr(error)])[0]
    text = re.sub(r"\[[^\]]*\.(cc|cpp|h):\d+\] ", "", text)
    return text.split(" This is typically caused")[0].strip()


class ProgressBoard:
    """This rank's step and phase in the job's store, posted by a thread every POST_EVERY s.

    The thread also watches the launcher: if this rank's parent dies (a launcher killed, or one
    that crashed), the rank kills its own process group (itself and what it forked) instead of
    living on as an orphan that may wait for a hung peer forever.

    `enter(step, phase)` costs the training loop an assignment (and, when the step changes, an
    event set: the thread then posts at once, so even a rank killed right after is seen at its
    step). The thread posts the latest with when it was entered and when it was posted, so a
    reader tells a rank stuck in a phase (posted lately, entered long ago) from a dead one
    (posted long ago)."""

    def __init__(self, store, rank: int):
        self.store, self.rank = store, rank
        self.where = (0, "train", time.time())
        self._stopped = False
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._post, name="scratchkit-board", daemon=True)

    def start(self) -> "ProgressBoard":
        self._thread.start()
        return self

    def enter(self, step: int, phase: str) -> None:
        if step != self.where[0]:
            self._wake.set()
        self.where = (step, phase, time.time())

    def _post(self) -> None:
        parent = os.getppid()
        while not self._stopped:
            stop_if_orphaned(parent)
            step, phase, since = self.where
            try:
                self.store.set(
                    f"{PREFIX}progress/{self.rank}",
                    json.dumps({"step": step, "phase": phase, "since": since, "posted": time.time()}),
                )
            except Exception:  # noqa: BLE001 - the store is gone: the job is ending anyway
                return
            self._wake.wait(POST_EVERY)
            self._wake.clear()

    def stop(self) -> None:
        """Stop posting, and wait (a second at most) for the thread to be out of the store: a
        daemon thread still inside a store call when the interpreter exits aborts the process
        ("terminate called without an active exception", seen in 1 of 7 runs on a busy machine)."""
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)


def stop_if_orphaned(parent: int) -> None:
    """If this process's parent is no longer `parent` (the launcher died), kill this rank: its
    whole process group when it leads one (launch.py and torchrun start ranks so), else itself."""
    if os.getppid() == parent:
        return
    if os.getpgid(0) == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(1)


def _read(store, key: str) -> dict | None:
    try:
        return json.loads(store.get(key)) if store.check([key]) else None
    except Exception:  # noqa: BLE001 - a store that is gone reads as nothing
        return None


def read_progress(store, world_size: int) -> dict[int, dict | None]:
    return {r: _read(store, f"{PREFIX}progress/{r}") for r in range(world_size)}


def read_reports(store, world_size: int) -> dict[int, dict]:
    reports = {r: _read(store, f"{PREFIX}error/{r}") for r in range(world_size)}
    return {r: report for r, report in reports.items() if report is not None}


def report(
    store, rank: int, error: BaseException, step: int, phase: str, blame: tuple[int | None, str] = (None, "")
) -> dict:
    """Post this rank's failure: its own error ("raised"), or a peer's ("peer"; `blame`: the
    rank diagnosed, and why in words)."""
    entry = {
        "rank": rank,
        "step": step,
        "phase": phase,
        "kind": "peer" if isinstance(error, PeerLost) else "raised",
        "error": f"{type(error).__name__}: {error}",
        "blamed": blame[0],
        "blame": blame[1],
        "time": time.time(),
        "traceback": "".join(traceback.format_exception(error))[-4000:],
    }
    try:
        store.set(f"{PREFIX}error/{rank}", json.dumps(entry))
    except Exception:  # noqa: BLE001 - no store: the launcher still sees the exit code
        pass
    return entry


def _order(progress: dict) -> tuple[int, int]:
    phase = progress["phase"]
    return progress["step"], PHASES.index(phase) if phase in PHASES else len(PHASES)


def diagnose(store, world_size: int, me: int, wait: float = QUIET + POST_EVERY) -> tuple[int | None, str]:
    """Who made this rank's collective fail (a rank, or None), and why in words; waits up to
    `wait` s for the evidence (a report to arrive, or a dead rank's board to go quiet)."""
    deadline = time.time() + wait
    while True:
        reports = read_reports(store, world_size)
        raised = sorted(
            (r for r, e in reports.items() if e["kind"] == "raised" and r != me), key=lambda r: reports[r]["time"]
        )
        if raised:
            e = reports[raised[0]]
            return raised[0], f"rank {raised[0]} failed at step {e['step']} ({e['phase']}): {e['error']}"
        progress, now = read_progress(store, world_size), time.time()
        quiet = [r for r, p in progress.items() if r != me and p and now - p["posted"] > QUIET]
        if quiet:
            p = progress[quiet[0]]
            return quiet[0], (
                f"rank {quiet[0]} is gone: no word from it for {now - p['posted']:.1f} s, "
                f"last at step {p['step']} ({p['phase']}); killed, or its process crashed"
            )
        known = {r: p for r, p in progress.items() if p is not None}
        if len(known) == world_size and len({_order(p) for p in known.values()}) > 1:
            behind = min((r for r in known if r != me), key=lambda r: _order(known[r]))
            p = known[behind]
            if now - p["since"] > QUIET or now >= deadline:  # stuck long, yet posting: hung
                return behind, (
                    f"rank {behind} stopped answering: in step {p['step']} ({p['phase']}) "
                    f"for {now - p['since']:.1f} s while the others waited for it"
                )
        if now >= deadline:
            break
        time.sleep(POST_EVERY / 2)
    return None, "no rank reported why (the store had no reports and no rank was behind)"


class FaultKind(str, Enum):
    RAISE = "raise"  # raise InjectedFault
    KILL = "kill"  # SIGKILL this rank
    HANG = "hang"  # sleep forever


class InjectedFault(RuntimeError):
    """The error a "raise" fault raises."""


@dataclass(frozen=True)
class Fault:
    """A fault for rank `rank` as Train(`step`) reaches the exchanges: "kind@rank:step"."""

    kind: FaultKind
    rank: int
    step: int

    @classmethod
    def parse(cls, text: str) -> "Fault":
        try:
            kind, where = text.split("@")
            rank, step = (int(x) for x in where.split(":"))
        except ValueError:
            raise ValueError(f"a fault is kind@rank:step, e.g. raise@1:3; got {text!r}") from None
        return cls(parse_choice(FaultKind, kind, "fault kind "), rank, step)

    def __call__(self, rank: int, step: int) -> None:
        if (rank, step) != (self.rank, self.step):
            return
        if self.kind is FaultKind.RAISE:
            raise InjectedFault(f"injected fault in rank {rank} at step {step}")
        if self.kind is FaultKind.KILL:
            os.kill(os.getpid(), signal.SIGKILL)
        while True:  # HANG: alive, silent, until something kills it
            time.sleep(1.0)
