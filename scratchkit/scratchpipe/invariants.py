"""ScratchPipe's invariants by name: what the design promises, each held by a test (docs/design.md,
"The invariants, and the test that holds each", lists them in this order with those tests).

What a learner reads (a refused plan, the hazard lab's verdict, the course's text) cites an
invariant by its number *and* its name, `Invariant.HOLDS.cited` = "invariant 4 (no eviction of a
held slot)", so the words say which promise broke without the table at hand.
"""

from __future__ import annotations

from enum import Enum

DOCS = "docs/design.md#the-invariants-and-the-test-that-holds-each"  # where the table is


class Invariant(Enum):
    ALL_HITS = 1
    EXACT = 2
    NO_STALE_READS = 3
    HOLDS = 4
    ROOM = 5
    NOTHING_LOST = 6
    ALL_OR_NOTHING = 7

    @property
    def words(self) -> str:
        """Its name: the start of its row in docs/design.md's table, after the number."""
        return _WORDS[self]

    @property
    def cited(self) -> str:
        return f"invariant {self.value} ({self.words})"


_WORDS = {
    Invariant.ALL_HITS: "every lookup in Train hits",
    Invariant.EXACT: "exactness",
    Invariant.NO_STALE_READS: "no stale reads",
    Invariant.HOLDS: "no eviction of a held slot",
    Invariant.ROOM: "the scratchpad holds every batch in flight",
    Invariant.NOTHING_LOST: "nothing trained is lost",
    Invariant.ALL_OR_NOTHING: "a step is all or nothing",
}
