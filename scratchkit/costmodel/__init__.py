"""The machines that price a design's work: a `Hardware` (this machine's type, the GPU servers) and the curves its speeds follow; no design, no trainer."""
