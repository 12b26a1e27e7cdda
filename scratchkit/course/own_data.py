"""Notebook 06's helpers: which Criteo file to read, its miss-ratio curves, its minimum scratchpad.

The kit ships a tiny synthetic Criteo file (`datasets/samples/criteo-synthetic.tsv`, 48 made-up
rows). The real 7,200-row Criteo Kaggle sample is read where you place it
(`datasets/real/criteo-kaggle-sample/train.tsv`, scratchkit/data/samples.py) when it is there; a user's
own file wins over both.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scratchkit.data.samples import COMMITTED_SAMPLE, KAGGLE_SAMPLE


def criteo_file(yours: str | Path | None = None) -> tuple[Path, int]:
    """(the file to read, a batch size that gives it a few dozen batches): `yours` if given,
    else the real Kaggle sample if present, else the committed synthetic one."""
    if yours is not None:
        return Path(yours), 128
    if KAGGLE_SAMPLE.exists():
        return KAGGLE_SAMPLE, 128
    return COMMITTED_SAMPLE, 4


def lru_and_opt(trace: np.ndarray, points: int = 12):
    """(capacities, {"LRU": hit rates, "OPT": hit rates}) at `points` capacities spaced
    logarithmically up to the distinct ids: the LRU curve from one pass (Mattson), OPT at each."""
    from scratchkit.sim import opt_mrc, profile_lru

    lru = profile_lru(trace)
    capacities = np.unique(np.geomspace(1, lru.unique_ids, points).astype(np.int64))
    opt = opt_mrc(trace, capacities)
    lru_hits = np.array([lru.hits[min(c, lru.hits.size) - 1] if lru.hits.size else 0 for c in capacities])
    return capacities, {"LRU": lru_hits / trace.size, "OPT": np.asarray(opt.hits) / trace.size}


def minimum_by_depth(source, depths=(1, 2, 3, 4), stop: int | None = None) -> dict[int, int]:
    """depth -> the least scratchpad rows (the largest table's need) that ScratchPipe accepts."""
    from scratchkit.scratchpipe.capacity import minimum_capacities

    return {d: max(minimum_capacities(source, d, 0, stop)) for d in depths}


__all__ = ["criteo_file", "lru_and_opt", "minimum_by_depth", "COMMITTED_SAMPLE", "KAGGLE_SAMPLE"]
