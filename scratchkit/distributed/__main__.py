"""`torchrun --nproc-per-node N -m scratchkit.distributed bench|verify|train ...`: one rank of a job.

A rank leaves with `os._exit`, whatever its status, once its output is flushed, without the
interpreter's teardown. A failed rank's process group is broken: tearing it down can wait for
the very peer that failed, and its peers notice it is gone only when its sockets close (its
report is already in the store). A finished rank's work is done (results printed, checkpoints
written atomically, the process group destroyed), and threads that gloo and the store started
in C++ can still be running: tearing down under them aborted a finished rank now and then
("terminate called without an active exception": a job that verified 0.0, reported as failed).
"""

import os
import sys

from scratchkit.commands.rank import main

status = main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
