"""The cache policies the simulators know, as one closed set of names."""
from __future__ import annotations

from enum import Enum


class Policy(str, Enum):
    """Which rows a cache of `capacity` rows keeps.

    STATIC     pins the most frequent ids of a profiled prefix; never changes.
    LRU        evicts the least recently used row.
    LFU        evicts the least frequently used row (ties: least recently used).
    OPT        Belady's MIN: evicts the row whose next use is furthest (needs the future).
    LOOKAHEAD  ScratchPipe's look-forward scratchpad: every id of the next `depth` batches is
               made resident before its batch trains.
    SETASSOC   LRU inside small sets of `ways` rows, as production GPU caches do.
    """

    STATIC = "static"
    LRU = "lru"
    LFU = "lfu"
    OPT = "opt"
    LOOKAHEAD = "lookahead"
    SETASSOC = "setassoc"

    @classmethod
    def parse(cls, name) -> "Policy":
        """`Policy.parse("LRU") -> Policy.LRU`; an unknown name raises ValueError listing the valid ones."""
        if isinstance(name, cls):
            return name
        key = str(name).strip().lower()
        for policy in cls:
            if policy.value == key:
                return policy
        valid = ", ".join(p.value for p in cls)
        raise ValueError(f"unknown cache policy {name!r}; choose one of: {valid}")

    def __str__(self) -> str:
        return self.value
