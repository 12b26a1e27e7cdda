"""`torchrun --nproc-per-node N -m scratchkit.distributed bench|verify|train ...`: one rank of a job.

A rank leaves with `os._exit`, whatever its status, once its output is flushed: its work is done
(results printed, checkpoints written atomically, the process group destroyed), and the
interpreter's teardown only adds risk. Threads that gloo and the store started in C++ can still
be running then, and tearing down under them aborted a finished rank now and then ("terminate
called without an active exception": a job that trained and verified 0.0, reported as failed).
"""
import os
import sys

from scratchkit.commands.rank import main

status = main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
