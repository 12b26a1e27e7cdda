"""The cache policies the simulators know, as one registry (`POLICIES`): a policy's name is its
key, the one place it is written; its entry says which simulator runs it, the options it takes and
those it cannot do without, and which of the caches' victim rules (`VictimPolicy`) it follows.
`simulate` and `scratchkit simulate --policy` read it; a policy of your own is one
`POLICIES.register(name, SimPolicy(run, ...))` away.

    static     pins the most frequent ids of a profiled prefix; never changes.
    lru        evicts the least recently used row (VictimPolicy.LRU, as the lru trainer's cache).
    lfu        evicts the least frequently used row, ties least recent (VictimPolicy.LFU).
    opt        Belady's MIN: evicts the row whose next use is furthest (needs the whole future).
    lookahead  ScratchPipe's look-forward scratchpad: every id of the next `depth` batches is made
               resident before its batch trains; the victim is the furthest next use in sight.
    setassoc   LRU inside small sets of `ways` rows, as production GPU caches do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from scratchkit.choices import Registry
from scratchkit.config import VictimPolicy
from scratchkit.sim.lfu import simulate_lfu
from scratchkit.sim.lookahead import simulate_lookahead
from scratchkit.sim.lru import simulate_lru
from scratchkit.sim.opt import simulate_opt
from scratchkit.sim.record import SimResult
from scratchkit.sim.setassoc import simulate_setassoc
from scratchkit.sim.static import simulate_static


# The keyword options a policy may take (each a `scratchkit simulate` flag: `--batch-size`, ...).
OPTION_NAMES = ("batch_size", "depth", "horizon", "ways", "prefix_share")


@dataclass(frozen=True)
class SimPolicy:
    """One policy: `run(trace, capacity, **options)` -> SimResult; `options` the keyword options
    it takes (from OPTION_NAMES), `needs` those of them it cannot run without; `help` one line;
    `victim` the caches' victim rule it simulates, if any."""

    run: Callable[..., SimResult]
    options: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    help: str = ""
    # The caches' victim rule this policy simulates, where it is one of them: a policy named after
    # a victim rule takes its name from it (POLICIES below), so "lru" means one thing in the kit
    victim: VictimPolicy | None = None

    def __post_init__(self):
        unknown = [n for n in self.options if n not in OPTION_NAMES]
        if unknown or not set(self.needs) <= set(self.options):
            raise ValueError(
                f"a policy's options come from {', '.join(OPTION_NAMES)} and its needs "
                f"from its options; got options {self.options}, needs {self.needs}"
            )

    @property
    def batched(self) -> bool:
        """Cuts the trace into batches (`batch_size`), as ScratchPipe's look-ahead does."""
        return "batch_size" in self.needs


POLICIES: Registry[SimPolicy] = Registry(
    "cache policy ",
    {
        "static": SimPolicy(simulate_static, ("prefix_share",), help="pins the most frequent ids of a profiled prefix"),
        VictimPolicy.LRU.value: SimPolicy(
            simulate_lru, help="evicts the least recently used row", victim=VictimPolicy.LRU
        ),
        VictimPolicy.LFU.value: SimPolicy(
            simulate_lfu, help="evicts the least frequently used row", victim=VictimPolicy.LFU
        ),
        "opt": SimPolicy(simulate_opt, help="Belady's MIN: evicts the row used furthest ahead"),
        "lookahead": SimPolicy(
            simulate_lookahead,
            ("batch_size", "depth", "horizon"),
            ("batch_size", "depth"),
            help="ScratchPipe's look-forward scratchpad",
            victim=VictimPolicy.FURTHEST,
        ),
        "setassoc": SimPolicy(simulate_setassoc, ("ways",), help="LRU inside sets of `ways` rows"),
    },
)


def policy_name(name) -> str:
    """A registered policy's name from a name in any case, with spaces around it (or a
    `VictimPolicy` whose rule a policy simulates: VictimPolicy.LRU -> "lru"); an unknown one
    raises ValueError listing the registered ones."""
    key = name.value if isinstance(name, VictimPolicy) else str(name).strip().lower()
    POLICIES[key]  # an unknown name raises here, naming the registered policies
    return key
