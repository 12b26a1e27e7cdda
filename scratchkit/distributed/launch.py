"""Start a job's ranks on this machine, watch them, and stop them all when one fails.

`scratchkit bench/verify --world-size N` call `launch`: it does what torchrun does for one node
(the store, the ranks with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), and a little
more: it names the rank that failed and why, times how long the job took to stop, and checks that
no process of the job is left.

    store     a TCPStore in this process, so the ranks' reports (failure.py) outlive every rank
    ranks     `python -m scratchkit.distributed ARGS`, each the leader of its own process group,
              so a rank and the processes it forked (ScratchPipe's host process) stop together
    watch     every POLL s. Once a rank has failed (exited non-zero, or died by a signal), the
              others get GRACE s to stop by themselves (their collectives fail at once when a
              peer is gone: they report whom they blame, failure.py), then SIGTERM to their
              process groups, then SIGKILL after KILL_AFTER s.

Bounds, from the fault to the last process gone. A rank that raises: its peers stop by
themselves within a second or two (their collective fails at once); at most GRACE + KILL_AFTER
(10 s) after the first exit, the launcher's signals see to it. A rank that dies: its peers spend up
to failure.QUIET + POST_EVERY (3.5 s) seeing its board go quiet, then stop; the same 10 s cap.
A rank that hangs: its peers' next collective times out after the hang timeout (the process
group's, `--hang-timeout`, default 60 s), they spend up to 3.5 s naming it, and the launcher
SIGTERMs the rank they name at once (SIGKILL KILL_AFTER s later if it ignores that): hang timeout
+ 3.5 s + at most KILL_AFTER, hang timeout + 8.5 s in all.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch.distributed as dist

from scratchkit.distributed.failure import read_progress, read_reports
from scratchkit.distributed.group import DEFAULT_HANG_TIMEOUT

POLL = 0.05  # seconds between looks at the ranks
GRACE = 5.0  # seconds the others get to stop by themselves after a rank failed
KILL_AFTER = 5.0  # seconds between SIGTERM and SIGKILL
SETTLE = 2.0  # seconds the processes a rank forked get to exit after it
VERDICT = 1  # a rank's exit status when the job ran but verify found a difference


@dataclass
class RankExit:
    rank: int
    pid: int
    returncode: int
    stopped_by_launcher: bool
    report: dict | None  # what the rank posted when it failed (failure.py)
    progress: dict | None  # where it was last (failure.py's board)
    stderr: str  # its last lines

    @property
    def how(self) -> str:
        if self.returncode >= 0:
            return f"exited with code {self.returncode}"
        name = signal.Signals(-self.returncode).name
        return f"stopped by the launcher ({name})" if self.stopped_by_launcher else f"was killed by {name}"


@dataclass
class LaunchResult:
    returncode: int  # 0: every rank exited 0; 1: a rank failed, or verify's verdict
    output: str  # rank 0's stdout: the job's result
    ranks: list[RankExit]
    failure: str = ""  # one line: which rank failed, and why
    stopped_after: float | None = None  # seconds from the fault to the last process gone
    left_behind: list[int] = field(default_factory=list)  # pids alive after the ranks had gone

    def describe(self) -> list[str]:
        """A line per rank that failed or was stopped, then how long the job took to stop."""
        lines = []
        for r in self.ranks:
            if r.returncode == 0:
                continue
            said = (
                f": {r.report['error']}" + (f" (blames {r.report['blame']})" if r.report["blame"] else "")
                if r.report
                else ""
            )
            lines.append(f"rank {r.rank} {r.how}{said}")
        if self.stopped_after is not None:
            lines.append(
                f"every rank stopped {self.stopped_after:.1f} s after the fault; "
                + (
                    "no process left behind"
                    if not self.left_behind
                    else f"{len(self.left_behind)} processes were left behind and killed"
                )
            )
        return lines


def launch(
    rank_args: list[str], world_size: int, *, hang_timeout: float = DEFAULT_HANG_TIMEOUT, environ: dict | None = None
) -> LaunchResult:
    """Run `python -m scratchkit.distributed RANK_ARGS` as `world_size` ranks; wait for them all."""
    if world_size < 1:
        raise ValueError(f"world size must be >= 1, got {world_size}")
    store = dist.TCPStore(
        "127.0.0.1",
        0,
        world_size,
        is_master=True,
        wait_for_workers=False,
        timeout=datetime.timedelta(seconds=max(60.0, hang_timeout)),
    )
    with tempfile.TemporaryDirectory(prefix="scratchkit-job-") as logs:
        procs, files = [], []
        for rank in range(world_size):
            env = dict(environ if environ is not None else os.environ) | {
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(world_size),
                "LOCAL_WORLD_SIZE": str(world_size),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(store.port),
                "SCRATCHKIT_LAUNCHER_STORE": "1",
                "OMP_NUM_THREADS": "1",
            }
            out, err = (open(Path(logs) / f"rank{rank}.{x}", "w+") for x in ("out", "err"))
            files.append((out, err))
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "scratchkit.distributed", *rank_args],
                    env=env,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            )
        try:
            first_failure, launcher_stopped = _watch(procs, store)
        except BaseException:  # Ctrl-C: stop the ranks, then let it through
            _stop(procs, signal.SIGTERM)
            _wait_or_kill(procs)
            raise
        gone = time.time()
        left = _left_behind([p.pid for p in procs])
        exits = []
        for rank, (proc, (out, err)) in enumerate(zip(procs, files)):
            err.seek(0)
            exits.append(
                RankExit(
                    rank,
                    proc.pid,
                    proc.returncode,
                    rank in launcher_stopped,
                    None,
                    None,
                    "".join(err.readlines()[-20:]),
                )
            )
        out0 = files[0][0]
        out0.seek(0)
        output = out0.read()
        for out, err in files:
            out.close()
            err.close()
    reports, progress = read_reports(store, world_size), read_progress(store, world_size)
    for e in exits:
        e.report, e.progress = reports.get(e.rank), progress.get(e.rank)
    failed = [e for e in exits if e.returncode not in (0, VERDICT)]
    result = LaunchResult(1 if failed else exits[0].returncode, output, exits, left_behind=left)
    if failed:
        result.failure, fault_time = _root_cause(exits, hang_timeout)
        known = [t for t in (fault_time, first_failure) if t is not None]
        result.stopped_after = gone - min(known) if known else None
    return result


def _watch(procs, store) -> tuple[float | None, set[int]]:
    """Wait for every rank; stop the rest once one fails. -> (when the first failed, the ranks
    the launcher had to stop). A rank its peers blame (hung, failure.py) is stopped at once; the
    others get GRACE s to stop by themselves."""
    first_failure = None
    terminated: dict[int, float] = {}  # rank -> when it got SIGTERM
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return first_failure, set(terminated)
        now = time.time()
        if first_failure is None and any(c not in (None, 0, VERDICT) for c in codes):
            first_failure = now
        if first_failure is not None:
            blamed = {e["blamed"] for e in read_reports(store, len(procs)).values() if e["kind"] == "peer"}
            late = now > first_failure + GRACE
            for rank, code in enumerate(codes):
                if code is None and rank not in terminated and (late or rank in blamed):
                    _stop([procs[rank]], signal.SIGTERM)
                    terminated[rank] = now
                elif code is None and rank in terminated and now > terminated[rank] + KILL_AFTER:
                    _stop([procs[rank]], signal.SIGKILL)
        time.sleep(POLL)


def _stop(procs, sig: signal.Signals) -> None:
    for p in procs:
        try:
            os.killpg(p.pid, sig)  # the rank and what it forked
        except (ProcessLookupError, PermissionError):
            pass


def _wait_or_kill(procs) -> None:
    deadline = time.time() + KILL_AFTER
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            pass
    _stop(procs, signal.SIGKILL)
    for p in procs:
        p.wait()


def job_processes(groups: list[int]) -> list[int]:
    """Pids of live processes in these process groups (Linux /proc; elsewhere none are found)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (name) "
        if int(fields[2]) in groups and fields[0] != "Z":  # pgrp, not a zombie
            found.append(int(entry.name))
    return found


def _left_behind(groups: list[int]) -> list[int]:
    """The job's processes still alive SETTLE s after every rank exited; then they are killed."""
    deadline = time.time() + SETTLE
    while (left := job_processes(groups)) and time.time() < deadline:
        time.sleep(POLL)
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return left


def _root_cause(exits: list[RankExit], hang_timeout: float) -> tuple[str, float | None]:
    """The rank to blame, in one line, and when its fault happened (None: unknown)."""
    raised = sorted((e for e in exits if e.report and e.report["kind"] == "raised"), key=lambda e: e.report["time"])
    if raised:
        e = raised[0]
        return (
            f"rank {e.rank} failed at step {e.report['step']} ({e.report['phase']}): {e.report['error']}",
            e.report["time"],
        )
    where = lambda e: f" at step {e.progress['step']} ({e.progress['phase']})" if e.progress else ""
    killed = [e for e in exits if e.returncode < 0 and not e.stopped_by_launcher]
    if killed:
        e = killed[0]
        return f"rank {e.rank} {e.how}{where(e)}", e.progress["posted"] if e.progress else None
    peers = [e for e in exits if e.report and e.report["kind"] == "peer"]
    hung = [e for e in exits if e.stopped_by_launcher]
    if peers and hung:
        e = min(hung, key=lambda e: (e.progress or {}).get("since", float("inf")))
        return (
            f"rank {e.rank} hung{where(e)}: the others waited {hang_timeout:g} s (the hang "
            f"timeout) for it, then stopped",
            e.progress["since"] if e.progress else None,
        )
    failed = [e for e in exits if e.returncode != 0]
    e = failed[0]
    return f"rank {e.rank} {e.how}{where(e)}", None
