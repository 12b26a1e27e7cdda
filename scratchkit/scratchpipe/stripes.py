"""Plan stripes: one table planned by several planners at once, each on its own core.

A table's plan is a chain (Plan(b) starts from Plan(b-1)'s map), so it cannot be split by batch.
It can be split by id: stripe s of S plans the ids with `id % S == s`, in its own range of the
scratchpad's slots, and never looks at another stripe's ids or slots. Each stripe is a whole
planner (plan.py or plan_loop.cpp) over *local* ids `id // S`; it reads the whole batch, keeps its
own lookups, and gives back global ids and slots. On a GPU server the host's Plan must keep up
with Train: for the embedding-bound profile one table's plan is several milliseconds on one
core, an H100 trains the whole batch in ~2.4 ms, so the tables x stripes planners run on that many
cores (`PlanAhead`'s thread pool). docs/design.md, "Plan stripes".

What it costs. A stripe is a cache of its own: its slots serve only its ids. Each stripe must hold
its own ids' window (invariant 5, checked per stripe: `striped_minimum`), so a striped scratchpad
needs slightly more than one that is not (S times the largest stripe's window, against the whole
window), and victims are chosen within a stripe, not over the table. S = 1 is the whole table,
exactly as before.

    StripeOf       which ids and which slots a stripe owns
    stripe_slots   a table's capacity split into S ranges (sizes differ by at most one)
    TwinStripe     the NumPy twin planner made into a stripe (the C++ loop does it itself)
    merge_plans    the stripes' TablePlans -> the table's
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scratchkit.scratchpipe.events import PlanDecision
from scratchkit.scratchpipe.plan import TablePlan


@dataclass(frozen=True)
class StripeOf:
    """Stripe `stripe` of `stripes`: ids with id % stripes == stripe, slots [offset, offset + capacity)."""

    stripe: int = 0
    stripes: int = 1
    offset: int = 0

    def local_rows(self, num_rows: int) -> int:
        """How many of a table's `num_rows` ids are this stripe's."""
        return (num_rows - self.stripe + self.stripes - 1) // self.stripes


def stripe_slots(capacity: int, stripes: int) -> list[tuple[int, int]]:
    """[(offset, capacity)] per stripe: the first `capacity % stripes` stripes get one slot more."""
    base, extra = divmod(capacity, stripes)
    sizes = [base + (s < extra) for s in range(stripes)]
    return [(sum(sizes[:s]), sizes[s]) for s in range(stripes)]


def striped_minimum(needs: list[int], stripes: int) -> int:
    """The smallest capacity whose split (`stripe_slots`) gives each stripe s its `needs[s]` slots."""
    most = max(needs, default=0)
    for capacity in range(max(0, stripes * (most - 1)), stripes * most + 1):
        if all(size >= need for (_, size), need in zip(stripe_slots(capacity, stripes), needs)):
            return capacity
    return stripes * most


class TwinStripe:
    """A `TablePlanner` (the NumPy twin, over local ids and slots) as stripe `stripe.stripe`: it
    splits each batch, and maps the twin's answers back to global ids and slots."""

    def __init__(self, planner, stripe: StripeOf):
        self.planner, self.stripe = planner, stripe
        self._lookups: dict[int, np.ndarray] = {}  # batch -> [n_s] positions of this stripe's lookups

    def see(self, k: int, ids: np.ndarray) -> None:
        mine = np.flatnonzero(ids % self.stripe.stripes == self.stripe.stripe)  # [n_s]
        self._lookups[k] = mine
        self.planner.see(k, ids[mine] // self.stripe.stripes)

    def shortfall(self, b: int) -> int:
        return self.planner.shortfall(b)

    def plan(self, batch_index: int, stop: int, lookup_slots: np.ndarray) -> TablePlan:
        local = self.planner.plan(batch_index, stop)
        S, s, off = self.stripe.stripes, self.stripe.stripe, self.stripe.offset
        lookup_slots[self._lookups.pop(batch_index)] = local.lookup_slots + off
        d = local.decision
        decision = PlanDecision(
            d.batch,
            d.table,
            d.unique_ids * S + s,
            d.slots + off,
            d.hit,
            d.victim_ids * S + s,
            d.victim_slots + off,
            d.held_before + off,
        )
        return TablePlan(
            decision,
            lookup_slots,
            local.miss_ids * S + s,
            local.miss_slots + off,
            local.victim_ids * S + s,
            local.victim_slots + off,
            local.wait_for_write_back,
        )

    def retire(self, k: int) -> None:
        self.planner.retire(k)


def merge_plans(plans: list[TablePlan]) -> TablePlan:
    """The table's TablePlan from its stripes'. They share one `lookup_slots`, which each has
    filled in part. Victims and held slots are concatenated in stripe order: ascending, as each
    stripe's are, since stripe ranges are. The working set is merged back into id order: Train
    coalesces gradients by id and relies on it (train.py); each stripe's is sorted already, so the
    stable sort only merges S runs."""
    if len(plans) == 1:
        return plans[0]
    first = plans[0].decision

    def cat(get):
        return np.concatenate([get(p) for p in plans])

    unique = cat(lambda p: p.decision.unique_ids)  # [u] S sorted runs
    order = np.argsort(unique, kind="stable")  # timsort: merges the runs
    decision = PlanDecision(
        first.batch,
        first.table,
        unique[order],
        cat(lambda p: p.decision.slots)[order],
        cat(lambda p: p.decision.hit)[order],
        cat(lambda p: p.decision.victim_ids),
        cat(lambda p: p.decision.victim_slots),
        cat(lambda p: p.decision.held_before),
    )
    return TablePlan(
        decision,
        plans[0].lookup_slots,
        cat(lambda p: p.miss_ids),
        cat(lambda p: p.miss_slots),
        cat(lambda p: p.victim_ids),
        cat(lambda p: p.victim_slots),
        max(p.wait_for_write_back for p in plans),
    )
