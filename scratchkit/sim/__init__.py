"""Cache simulators on access traces (1-D int64 ids in access order), capacity in rows.

    from scratchkit.sim import simulate, lru_mrc, opt_mrc
    simulate(trace, "lru", 1000).hit_rate
    lru_mrc(trace).hits          # LRU hits at every capacity 1 .. unique ids, in one pass
    profile_lru("ids.npy", rate=0.1)   # streamed from disk; SHARDS-sampled (rate or size)

One policy per module, named once in `POLICIES` (policies.py); every simulator returns a
`SimResult`. `mrc` and `profile` compute whole curves (`Curve`); `lru_engine.cpp` (built by
`native`), `sampling`, `chunks`, `stackdist` and `reuse` are the machinery under them.
"""

from scratchkit.sim.chunks import trace_chunks
from scratchkit.sim.curve import Curve
from scratchkit.sim.depth_curve import DepthCurve, lookahead_depth_curve
from scratchkit.sim.lfu import simulate_lfu
from scratchkit.sim.lookahead import min_capacity, simulate_lookahead
from scratchkit.sim.lru import simulate_lru
from scratchkit.sim.mrc import lru_mrc, opt_mrc
from scratchkit.sim.opt import simulate_opt
from scratchkit.sim.policies import POLICIES, SimPolicy, policy_name
from scratchkit.sim.profile import profile_lru
from scratchkit.sim.record import SimResult
from scratchkit.sim.reuse import next_use
from scratchkit.sim.setassoc import simulate_setassoc
from scratchkit.sim.sampling import curve_error
from scratchkit.sim.simulate import simulate
from scratchkit.sim.stackdist import stack_distance_histogram, stack_distances
from scratchkit.sim.static import hot_set, simulate_static

__all__ = [
    "Curve",
    "DepthCurve",
    "POLICIES",
    "SimPolicy",
    "SimResult",
    "curve_error",
    "hot_set",
    "lookahead_depth_curve",
    "lru_mrc",
    "min_capacity",
    "next_use",
    "opt_mrc",
    "policy_name",
    "profile_lru",
    "simulate",
    "simulate_lfu",
    "simulate_lookahead",
    "simulate_lru",
    "simulate_opt",
    "simulate_setassoc",
    "simulate_static",
    "stack_distance_histogram",
    "stack_distances",
    "trace_chunks",
]
