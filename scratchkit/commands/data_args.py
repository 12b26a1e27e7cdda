"""`--data KIND:PATH` and its flags: a data file instead of a synthetic profile, for every command.

    scratchkit bench  --data criteo:train.tsv --max-rows 100000 --trainers hybrid,scratchpipe
    scratchkit verify --data movielens:u.data --batch-size 16 --trainers hybrid,lru,scratchpipe
    scratchkit trace  --data criteo-npy:/data/criteo --steps 1000 --out ids.npy
    scratchkit simulate --data criteo:train.tsv --mrc

The model and table sizes come from the data (`scratchkit.data.open`), so --data excludes
--profile, --scale and --zipf; --max-rows, --max-samples, --cache-dir and --bad-lines apply to
--data only.
"""

from __future__ import annotations

from scratchkit.commands.notes import batches_held, bench_length, load_note
from scratchkit.commands.request import DataRequest
from scratchkit.data.lines import MalformedLineError


def add_arguments(parser, batch_size: bool = True) -> None:
    group = parser.add_argument_group("your own data (instead of --profile)")
    group.add_argument(
        "--data",
        metavar="KIND:PATH",
        help="criteo:FILE (Criteo TSV, .gz too), movielens:FILE (u.data, "
        "ratings.csv) or criteo-npy:DIR (TorchRec's preprocessed .npy)",
    )
    group.add_argument(
        "--max-rows",
        type=int,
        metavar="N",
        help="at most N rows a table: features with more values are hashed (default: a row per distinct value)",
    )
    group.add_argument("--max-samples", type=int, metavar="N", help="read only the first N samples")
    group.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="keep the converted columns here and reuse them next time (default: a temporary folder)",
    )
    group.add_argument(
        "--bad-lines",
        choices=("raise", "skip"),
        default="raise",
        help="a malformed line stops with its file and line number (raise, the "
        "default), or is left out and counted (skip)",
    )


def open_requested(data: DataRequest, depth: int = 2):
    """(source, config, a few words naming the data) from --data and its flags."""
    from scratchkit.data.open_data import open_data

    stray = [
        flag
        for flag, value in (("--profile", data.profile), ("--scale", data.scale), ("--zipf", data.zipf))
        if value is not None
    ]
    if stray:
        raise ValueError(f"--data derives the model from the data: drop {', '.join(stray)}")
    options = {
        "batch_size": data.batch_size,
        "max_rows": data.max_rows,
        "max_samples": data.max_samples,
        "seed": data.seed,
        "depth": depth,
    }
    if not data.data.startswith("criteo-npy:"):
        options |= {"errors": data.bad_lines, "cache_dir": data.cache_dir}
    elif data.cache_dir is not None or data.bad_lines != "raise":
        raise ValueError("--cache-dir and --bad-lines apply to text files, not criteo-npy")
    try:
        source, config = open_data(data.data, **options)
    except MalformedLineError as error:
        raise ValueError(f"{error}; {bad_line_advice(data.data, error)}") from None
    load_note(source.report, skipping=data.bad_lines == "skip")
    return source, config, f"data {data.data}"


def bad_line_advice(spec: str, error) -> str:
    """What to do about a line the loader refused: the kind the file looks like when it is not
    the kind given, else --bad-lines skip (a wrong header is not a line to skip)."""
    from scratchkit.data.open_data import guess_kind, parse_data_spec

    kind, path = parse_data_spec(spec)
    looks = guess_kind(path)
    if looks is not None and looks is not kind:
        return f"the file looks like {looks.value} data: use --data {looks.value}:{path}"
    if error.kind == "bad header":
        return f"a {kind.value} file of this format starts with the header named"
    return "use --bad-lines skip to leave such lines out (they are counted)"


def refuse_without_data(data: DataRequest) -> None:
    stray = [
        flag
        for flag, value in (
            ("--max-rows", data.max_rows),
            ("--max-samples", data.max_samples),
            ("--cache-dir", data.cache_dir),
        )
        if value is not None
    ]
    if data.bad_lines != "raise":
        stray.append("--bad-lines")
    if stray:
        raise ValueError(f"{', '.join(stray)} apply to --data only")


def check_batches(source, steps: int, warmup: int = 0) -> None:
    """Refuse a run longer than the data, naming the flags and lengths that fit (warm-up counted)."""
    if steps + warmup <= len(source):
        return
    fit_steps, fit_warmup = bench_length(len(source), steps, warmup)
    asked = f"--steps {steps} and --warmup {warmup} ask" if warmup else f"--steps {steps} asks"
    fits = f"--steps {fit_steps} --warmup {fit_warmup}" if warmup else f"--steps {fit_steps}"
    raise ValueError(
        f"{asked} for {steps + warmup} batches; {batches_held(source)}: use {fits} or fewer, or a smaller --batch-size"
    )
