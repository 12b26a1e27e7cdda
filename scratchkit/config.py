"""Configuration as frozen dataclasses: every default carries its reason.

A `TrainConfig` fully determines a run: the same config gives the same batches, the same initial
weights and (in deterministic mode on the CPU) bit-identical final parameters for every trainer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from enum import Enum

from scratchkit.choices import parse_choice


class OptimizerKind(str, Enum):
    """The sparse optimizers every trainer shares (see `scratchkit.embedding.optim`)."""

    SGD = "sgd"
    ADAGRAD = "adagrad"  # element-wise, exactly as torch.optim.Adagrad
    ROWWISE_ADAGRAD = "rowwise_adagrad"  # one accumulator per row, as production recommenders use

    @classmethod
    def parse(cls, name: str) -> "OptimizerKind":
        try:
            return cls(name.replace("-", "_"))
        except ValueError:
            raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(k.value for k in cls)}") from None


class OnNonFiniteLoss(str, Enum):
    """What training does when a step's loss is NaN or infinite."""

    RAISE = "raise"  # stop before that step changes any weight (the default: NaN spreads)
    CONTINUE = "continue"  # train on: for studying divergence on purpose

    @classmethod
    def parse(cls, name: "OnNonFiniteLoss | str") -> "OnNonFiniteLoss":
        return parse_choice(cls, name, "nonfinite_loss ", quote=True)


class SummationOrder(str, Enum):
    """In which order a CPU run's C++ backward sums one id's gradients (embedding/table_batched.py)."""

    TORCH = "torch"  # as torch.sort leaves equal ids: bit for bit plain PyTorch (the default)
    BY_ID = "by-id"  # in lookup order (a stable radix sort, as FBGEMM's CPU backward sorts): a
    # faster sort, PyTorch's result only to float rounding (verify's BY_ID_TOLERANCE)

    @classmethod
    def parse(cls, name: "SummationOrder | str") -> "SummationOrder":
        return parse_choice(cls, name, "summation_order ", quote=True)


@dataclass(frozen=True)
class OptimizerConfig:
    kind: OptimizerKind = OptimizerKind.SGD  # the simplest update, and the paper's setting
    lr: float = 0.05  # large enough that a few hundred steps visibly lower the loss
    eps: float = 1e-10  # torch.optim.Adagrad's default, so the reference can use it unchanged

    def __post_init__(self):
        if not self.lr > 0:
            raise ValueError(f"learning rate must be > 0, got {self.lr}")

    def state_width(self, dim: int) -> int:
        """Optimizer state per embedding row, in floats: 0 (SGD), 1 (row-wise) or dim (element-wise)."""
        return {OptimizerKind.SGD: 0, OptimizerKind.ROWWISE_ADAGRAD: 1, OptimizerKind.ADAGRAD: dim}[self.kind]


@dataclass(frozen=True)
class DataConfig:
    """The synthetic data: table sizes, bag sizes, batch size and how skewed the ids are."""

    table_sizes: tuple[int, ...] = (1000, 1000, 1000, 1000)
    pooling: int = 2  # ids per bag (the pooling factor L); DLRM benchmarks use 1-100
    batch_size: int = 64  # samples per mini-batch (B)
    num_dense: int = 13  # Criteo's 13 integer features
    zipf: float | tuple[float, ...] = 1.05  # locality: 0 = uniform ids; ~1 = real CTR logs; or one per table
    num_batches: int = 10_000  # length of the (lazy) dataset; batches are made on demand
    seed: int = 0  # same seed, same batches
    # The rows the Zipf law ranks over, per table; None: the table sizes. A profile scaled down to fit
    # a laptop keeps its full-size law and folds the ranks into its smaller tables (data/synthetic.py).
    rank_rows: tuple[int, ...] | None = None

    def exponent(self, table: int) -> float:
        """Table `table`'s Zipf exponent."""
        return float(self.zipf[table] if isinstance(self.zipf, tuple) else self.zipf)

    def ranks(self, table: int) -> int:
        """How many ranks table `table`'s Zipf law has."""
        return int(self.rank_rows[table] if self.rank_rows is not None else self.table_sizes[table])

    def __post_init__(self):
        if len(self.table_sizes) == 0:
            raise ValueError("need at least one embedding table")
        for t, n in enumerate(self.table_sizes):
            if int(n) <= 0:
                raise ValueError(f"table {t}: size must be positive, got {n}")
        for name in ("pooling", "batch_size", "num_batches"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_dense < 0:
            raise ValueError(f"num_dense must be >= 0, got {self.num_dense}")
        zipfs = self.zipf if isinstance(self.zipf, tuple) else (self.zipf,)
        if isinstance(self.zipf, tuple) and len(zipfs) != len(self.table_sizes):
            raise ValueError(f"give one zipf exponent, or one per table ({len(self.table_sizes)}), got {len(zipfs)}")
        for z in zipfs:
            if not z >= 0:
                raise ValueError(f"zipf exponent must be >= 0, got {z}")
        if self.rank_rows is not None:
            if len(self.rank_rows) != len(self.table_sizes):
                raise ValueError(
                    f"rank_rows needs one count per table ({len(self.table_sizes)}), got {len(self.rank_rows)}"
                )
            for t, (r, n) in enumerate(zip(self.rank_rows, self.table_sizes)):
                if int(r) < int(n):
                    raise ValueError(f"table {t}: rank_rows {r} is fewer than its {n} rows")


@dataclass(frozen=True)
class ModelConfig:
    """The DLRM's dense part. The bottom MLP's last width must equal the embedding dim."""

    dim: int = 16  # embedding width; DLRM's Kaggle config uses 16
    bottom_mlp: tuple[int, ...] = (32, 16)  # dense features -> dim
    top_mlp: tuple[int, ...] = (32, 1)  # interactions -> one click logit

    def __post_init__(self):
        if self.dim <= 0:
            raise ValueError(f"embedding dim must be positive, got {self.dim}")
        if not self.bottom_mlp or self.bottom_mlp[-1] != self.dim:
            raise ValueError(f"bottom_mlp must end in the embedding dim {self.dim}, got {self.bottom_mlp}")
        if not self.top_mlp or self.top_mlp[-1] != 1:
            raise ValueError(f"top_mlp must end in 1 (the click logit), got {self.top_mlp}")


class VictimPolicy(str, Enum):
    """Which resident row gives up its slot when a miss needs one (the kit's one such choice)."""

    FURTHEST = "furthest"  # ScratchPipe: furthest next use among the batches it can see, then LRU
    LRU = "lru"  # least recently used (a cache) / least recently trained (ScratchPipe)
    LFU = "lfu"  # least frequently used since the row came in (a cache)

    @classmethod
    def parse(cls, name: "VictimPolicy | str") -> "VictimPolicy":
        return parse_choice(cls, name, "victim policy ")


@dataclass(frozen=True)
class CacheParams:
    """How big the device-side cache / scratchpad is and how far ahead ScratchPipe plans.

    Give `capacity` (rows per table) or `load_factor` (capacity / num_rows, TorchRec's term); with
    neither, the cache holds 10% of each table, a common budget in the caching literature.
    """

    capacity: int | None = None
    load_factor: float | None = None
    depth: int = 2  # look-ahead depth D: batches planned ahead of Train
    victim_policy: VictimPolicy | str = VictimPolicy.FURTHEST  # ScratchPipe's victim choice
    # ScratchPipe's planners per table, each on its own core, owning the ids id % plan_stripes and
    # its share of the slots (scratchkit/scratchpipe/stripes.py): Plan keeps up with a fast GPU
    plan_stripes: int = 1

    def __post_init__(self):
        if self.capacity is not None and self.load_factor is not None:
            raise ValueError("give capacity or load_factor, not both")
        if self.capacity is not None and self.capacity <= 0:
            raise ValueError(f"capacity must be positive, got {self.capacity}")
        if self.load_factor is not None and not 0 < self.load_factor <= 1:
            raise ValueError(f"load_factor must be in (0, 1], got {self.load_factor}")
        if self.depth < 1:
            raise ValueError(f"look-ahead depth must be >= 1, got {self.depth}")
        object.__setattr__(self, "victim_policy", VictimPolicy.parse(self.victim_policy))
        if isinstance(self.plan_stripes, bool) or not isinstance(self.plan_stripes, int) or self.plan_stripes < 1:
            raise ValueError(f"plan_stripes must be an integer >= 1, got {self.plan_stripes!r}")

    def capacity_for(self, num_rows: int) -> int:
        """Rows of cache for a table of `num_rows` rows (never more than the table)."""
        if self.capacity is not None:
            return min(self.capacity, num_rows)
        share = 0.1 if self.load_factor is None else self.load_factor
        return max(1, min(num_rows, int(round(share * num_rows))))


def default_threads() -> int:
    """The cores this process may run on (its CPU affinity; os.cpu_count() where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class TrainConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    cache: CacheParams = field(default_factory=CacheParams)
    seed: int = 0  # initial weights; the data has its own seed
    deterministic: bool = True  # on CUDA, torch's deterministic algorithms (CPU ops are already)
    # torch intra-op threads on the CPU: the dense model's ops. They are small (a 2k-lookup op takes
    # ~15 us on one thread, but ~8 ms with 2 OpenMP threads when the other core is busy), and a
    # matmul's sums split by thread, so the reference must run on the same count. None: torch's.
    cpu_threads: int | None = 1
    # threads for the host's embedding work, the C++ table-batched loops (hybrid's lookups, backward
    # and update on the host; every trainer's on a CPU run): over tables and bags, bit-exact at every
    # count. None: every core this process may use (`default_threads`), less the batch loader's
    # threads (`loader_threads`) and one for ScratchPipe's host stages on a CPU run.
    threads: int | None = None
    # batches the batch loader makes ahead of the trainer, checked and (on a GPU) pinned, so a
    # step only takes one already made (data/loader.py); 0: each batch is made on the step's path
    batches_ahead: int = 2
    # the loader's threads, each a core of its own, each making whole batches (the same batches at
    # any count): more where one core makes batches slower than the device trains them
    loader_threads: int = 1
    # a NaN or infinite loss stops training with an error naming the step (OnNonFiniteLoss)
    nonfinite_loss: OnNonFiniteLoss | str = OnNonFiniteLoss.RAISE
    # the order a CPU run sums each id's gradients in (SummationOrder): PyTorch's, or a faster one
    summation_order: SummationOrder | str = SummationOrder.TORCH

    def __post_init__(self):
        for name in ("cpu_threads", "threads"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be an integer >= 1 or None, got {value!r}")
        for name, least in (("batches_ahead", 0), ("loader_threads", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        object.__setattr__(self, "nonfinite_loss", OnNonFiniteLoss.parse(self.nonfinite_loss))
        object.__setattr__(self, "summation_order", SummationOrder.parse(self.summation_order))
        if self.summation_order is SummationOrder.BY_ID and self.optimizer.kind is not OptimizerKind.SGD:
            # Adagrad's first steps scale each gradient by its own size: a sum near zero whose last
            # bits differ becomes a different full step (small, row-wise Adagrad: 0.27 in 400 steps)
            raise ValueError(
                f"summation_order='by-id' is offered with SGD only, not "
                f"{self.optimizer.kind.value}: Adagrad turns its rounding into whole steps"
            )

    def host_threads(self, reserved: int = 0) -> int:
        """The threads the host's embedding work runs on: `threads`, or every core this process
        may use less the batch loader's (`loader_threads`, where `batches_ahead` runs them) and
        `reserved` (cores another process of the run needs), at least one."""
        if self.threads is not None:
            return self.threads
        loader = self.loader_threads if self.batches_ahead > 0 else 0
        return max(1, default_threads() - loader - reserved)

    def replace(self, **changes) -> "TrainConfig":
        """A copy with some fields changed; nested fields as `data=replace(cfg.data, ...)`."""
        return replace(self, **changes)

    def alone(self) -> "TrainConfig":
        """This config with each stage run alone, as `calibrate` times the stages and `bench
        --validate` holds the cost model to them (docs/costmodel.md): no batch loader's thread beside
        the steps (each batch made on the step's path: on a machine of few cores the loader takes a
        core and the GIL from the stages, which the model does not price), one thread for torch and
        the C++ loops (the calibrated curves are one thread's)."""
        return self.replace(batches_ahead=0, threads=1)
