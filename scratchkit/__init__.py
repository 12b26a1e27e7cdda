"""scratchkit: embedding caches and ScratchPipe, to learn and to measure."""
