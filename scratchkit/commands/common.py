"""Arguments every training subcommand shares, and the TrainConfig they describe."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from scratchkit.commands import data_args
from scratchkit.commands.request import DataRequest, TrainingRequest
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
        f"for ScratchPipe's host stages on a CPU run; with --validate 1)",
    )
    parser.add_argument(
        "--batches-ahead",
        type=int,
        default=None,
        metavar="N",
        help="batches the batch loader makes ahead of the trainer, checked and (on a GPU) pinned, so a "
        f"step only waits for one already made (default {TrainConfig.batches_ahead}; with --validate 0; "
        "0: made on the step's path)",
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


def source_and_config(data: DataRequest, training: TrainingRequest | None, steps: int, warmup: int = 0):
    """(source, config, a few words naming the data) for a run of `steps` steps after `warmup`:
    --data or a profile, with the training flags applied where the command has them; a run longer
    than the data is refused (bench, verify and trace fit theirs to it instead: `fitted_run`)."""
    source, config, name = open_source(data, training)
    data_args.check_batches(source, steps, warmup)
    return source, train_config(training, config, source, steps + warmup), name


def open_source(data: DataRequest, training: TrainingRequest | None = None):
    """(source, config, a few words naming the data): --data or a profile, the training flags
    not yet applied (`train_config`)."""
    if data.data is not None:
        return data_args.open_requested(data, training.depth if training is not None else 2)
    data_args.refuse_without_data(data)
    config = profile_config(data)
    return SyntheticSource(config.data), config, f"profile {data.profile_name}"


def train_config(training: TrainingRequest | None, config, source, batches: int):
    """`config` with the training flags applied, where the command has them (--capacity min is
    measured over `batches` batches of `source`)."""
    return _training(training, config, source, batches) if training is not None else config


def fitted_run(
    command: str,
    data: DataRequest,
    training: TrainingRequest,
    trainers: list[str],
    steps: int,
    warmup: int | None = None,
):
    """(source, config, name, steps, warmup) of a training run (bench; verify, which has no
    warm-up: None): the steps fitted to a shorter source and said so, the caches checked over
    every batch the run trains, and a note where timed figures include start-up costs."""
    from scratchkit.commands.capacity import check_capacity  # torch: only once a command runs
    from scratchkit.commands.notes import fit_bench, fit_steps, startup_note

    source, config, name = open_source(data, training)
    if warmup is None:
        steps, warmup, timed = fit_steps(source, steps, command), 0, False
    else:
        (steps, warmup), timed = fit_bench(source, steps, warmup), True
    batches = steps + warmup
    config = train_config(training, config, source, batches)
    check_capacity(
        training,
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


def config_of(data: DataRequest, training: TrainingRequest | None, steps: int, warmup: int = 0):
    """The TrainConfig the requests describe, for a run of `steps` after `warmup`."""
    return source_and_config(data, training, steps, warmup)[1]


def profile_config(data: DataRequest):
    """The synthetic profile the data flags name, with their changes."""
    if data.scale is not None and data.profile_name not in scalable_profiles():
        raise ValueError(f"--scale applies to the profiles {', '.join(scalable_profiles())}, not {data.profile_name!r}")
    config = get_profile(data.profile_name, scale=data.scale)
    changed = {k: v for k, v in (("zipf", data.zipf), ("batch_size", data.batch_size)) if v is not None}
    return config.replace(data=replace(config.data, seed=data.seed, **changed), seed=data.seed)


def _training(training: TrainingRequest, config, source, batches: int):
    """The optimizer and cache flags applied to `config`; --capacity min measured on `source`.
    (Their ranges were checked before anything was read: commands/flags.py.)"""
    optimizer = OptimizerConfig(
        kind=OptimizerKind.parse(training.optimizer), **({"lr": training.lr} if training.lr is not None else {})
    )
    capacity = training.capacity
    if capacity == "min":
        per_table = minimum_capacities(source, training.depth, 0, batches, training.plan_stripes)
        capacity = max(per_table)
        print(
            f"capacity min = {capacity} rows (per table: {per_table}) for depth {training.depth} over {batches} batches",
            file=sys.stderr,
        )
    if capacity is None and training.load_factor is None:  # the profile's (or data's) own cache size
        cache = replace(config.cache, depth=training.depth, plan_stripes=training.plan_stripes)
    else:
        cache = CacheParams(
            capacity=capacity,
            load_factor=training.load_factor,
            depth=training.depth,
            victim_policy=config.cache.victim_policy,
            plan_stripes=training.plan_stripes,
        )
    return config.replace(
        optimizer=optimizer,
        cache=cache,
        summation_order=training.summation_order,
        threads=training.threads,
        batches_ahead=TrainConfig.batches_ahead if training.batches_ahead is None else training.batches_ahead,
        loader_threads=training.loader_threads,
    )


def parse_trainer_list(text: str) -> list[str]:
    """'gpu-only,hybrid' -> ['gpu-only', 'hybrid'], each name checked against the designs
    (scratchkit/designs); 'all' -> every design, in order."""
    from scratchkit.designs import DESIGNS

    if text.strip() == "all":
        return list(DESIGNS)
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError("give at least one trainer, e.g. --trainers gpu-only,hybrid")
    for n in names:
        DESIGNS[n]
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
