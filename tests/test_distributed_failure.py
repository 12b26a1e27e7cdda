"""A rank that raises, dies or hangs stops the whole job within a bounded time, the failing rank and
its error named, and no process left (scratchkit/distributed/failure.py, launch.py).

Each job is 2 ScratchPipe ranks of `tiny`, so each rank has forked a host process of its own:
"no process left" covers those too. The bounds are the ones launch.py states."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from scratchkit.commands.cli import main as cli
from scratchkit.distributed.launch import GRACE, KILL_AFTER, job_processes, launch
from scratchkit.distributed.failure import POST_EVERY, QUIET

HANG_TIMEOUT = 3.0
JOB = ["verify", "--profile", "tiny", "--trainers", "scratchpipe", "--steps", "8", "--hang-timeout", str(HANG_TIMEOUT)]


def run_with_fault(fault: str):
    started = time.time()
    result = launch(JOB + ["--inject-fault", fault], 2, hang_timeout=HANG_TIMEOUT)
    took = time.time() - started
    assert result.returncode == 1
    assert result.left_behind == []  # nothing left...
    assert job_processes([r.pid for r in result.ranks]) == []  # ...nor after the sweep
    healthy = result.ranks[0]
    assert healthy.report is not None and healthy.report["kind"] == "peer"
    assert healthy.report["blamed"] == 1  # rank 0 names rank 1
    return result, took


def test_a_raising_rank_is_named_with_its_error_and_the_others_stop_at_once():
    result, _ = run_with_fault("raise@1:3")
    assert result.failure == ("rank 1 failed at step 3 (train): InjectedFault: injected fault in rank 1 at step 3")
    assert result.ranks[1].returncode == 3 and result.ranks[0].returncode == 3
    assert "all_to_all ids failed" in result.ranks[0].report["error"]  # where rank 0 learnt it
    assert result.stopped_after < GRACE + KILL_AFTER
    assert not any(r.stopped_by_launcher for r in result.ranks)  # they stopped by themselves


def test_a_killed_rank_is_named_and_the_others_stop_within_the_bound():
    result, _ = run_with_fault("kill@1:3")
    assert result.failure.startswith("rank 1 was killed by SIGKILL at step")
    assert result.ranks[1].returncode == -signal.SIGKILL
    assert "rank 1 is gone" in result.ranks[0].report["blame"]
    assert result.stopped_after < QUIET + POST_EVERY + GRACE + KILL_AFTER


def test_a_hanging_rank_is_named_and_stopped_after_the_hang_timeout():
    result, _ = run_with_fault("hang@1:3")
    assert result.failure.startswith("rank 1 hung at step 3 (train): the others waited 3 s")
    assert result.ranks[1].stopped_by_launcher and result.ranks[1].report is None
    assert "timed out" in result.ranks[0].report["error"].lower()
    # rank 0 waited the whole timeout from its own step 3 (the launcher's stopped_after counts from
    # rank 1's, which a busy machine can schedule after rank 0's wait began: 0.13-0.22 s of slack)
    healthy = result.ranks[0]
    assert healthy.progress["step"] == 3 and healthy.report["time"] - healthy.progress["since"] >= HANG_TIMEOUT
    assert result.stopped_after < HANG_TIMEOUT + QUIET + POST_EVERY + KILL_AFTER


def test_the_command_line_says_which_rank_failed_and_how_long_stopping_took(capsys):
    status = cli(JOB + ["--world-size", "2", "--inject-fault", "raise@0:2"])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("scratchkit verify: error: rank 0 failed at step 2 (train): InjectedFault")
    assert "every rank stopped" in err and "no process left behind" in err


@pytest.mark.slow
def test_ranks_whose_launcher_dies_stop_themselves(tmp_path):
    """A launcher killed mid-job (no chance to stop anyone): its ranks see their parent change
    and kill their own process groups, host processes included."""
    code = (
        "import sys; from scratchkit.distributed.launch import launch; "
        f"launch({JOB + ['--inject-fault', 'hang@1:2', '--hang-timeout', '600']!r}, 2, hang_timeout=600)"
    )
    launcher = subprocess.Popen([sys.executable, "-c", code])
    ranks = []
    deadline = time.time() + 60
    while len(ranks) < 2 and time.time() < deadline:  # the ranks: the launcher's children
        time.sleep(0.2)
        ranks = [int(p) for p in open(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read().split()]
    time.sleep(8)  # they train, then rank 1 hangs
    os.kill(launcher.pid, signal.SIGKILL)
    launcher.wait()
    deadline = time.time() + 10
    while job_processes(ranks) and time.time() < deadline:
        time.sleep(0.2)
    left = job_processes(ranks)
    for group in ranks:  # whatever the verdict, leave nothing
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert len(ranks) == 2 and left == []
