"""ScratchPipe's pipeline, one file per part (docs/design.md follows one batch through them):

    plan_ahead.py  Plan for every table, batch after batch (plan.py, lookahead.py, slot_map.py)
    capacity.py    invariant 5: the scratchpad must hold every batch in flight
    host_stages.py Collect, Write-back, Transfer, Insert, flush
    rows.py        the scratchpad's row store
    train.py       Train through slots
    schedule.py    every rule that orders the stages
    drivers.py     where the host stages run: threads.py, or a forked process (host_process.py,
                   forked.py, ring.py); events.py records when each stage ran
    device_plan.py `scratchpipe-device`: Plan on the device for every table at once (device_map.py,
                   the kernels' hash map), the rows moved by the device's kernels (device_moves.py)

The trainer that composes them is scratchkit/trainers/scratchpipe.py.
"""
