"""Your own data in one call: a batch source and the TrainConfig that matches it.

    import scratchkit
    source, config = scratchkit.data.open("criteo", "train.tsv", batch_size=128, max_rows=100_000)
    trainer = scratchkit.make_trainer("scratchpipe", config, source=source)

The config is derived from the source, so a trainer takes both as they are: its table sizes,
batch size, dense features and pooling are the data's; the model is the DLRM of the Criteo
profiles (dim 16, bottom MLP 64-16, top MLP 64-1); the scratchpad holds (D+1) x B x L rows a
table, the worst case of D+1 batches in flight with no reuse, so ScratchPipe always fits
(`scratchkit.minimum_capacities` finds the least that does). `config_for(source)` does the same
for any source of your own (an object with `table_sizes`, `num_dense`, `batch_size`, `batch(i)`
and `len()`).

The command line's `--data KIND:PATH` is the same call (`parse_data_spec`).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from scratchkit.choices import parse_choice
from scratchkit.config import CacheParams, DataConfig, ModelConfig, TrainConfig

DEFAULT_DEPTH = 2  # as the CLI's --depth and CacheParams


class DataKind(str, Enum):
    """The real formats the kit reads."""

    CRITEO = "criteo"  # Criteo Kaggle / Terabyte TSV (plain or .gz)
    MOVIELENS = "movielens"  # MovieLens u.data or ratings.csv
    CRITEO_NPY = "criteo-npy"  # a folder of TorchRec's preprocessed Criteo .npy files

    @classmethod
    def parse(cls, name: "DataKind | str") -> "DataKind":
        return parse_choice(cls, name, "data kind ", choose="choose one of", quote=True)


def parse_data_spec(spec: str) -> tuple[DataKind, Path]:
    """'criteo:PATH' -> (DataKind.CRITEO, Path(PATH))."""
    kind, sep, path = spec.partition(":")
    if not sep or not path:
        raise ValueError(
            f"data {spec!r} is not KIND:PATH; KIND is one of "
            f"{', '.join(k.value for k in DataKind)} (e.g. criteo:train.tsv)"
        )
    return DataKind.parse(kind), Path(path)


def guess_kind(path: str | Path) -> DataKind | None:
    """The kind a file looks like from its first line: 40 tab-separated columns is Criteo, 4
    columns or ratings.csv's header MovieLens; a folder of .npy files criteo-npy. None: none of
    them (or nothing to read). For the hint of a file given as the wrong kind."""
    from scratchkit.data.criteo import NUM_COLUMNS
    from scratchkit.data.lines import open_text
    from scratchkit.data.movielens import MovieLensFormat

    path = Path(path)
    if path.is_dir():
        return DataKind.CRITEO_NPY if any(path.glob("*.npy")) else None
    if not path.is_file():
        return None
    with open_text(path) as lines:
        first = lines.readline().rstrip("\r\n").lstrip("\ufeff")
    if len(first.split("\t")) == NUM_COLUMNS:
        return DataKind.CRITEO
    if first == MovieLensFormat.RATINGS_CSV.header or any(len(first.split(f.separator)) == 4 for f in MovieLensFormat):
        return DataKind.MOVIELENS
    return None


def open_data(
    kind: DataKind | str,
    path: str | Path | None = None,
    *,
    batch_size: int | None = None,
    max_rows: int | None = None,
    max_samples: int | None = None,
    table_sizes=None,
    errors: str = "raise",
    cache_dir: str | Path | None = None,
    progress: bool = True,
    depth: int = DEFAULT_DEPTH,
    seed: int = 0,
    **options,
):
    """(source, config) for a data file. `kind` is "criteo", "movielens" or "criteo-npy", or a
    whole "KIND:PATH" with `path` left out.

    max_rows:    at most this many rows a table (features with more values are hashed into it);
                 None: a row per distinct value. table_sizes: hash into these sizes instead.
    max_samples: read only the first this many samples.
    errors, cache_dir, progress and `options` (MovieLens: like_threshold, format) go to the
    loader; depth and seed to the config (see `config_for`).
    """
    if path is None:
        kind, path = parse_data_spec(str(kind))
    kind = DataKind.parse(kind)
    shared = {"max_rows": max_rows, "max_samples": max_samples, "table_sizes": table_sizes, "progress": progress}
    if batch_size is not None:
        shared["batch_size"] = batch_size
    if kind is DataKind.CRITEO_NPY:
        from scratchkit.data.criteo_npy import load_criteo_npy

        if errors != "raise" or cache_dir is not None or options:
            raise ValueError(
                "criteo-npy reads the .npy files as they are: errors, cache_dir "
                f"and {', '.join(options) or 'other options'} do not apply"
            )
        source = load_criteo_npy(path, **shared)
    elif kind is DataKind.CRITEO:
        from scratchkit.data.criteo import load_criteo

        if options:
            raise ValueError(f"criteo takes no {', '.join(options)}")
        source = load_criteo(path, errors=errors, cache_dir=cache_dir, **shared)
    else:
        from scratchkit.data.movielens import load_movielens

        source = load_movielens(path, errors=errors, cache_dir=cache_dir, **shared, **options)
    return source, config_for(source, depth=depth, seed=seed)


def config_for(source, *, depth: int = DEFAULT_DEPTH, seed: int = 0, dim: int = 16) -> TrainConfig:
    """A TrainConfig that matches `source`: its table sizes, batch size, dense features and
    pooling (the most ids a bag of batch 0 holds), the Criteo profiles' DLRM with embeddings of
    `dim`, and a scratchpad of (depth+1) x B x L rows a table (always enough for ScratchPipe)."""
    first = source.batch(0)
    pooling = max(1, max(-(-len(ids) // first.batch_size) for ids in first.ids))  # ceil(nnz / B)
    data = DataConfig(
        table_sizes=tuple(int(n) for n in source.table_sizes),
        pooling=pooling,
        batch_size=int(source.batch_size),
        num_dense=int(source.num_dense),
        num_batches=len(source),
        seed=seed,
    )
    worst = (depth + 1) * data.batch_size * pooling
    return TrainConfig(
        data=data,
        model=ModelConfig(dim=dim, bottom_mlp=(64, dim), top_mlp=(64, 1)),
        cache=CacheParams(capacity=worst, depth=depth),
        seed=seed,
    )


__all__ = ["open_data", "config_for", "parse_data_spec", "guess_kind", "DataKind"]
