"""Arguments every training subcommand shares, and the TrainConfig they describe."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from scratchkit.config import CacheParams, OptimizerConfig, OptimizerKind
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.profiles import PROFILES, SCALABLE, get_profile


def add_config_args(parser) -> None:
    parser.add_argument("--profile", default="small", help=f"one of {', '.join(PROFILES)} (default small)")
    parser.add_argument("--scale", type=float, default=None,
                        help=f"share of the full-size table rows, for {', '.join(SCALABLE)} "
                             "(default: the profile's; criteo-like 0.01, criteo-skew 0.25, the others 1)")
    parser.add_argument("--zipf", type=float, default=None, help="locality: Zipf exponent of the ids (0 = uniform)")
    parser.add_argument("--batch-size", type=int, default=None, help="samples per batch (default: the profile's)")
    parser.add_argument("--optimizer", default="sgd", help="sgd, adagrad or rowwise_adagrad")
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default 0.05)")
    parser.add_argument("--seed", type=int, default=0, help="initial weights and data seed")
    parser.add_argument("--capacity", type=_capacity, default=None,
                        help="cache/scratchpad rows per table, or 'min': the fewest ScratchPipe "
                             "accepts for this data and depth")
    parser.add_argument("--load-factor", type=float, default=None, help="cache rows as a share of each table")
    parser.add_argument("--depth", type=int, default=2, help="ScratchPipe look-ahead depth D (default 2)")
    parser.add_argument("--plan-shards", type=int, default=1,
                        help="ScratchPipe planners per table, each on its own core (default 1)")
    parser.add_argument("--device", default=None, help="torch device (default: cuda if present, else cpu)")


def _capacity(text: str):
    if text == "min":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of rows or 'min', got {text!r}") from None


def config_from_args(args):
    if args.scale is not None and args.profile not in SCALABLE:
        raise ValueError(f"--scale applies to the profiles {', '.join(SCALABLE)}, not {args.profile!r}")
    if args.plan_shards < 1:
        raise ValueError(f"--plan-shards must be >= 1, got {args.plan_shards}")
    config = get_profile(args.profile, scale=args.scale)
    data = {k: v for k, v in (("zipf", args.zipf), ("batch_size", args.batch_size)) if v is not None}
    optimizer = OptimizerConfig(kind=OptimizerKind.parse(args.optimizer),
                                **({"lr": args.lr} if args.lr is not None else {}))
    if args.capacity == "min":
        steps = getattr(args, "steps", 100) + getattr(args, "warmup", 0)
        per_table = minimum_capacities(SyntheticSource(config.replace(
            data=replace(config.data, seed=args.seed, **data)).data), args.depth, 0, steps,
            args.plan_shards)
        args.capacity = max(per_table)
        print(f"capacity min = {args.capacity} rows (per table: {per_table}) for depth {args.depth} "
              f"over {steps} batches", file=sys.stderr)
    if args.capacity is None and args.load_factor is None:   # the profile's own cache size
        cache = replace(config.cache, depth=args.depth, plan_shards=args.plan_shards)
    else:
        cache = CacheParams(capacity=args.capacity, load_factor=args.load_factor, depth=args.depth,
                            victim_policy=config.cache.victim_policy, plan_shards=args.plan_shards)
    return config.replace(data=replace(config.data, seed=args.seed, **data), optimizer=optimizer,
                          cache=cache, seed=args.seed)


def parse_trainer_list(text: str) -> list[str]:
    """'gpu-only,hybrid' -> ['gpu-only', 'hybrid'], each name checked."""
    from scratchkit.trainers import TrainerKind   # torch: only once a command runs

    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError("give at least one trainer, e.g. --trainers gpu-only,hybrid")
    for n in names:
        TrainerKind.parse(n)
    return names




def in_cli_words(error: Exception) -> str:
    """An error's message, with the Python parameters it suggests turned into this CLI's flags."""
    from scratchkit.scratchpipe.capacity import ScratchpadTooSmall

    if isinstance(error, ScratchpadTooSmall):
        return (f"{error.problem()} --capacity {error.fits_all} fits every table (--capacity min "
                f"finds it), or use a smaller --depth.")
    return str(error)


def progress(iterable, total: int, desc: str):
    """A progress bar on stderr when it is a terminal; silent otherwise (tests, pipes, CI)."""
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="step", leave=False, disable=None)


def progress_counter(total: int | None, desc: str, unit: str = "access"):
    """A bar advanced by hand (`bar.update(n)`), on stderr when it is a terminal; silent otherwise.
    A context manager: the bar is closed (and erased) on the way out."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, leave=False, disable=None)
