"""The course's colours, shared by every figure so a batch has one colour everywhere.

Batch colours avoid red, green and black: those mean victim, just inserted and hazard on the
scratchpad map, and the Gantt chart and the map must agree on what batch b looks like.
"""
from __future__ import annotations

BATCH_COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#17becf", "#bcbd22", "#8c564b", "#e377c2", "#7f7f7f")

FREE = "#f2f2f2"
RESIDENT = "#c9c9c9"
VICTIM = "#d62728"
INSERTED = "#2ca02c"
CONFLICT = "#000000"

# one colour per stage, for stage-time breakdown bars
STAGE_COLOURS = ("#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2",
                 "#ff9da6", "#9d755d", "#bab0ac")


def batch_colour(batch: int) -> str:
    return BATCH_COLOURS[batch % len(BATCH_COLOURS)]
