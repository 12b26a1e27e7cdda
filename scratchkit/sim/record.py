"""`SimResult`: the one record every cache simulator returns.

Counting rules shared by all policies (each simulator's docstring adds its own):
- a *lookup* is one id in the trace; hit rate = hits / lookups, per lookup (docs/design.md);
- `fetched_rows`: rows copied host -> device (the fill on a miss, or a prefetch);
- `written_back_rows`: victims copied device -> host while the trace runs. Training updates every
  row it reads, so every evicted row that was ever looked up is dirty and is written back;
- `flushed_rows`: dirty rows still resident when the trace ends, which the final flush (or a
  checkpoint) writes back. Kept apart so `written_back_rows` measures the traffic *during* training.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class SimResult:
    policy: str
    capacity: int  # rows the cache holds
    lookups: int
    hits: int
    misses: int
    fetched_rows: int
    written_back_rows: int
    flushed_rows: int = 0
    # Policy-specific figures (conflict misses, batch size, depth, ...): name -> number.
    extra: dict = field(default_factory=dict)
    # Batch-aware policies only: one entry per batch, int64 [num_batches]; None otherwise.
    batch_hits: np.ndarray | None = None
    batch_misses: np.ndarray | None = None
    batch_fetched: np.ndarray | None = None
    batch_written_back: np.ndarray | None = None

    def __post_init__(self):
        if self.hits + self.misses != self.lookups:
            raise ValueError(f"{self.policy}: hits {self.hits} + misses {self.misses} != lookups {self.lookups}")

    @property
    def hit_rate(self) -> float:
        """Hits per lookup; 0.0 for an empty trace."""
        return self.hits / self.lookups if self.lookups else 0.0

    @property
    def miss_rate(self) -> float:
        return self.misses / self.lookups if self.lookups else 0.0

    @property
    def num_batches(self) -> int | None:
        return None if self.batch_hits is None else int(self.batch_hits.size)

    def to_dict(self, series: bool = True) -> dict:
        """Plain JSON-ready dict; `series=False` leaves out the per-batch lists."""
        out = {
            "policy": self.policy,
            "capacity": self.capacity,
            "lookups": self.lookups,
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": self.hit_rate,
            "fetched_rows": self.fetched_rows,
            "written_back_rows": self.written_back_rows,
            "flushed_rows": self.flushed_rows,
        }
        out.update({key: _plain(value) for key, value in self.extra.items()})
        if series and self.batch_hits is not None:
            out["batches"] = {
                "hits": self.batch_hits.tolist(),
                "misses": self.batch_misses.tolist(),
                "fetched": self.batch_fetched.tolist(),
                "written_back": self.batch_written_back.tolist(),
            }
        return out


def _plain(value):
    """NumPy scalars to Python numbers, so json.dumps takes them."""
    return value.item() if isinstance(value, np.generic) else value
