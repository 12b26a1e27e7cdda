"""The numbers a command's flags take, checked before the command reads anything: a bad one is
refused in one line naming the flag, its range and what it counts, never after a data file was
read whole, and never in a Python parameter's name (`batch_size must be ...`) that no flag has.

    scratchkit bench: error: --capacity must be >= 1 (rows in the cache), got 0; or --capacity min: ...
"""

from __future__ import annotations

# flag -> (the least value, whether the least is allowed, what it counts: None for a plain count)
RANGES = {
    "--steps": (1, True, None),
    "--warmup": (0, True, "untimed steps before the timed ones"),
    "--depth": (1, True, "batches planned ahead of training"),
    "--plan-stripes": (1, True, None),
    "--threads": (1, True, None),
    "--batches-ahead": (0, True, "batches made ahead of the steps"),
    "--loader-threads": (1, True, None),
    "--batch-size": (1, True, "samples per batch"),
    "--max-rows": (1, True, "rows a table"),
    "--max-samples": (1, True, "samples read"),
    "--capacity": (1, True, "rows in the cache"),
    "--world-size": (1, True, None),
    "--rounds": (1, True, None),
    "--points": (1, True, None),
    "--sample-size": (1, True, "ids the sample keeps"),
    "--ways": (1, True, "rows per set"),
    "--horizon": (0, True, "batches past the plan"),
    "--lr": (0, False, "the learning rate"),
    "--scale": (0, False, "a share of the full-size tables"),
    "--zipf": (0, True, "the Zipf exponent; 0 is uniform"),
    "--tolerance": (0, True, None),
    "--hang-timeout": (0, False, "seconds"),
}
SHARES = {"--load-factor": "share of each table", "--sample": "rate", "--prefix-share": "share of the trace"}
OWN_WORDS = {("simulate", "--batch-size"): "lookups per batch"}  # where a command counts otherwise
AFTER = {"--capacity": "; or --capacity min: the fewest rows ScratchPipe accepts for this data and depth"}


def check_flags(args) -> None:
    """Refuse the first flag of `args` (a parsed command line) outside its range or its closed
    choice (ValueError)."""
    check_numbers(args)
    if isinstance(getattr(args, "optimizer", None), str):
        from scratchkit.config import OptimizerKind

        OptimizerKind.parse(args.optimizer)
    if isinstance(getattr(args, "policy", None), str):
        from scratchkit.sim.policies import policy_name

        policy_name(args.policy)


def check_numbers(args) -> None:
    """Refuse the first flag of `args` outside its range."""
    for flag, (least, inclusive, what) in RANGES.items():
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue  # not this command's, not given, or a word ('min')
        if not (value >= least if inclusive else value > least):  # NaN fails both
            what = OWN_WORDS.get((getattr(args, "command", None), flag), what)
            bound = f">= {least}" if inclusive else f"> {least}"
            counts = f" ({what})" if what else ""
            raise ValueError(f"{flag} must be {bound}{counts}, got {value}{AFTER.get(flag, '')}")
    for flag, share in SHARES.items():
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if isinstance(value, float) and not 0.0 < value <= 1.0:
            raise ValueError(f"{flag} must be a {share} in (0, 1], got {value}")
