"""Arguments every training subcommand shares, and the TrainConfig they describe."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from scratchkit.commands import data_args
from scratchkit.config import CacheParams, OptimizerConfig, OptimizerKind, SummationOrder, TrainConfig, default_threads
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.profiles import PROFILES, get_profile, scalable_profiles

BENCH_STEPS, BENCH_WARMUP = 100, 5  # bench's timed and warm-up steps when not given
QUICK = (10, 2)  # --quick's: a smoke run


def add_config_args(parser, default_profile: str = "small") -> None:
    """The data flags and the training flags (bench, verify)."""
    add_data_args(parser, default_profile)
    add_training_args(parser)


def add_data_args(parser, default_profile: str = "small") -> None:
    """Which batches: a synthetic profile, or --data (trace takes only these)."""
    parser.set_defaults(default_profile=default_profile)
    parser.add_argument("--profile", default=None, help=f"one of {', '.join(PROFILES)} (default {default_profile})")
    parser.add_argument(
        "--scale",
        type=float,
        default=None,
        help=f"share of the full-size table rows, for {', '.join(scalable_profiles())} "
        "(default: the profile's; criteo-like 0.01, criteo-skew 0.25, the others 1)",
    )
    parser.add_argument("--zipf", type=float, default=None, help="locality: Zipf exponent of the ids (0 = uniform)")
    parser.add_argument(
        "--batch-size", type=int, default=None, help="samples per batch (default: the profile's; 128 for --data)"
    )
    parser.add_argument("--seed", type=int, default=0, help="initial weights and data seed")
    data_args.add_arguments(parser)


def add_training_args(parser) -> None:
    parser.add_argument("--optimizer", default="sgd", help="sgd, adagrad or rowwise_adagrad")
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default 0.05)")
    parser.add_argument(
        "--summation-order",
        default=SummationOrder.TORCH.value,
        choices=[o.value for o in SummationOrder],
        help="the order a CPU run sums each id's gradients in: torch's (bit for bit "
        "PyTorch, the default) or by-id (lookup order, a faster sort; SGD only, "
        "PyTorch's result to float rounding)",
    )
    parser.add_argument(
        "--capacity",
        type=capacity_arg,
        default=None,
        help="cache/scratchpad rows per table, or 'min': the fewest ScratchPipe accepts for this data and depth",
    )
    parser.add_argument("--load-factor", type=float, default=None, help="cache rows as a share of each table")
    parser.add_argument("--depth", type=int, default=2, help="ScratchPipe look-ahead depth D >= 1 (default 2)")
    parser.add_argument(
        "--plan-stripes", type=int, default=1, help="ScratchPipe planners per table, each on its own core (default 1)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help=f"threads for the host's embedding work (hybrid's lookups, backward and "
        f"update; the C++ loops of every CPU run), over tables and bags, "
        f"bit-exact at any N (default: every core this process may use, "
        f"{default_threads()} here, less one for the batch loader's thread and one "
        f"for ScratchPipe's host stages on a CPU run)",
    )
    parser.add_argument(
        "--batches-ahead",
        type=int,
        default=TrainConfig.batches_ahead,
        metavar="N",
        help="batches the batch loader makes ahead of the trainer, checked and (on a GPU) pinned, so a "
        "step only waits for one already made (default %(default)s; 0: made on the step's path)",
    )
    parser.add_argument(
        "--loader-threads",
        type=int,
        default=TrainConfig.loader_threads,
        metavar="N",
        help="the batch loader's threads, a core each, each making whole batches (the same at any N): "
        "more where one core makes batches slower than the device trains them (default %(default)s)",
    )
    parser.add_argument("--device", default=None, help="torch device (default: cuda if present, else cpu)")


def capacity_arg(text: str):
    """A number of rows, or 'min' (every command's --capacity)."""
    if text == "min":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of rows or 'min', got {text!r}") from None


def source_and_config(args, steps: int, warmup: int = 0):
    """(source, config, a few words naming the data) for a run of `steps` steps after `warmup`:
    --data or a profile, with the training flags applied where the command has them; a run longer
    than the data is refused (bench, verify and trace fit theirs to it instead: `fitted_run`)."""
    source, config, name = open_source(args)
    data_args.check_batches(source, steps, warmup)
    return source, train_config(args, config, source, steps + warmup), name


def open_source(args):
    """(source, config, a few words naming the data): --data or a profile, the training flags
    not yet applied (`train_config`)."""
    if args.data is not None:
        return data_args.open_from_args(args, getattr(args, "depth", None) or 2)
    data_args.refuse_without_data(args)
    args.profile = args.profile or args.default_profile
    config = _profile_config(args)
    return SyntheticSource(config.data), config, f"profile {args.profile}"


def train_config(args, config, source, batches: int):
    """`config` with the training flags applied, where the command has them (--capacity min is
    measured over `batches` batches of `source`)."""
    return _training(args, config, source, batches) if hasattr(args, "optimizer") else config


def fitted_run(args, trainers: list[str], steps: int, warmup: int | None = None):
    """(source, config, name, steps, warmup) of a training run (bench; verify, which has no
    warm-up: None): the steps fitted to a shorter source and said so, the caches checked over
    every batch the run trains, and a note where timed figures include start-up costs."""
    from scratchkit.commands.capacity import check_capacity  # torch: only once a command runs
    from scratchkit.commands.notes import fit_bench, fit_steps, startup_note

    source, config, name = open_source(args)
    if warmup is None:
        steps, warmup, timed = fit_steps(source, steps, args.command), 0, False
    else:
        (steps, warmup), timed = fit_bench(source, steps, warmup), True
    batches = steps + warmup
    config = train_config(args, config, source, batches)
    check_capacity(
        args,
        trainers,
        source,
        config,
        batches,
        f"the {batches} batches this run trains" + (" (warm-up included)" if warmup else ""),
    )
    if timed:
        startup_note(steps, warmup)
    return source, config, name, steps, warmup


def run_length(args) -> tuple[int, int]:
    """(timed steps, untimed warm-up steps) the flags ask for: --steps and --warmup (bench's
    defaults where not given; verify has no warm-up), or --quick's, which refuses either flag
    beside it rather than override it."""
    steps, warmup = getattr(args, "steps", None), getattr(args, "warmup", 0)
    if getattr(args, "quick", False):
        given = [flag for flag, value in (("--steps", steps), ("--warmup", warmup)) if value is not None]
        if given:
            raise ValueError(
                f"--quick runs {QUICK[0]} timed steps after {QUICK[1]} warm-up: "
                f"drop {' and '.join(given)}, or drop --quick"
            )
        return QUICK
    return (BENCH_STEPS if steps is None else steps, BENCH_WARMUP if warmup is None else warmup)


def config_from_args(args, batches: int | None = None):
    """The TrainConfig the flags describe (the source: `source_and_config`)."""
    steps, warmup = run_length(args) if batches is None else (batches, 0)
    return source_and_config(args, steps, warmup)[1]


def _profile_config(args):
    if args.scale is not None and args.profile not in scalable_profiles():
        raise ValueError(f"--scale applies to the profiles {', '.join(scalable_profiles())}, not {args.profile!r}")
    config = get_profile(args.profile, scale=args.scale)
    data = {k: v for k, v in (("zipf", args.zipf), ("batch_size", args.batch_size)) if v is not None}
    return config.replace(data=replace(config.data, seed=args.seed, **data), seed=args.seed)


def _training(args, config, source, batches: int):
    """The optimizer and cache flags applied to `config`; --capacity min measured on `source`.
    (Their ranges were checked before anything was read: commands/flags.py.)"""
    optimizer = OptimizerConfig(
        kind=OptimizerKind.parse(args.optimizer), **({"lr": args.lr} if args.lr is not None else {})
    )
    capacity = args.capacity
    if capacity == "min":
        per_table = minimum_capacities(source, args.depth, 0, batches, args.plan_stripes)
        capacity = max(per_table)
        print(
            f"capacity min = {capacity} rows (per table: {per_table}) for depth {args.depth} over {batches} batches",
            file=sys.stderr,
        )
    if capacity is None and args.load_factor is None:  # the profile's (or data's) own cache size
        cache = replace(config.cache, depth=args.depth, plan_stripes=args.plan_stripes)
    else:
        cache = CacheParams(
            capacity=capacity,
            load_factor=args.load_factor,
            depth=args.depth,
            victim_policy=config.cache.victim_policy,
            plan_stripes=args.plan_stripes,
        )
    return config.replace(
        optimizer=optimizer,
        cache=cache,
        summation_order=args.summation_order,
        threads=args.threads,
        batches_ahead=args.batches_ahead,
        loader_threads=args.loader_threads,
    )


def parse_trainer_list(text: str) -> list[str]:
    """'gpu-only,hybrid' -> ['gpu-only', 'hybrid'], each name checked against the registered
    trainers (trainers/registry.py); 'all' -> every registered trainer, in order."""
    from scratchkit.trainers import TRAINERS, available_trainers  # torch: only once a command runs

    if text.strip() == "all":
        return available_trainers()
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError("give at least one trainer, e.g. --trainers gpu-only,hybrid")
    for n in names:
        TRAINERS[n]
    return names


def in_cli_words(error: Exception) -> str:
    """An error's message, with the Python parameters it suggests turned into this CLI's flags."""
    from scratchkit.scratchpipe.capacity import ScratchpadTooSmall

    if isinstance(error, ScratchpadTooSmall):
        return (
            f"{error.problem()} --capacity {error.fits_all} fits every table (--capacity min "
            f"finds it), or use a smaller --depth."
        )
    if isinstance(error, OSError) and error.filename is not None:  # not "[Errno 2] ..."
        return f"{error.filename}: {error.strerror}"
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
