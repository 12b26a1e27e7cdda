"""Ctrl-C between training steps, never inside one.

A step changes the dense model, then each table's rows, one after another. A KeyboardInterrupt
raised halfway would leave some tables updated by the step and others not: a state no run of the
reference ever has, which a flush would then write to the host tables for good. So while a step
runs, Ctrl-C only raises a flag; the trainer finishes the step, yields its record, and raises
KeyboardInterrupt when the loop asks for the next step:

    for record in trainer.train(100):   # Ctrl-C during step 7: step 7 finishes and is yielded,
        ...                             # then the loop's next() raises KeyboardInterrupt

A step that is still *waiting* for its inputs (ScratchPipe's Train waiting for Insert) has changed
nothing yet, so the wait may give up at once (`raised`) and the step is not taken.

Python delivers signals to the main thread only; elsewhere the flag is a no-op and Ctrl-C is the
main thread's business. The handler in force before (the default, or SIG_IGN in a background job)
is put back after each step.
"""

from __future__ import annotations

import signal
import threading


class InterruptFlag:
    """`with flag:` turns SIGINT into `flag.raised = True` for the duration of one step."""

    def __init__(self):
        self.raised = False
        self._previous = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        self.raised = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        return False
