"""The cache policies the simulators know: the kit's own as an enum (`Policy`), and every policy
`simulate` and `scratchkit simulate --policy` can run as a registry (`POLICIES`): its simulator,
the options it takes and those it cannot do without. A policy of your own is one
`POLICIES.register(name, SimPolicy(run, ...))` away."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from scratchkit.choices import Registry
from scratchkit.sim.lfu import simulate_lfu
from scratchkit.sim.lookahead import simulate_lookahead
from scratchkit.sim.lru import simulate_lru
from scratchkit.sim.opt import simulate_opt
from scratchkit.sim.record import SimResult
from scratchkit.sim.setassoc import simulate_setassoc
from scratchkit.sim.static import simulate_static


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


# The keyword options a policy may take (each a `scratchkit simulate` flag: `--batch-size`, ...).
OPTION_NAMES = ("batch_size", "depth", "horizon", "ways", "prefix_share")


@dataclass(frozen=True)
class SimPolicy:
    """One policy: `run(trace, capacity, **options)` -> SimResult; `options` the keyword options
    it takes (from OPTION_NAMES), `needs` those of them it cannot run without; `help` one line."""

    run: Callable[..., SimResult]
    options: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    help: str = ""

    def __post_init__(self):
        unknown = [n for n in self.options if n not in OPTION_NAMES]
        if unknown or not set(self.needs) <= set(self.options):
            raise ValueError(f"a policy's options come from {', '.join(OPTION_NAMES)} and its needs "
                             f"from its options; got options {self.options}, needs {self.needs}")

    @property
    def batched(self) -> bool:
        """Cuts the trace into batches (`batch_size`), as ScratchPipe's look-ahead does."""
        return "batch_size" in self.needs


POLICIES: Registry[SimPolicy] = Registry("cache policy ", {
    Policy.STATIC.value: SimPolicy(simulate_static, ("prefix_share",),
                                   help="pins the most frequent ids of a profiled prefix"),
    Policy.LRU.value: SimPolicy(simulate_lru, help="evicts the least recently used row"),
    Policy.LFU.value: SimPolicy(simulate_lfu, help="evicts the least frequently used row"),
    Policy.OPT.value: SimPolicy(simulate_opt, help="Belady's MIN: evicts the row used furthest ahead"),
    Policy.LOOKAHEAD.value: SimPolicy(simulate_lookahead, ("batch_size", "depth", "horizon"),
                                      ("batch_size", "depth"), help="ScratchPipe's look-forward scratchpad"),
    Policy.SETASSOC.value: SimPolicy(simulate_setassoc, ("ways",), help="LRU inside sets of `ways` rows"),
})


def policy_name(name) -> str:
    """A registered policy's name from a Policy or a name in any case, with spaces around it;
    an unknown one raises ValueError listing the registered ones."""
    key = name.value if isinstance(name, Policy) else str(name).strip().lower()
    if key not in POLICIES:
        POLICIES[key]            # raises, naming the registered policies
    return key
