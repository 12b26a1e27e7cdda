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
# The loss gap against the exact baseline: not victim red (the map beside it), not a batch colour.
LOSS_GAP = "#7b4173"

# One colour per stage name, the same in every figure, each a hue of its own (hybrid's six stages,
# the caches' fetch and write-back, ScratchPipe's plan, collect, insert and train). Stages the kit
# does not name yet take the spare colours in order.
STAGE_COLOURS = {
    "data": "#7f7f7f",
    "embedding_forward": "#1f77b4",
    "transfer": "#ff7f0e",
    "mlp": "#2ca02c",
    "embedding_backward": "#d62728",
    "update": "#9467bd",
    "fetch": "#8c564b",
    "write_back": "#e377c2",
    "plan": "#bcbd22",
    "collect": "#17becf",
    "insert": "#393b79",
    "train": "#e7ba52",
}
SPARE_COLOURS = ("#637939", "#843c39", "#7b4173", "#3182bd", "#31a354", "#756bb1")
# Series of a grouped bar chart (measured, then each projection): distinct from one another.
SERIES_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2")


def stage_colour(stage: str, others: int = 0) -> str:
    """A stage's colour; `others` numbers the unknown stages of a figure, so they differ too."""
    return STAGE_COLOURS.get(stage) or SPARE_COLOURS[others % len(SPARE_COLOURS)]


def batch_colour(batch: int) -> str:
    return BATCH_COLOURS[batch % len(BATCH_COLOURS)]
