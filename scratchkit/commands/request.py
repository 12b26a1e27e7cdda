"""What a subcommand was asked for, typed: its parsed flags turned into requests once, as it starts,
then handed to the code that runs it (common.py, capacity.py, data_args.py, validation.py,
distributed.py), which never reads the flags themselves.

    DataRequest       which batches: a synthetic profile and its flags, or --data and its own
    TrainingRequest   how the trainers train: optimizer, cache, look-ahead, threads, device
    ShardedRequest    --world-size N and its flags: the ranks to start, and the command line they run
"""

from __future__ import annotations

from dataclasses import dataclass

from scratchkit.config import TrainConfig


@dataclass(frozen=True)
class DataRequest:
    """--profile and its flags, or --data and its (data_args.py)."""

    default_profile: str = "small"
    profile: str | None = None
    scale: float | None = None
    zipf: float | None = None
    batch_size: int | None = None
    seed: int = 0
    data: str | None = None
    max_rows: int | None = None
    max_samples: int | None = None
    cache_dir: str | None = None
    bad_lines: str = "raise"

    @classmethod
    def from_args(cls, args) -> "DataRequest":
        """The data flags a subcommand's parser has (simulate's have no --profile)."""
        given = {name: getattr(args, name) for name in cls.__dataclass_fields__ if hasattr(args, name)}
        return cls(**given)

    @property
    def profile_name(self) -> str:
        """The synthetic profile: --profile, else the command's default."""
        return self.profile or self.default_profile


@dataclass(frozen=True)
class TrainingRequest:
    """The training flags (common.add_training_args)."""

    optimizer: str = "sgd"
    lr: float | None = None
    summation_order: str = "torch"
    capacity: int | str | None = None  # rows per table, or "min"
    load_factor: float | None = None
    depth: int = 2
    plan_stripes: int = 1
    threads: int | None = None
    batches_ahead: int | None = None  # None: TrainConfig's (bench --validate: 0, validation.py)
    loader_threads: int = TrainConfig.loader_threads
    device: str | None = None

    @classmethod
    def from_args(cls, args) -> "TrainingRequest | None":
        """The training flags, or None where the subcommand has none (trace)."""
        if not hasattr(args, "optimizer"):
            return None
        return cls(**{name: getattr(args, name) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class ShardedRequest:
    """--world-size N, --sharding, --hang-timeout and --inject-fault (distributed.py); `argv`, the
    command line each rank runs again."""

    world_size: int | None = None
    sharding: str = "row"
    hang_timeout: float = 60.0
    inject_fault: str | None = None
    argv: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, args) -> "ShardedRequest":
        return cls(
            args.world_size, args.sharding, args.hang_timeout, args.inject_fault, tuple(getattr(args, "argv", ()))
        )
