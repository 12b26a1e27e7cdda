"""`simulate(trace, policy, capacity, ...)`: run any policy by name, with its options checked."""

from __future__ import annotations

from scratchkit.sim.checks import as_capacity, as_trace
from scratchkit.sim.policies import OPTION_NAMES, POLICIES, policy_name
from scratchkit.sim.record import SimResult


def simulate(
    trace, policy, capacity, *, batch_size=None, depth=None, horizon=None, ways=None, prefix_share=None
) -> SimResult:
    """Simulate `policy` (a name registered in policies.POLICIES, in any case) with `capacity` rows
    on `trace` (1-D int64 ids).

    lookahead needs `batch_size` and `depth` (`horizon` optional); setassoc takes `ways`
    (default DEFAULT_WAYS); static takes `prefix_share` (default DEFAULT_PREFIX_SHARE).
    """
    name = policy_name(policy)
    spec = POLICIES[name]
    trace = as_trace(trace)
    capacity = as_capacity(capacity)
    given = dict(zip(OPTION_NAMES, (batch_size, depth, horizon, ways, prefix_share)))
    # any option given that the policy does not take is an error, so that a typo such as `ways=`
    # on an LRU run is reported instead of silently ignored
    stray = [n for n, value in given.items() if value is not None and n not in spec.options]
    if stray:
        takes = ", ".join(spec.options) or "no options"
        raise ValueError(f"policy {name} does not take {', '.join(stray)} (it takes {takes})")
    missing = [n for n in spec.needs if given[n] is None]
    if missing:
        why = (
            " (the trace is cut into batches of batch_size lookups; depth batches are planned ahead)"
            if spec.batched
            else ""
        )
        raise ValueError(f"policy {name} needs {' and '.join(missing)}{why}")
    return spec.run(trace, capacity, **{n: given[n] for n in spec.options if given[n] is not None})
