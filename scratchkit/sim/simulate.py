"""`simulate(trace, policy, capacity, ...)`: run any policy by name, with its options checked."""
from __future__ import annotations

from scratchkit.sim.checks import as_capacity, as_trace
from scratchkit.sim.lfu import simulate_lfu
from scratchkit.sim.lookahead import simulate_lookahead
from scratchkit.sim.lru import simulate_lru
from scratchkit.sim.opt import simulate_opt
from scratchkit.sim.policies import Policy
from scratchkit.sim.record import SimResult
from scratchkit.sim.setassoc import DEFAULT_WAYS, simulate_setassoc
from scratchkit.sim.static import DEFAULT_PREFIX_SHARE, simulate_static

# Which keyword options each policy takes; any other option given (not None) is an error, so a
# typo such as `ways=` on an LRU run is reported instead of silently ignored.
OPTIONS = {
    Policy.STATIC: ("prefix_share",),
    Policy.LRU: (),
    Policy.LFU: (),
    Policy.OPT: (),
    Policy.LOOKAHEAD: ("batch_size", "depth", "horizon"),
    Policy.SETASSOC: ("ways",),
}


def simulate(trace, policy, capacity, *, batch_size=None, depth=None, horizon=None, ways=None,
             prefix_share=None) -> SimResult:
    """Simulate `policy` (a Policy or its name) with `capacity` rows on `trace` (1-D int64 ids).

    lookahead needs `batch_size` and `depth` (`horizon` optional); setassoc takes `ways`
    (default DEFAULT_WAYS); static takes `prefix_share` (default DEFAULT_PREFIX_SHARE).
    """
    policy = Policy.parse(policy)
    trace = as_trace(trace)
    capacity = as_capacity(capacity)
    given = {"batch_size": batch_size, "depth": depth, "horizon": horizon, "ways": ways,
             "prefix_share": prefix_share}
    stray = [name for name, value in given.items()
             if value is not None and name not in OPTIONS[policy]]
    if stray:
        takes = ", ".join(OPTIONS[policy]) or "no options"
        raise ValueError(f"policy {policy.value} does not take {', '.join(stray)} "
                         f"(it takes {takes})")
    if policy is Policy.STATIC:
        share = DEFAULT_PREFIX_SHARE if prefix_share is None else prefix_share
        return simulate_static(trace, capacity, share)
    if policy is Policy.LRU:
        return simulate_lru(trace, capacity)
    if policy is Policy.LFU:
        return simulate_lfu(trace, capacity)
    if policy is Policy.OPT:
        return simulate_opt(trace, capacity)
    if policy is Policy.SETASSOC:
        return simulate_setassoc(trace, capacity, DEFAULT_WAYS if ways is None else ways)
    missing = [name for name, value in (("batch_size", batch_size), ("depth", depth))
               if value is None]
    if missing:
        raise ValueError(f"policy lookahead needs {' and '.join(missing)} (the trace is cut into "
                         f"batches of batch_size lookups; depth batches are planned ahead)")
    return simulate_lookahead(trace, capacity, batch_size, depth, horizon)
