"""Train trainers and the plain PyTorch reference on the same batches; compare every parameter."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterator


from scratchkit.config import SummationOrder, TrainConfig
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.device import Device, as_device
from scratchkit.measure.reference import ReferenceRun
from scratchkit.designs import DESIGNS
from scratchkit.trainers import make_trainer

# On the CPU in deterministic mode every trainer does the reference's float operations in the same
# order, so the difference is exactly 0. On CUDA, atomics in embedding backward and cuBLAS reorder
# sums, so results agree only to rounding: the tolerance below is ~100 float32 ulps of the
# parameters' magnitude (about 1), after a few hundred steps.
CPU_TOLERANCE = 0.0
GPU_TOLERANCE = 1e-4
# With `summation_order="by-id"` (SGD only) a CPU run sums each id's gradients in lookup order, not
# torch's: the sums differ in their last bits, and the updates with them. Measured after 400 steps
# of tiny, small and criteo-like: 3e-8 to 6e-8; the tolerance leaves room for longer runs.
BY_ID_TOLERANCE = 1e-5


@dataclass
class VerifyResult:
    trainer: str
    steps: int
    max_abs_diff: float  # over every dense parameter, embedding row and optimizer state
    dense_max_abs_diff: float
    embedding_max_abs_diff: float
    state_max_abs_diff: float
    tolerance: float
    device: str
    extras: dict = field(default_factory=dict)  # e.g. train_hit_rate for scratchpipe

    @property
    def passed(self) -> bool:
        return self.max_abs_diff <= self.tolerance

    def to_dict(self) -> dict:
        return asdict(self) | {"passed": self.passed} | self.extras


def largest_difference(left, right) -> float:
    """The largest |a - b| over two lists of tensors, pair by pair (None pairs skipped)."""
    if len(left) != len(right):
        raise ValueError(f"cannot compare {len(left)} tensors with {len(right)}")
    diffs = [
        float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
        for a, b in zip(left, right)
        if a is not None and b is not None
    ]
    return max(diffs, default=0.0)


def verify(
    config: TrainConfig,
    trainers: list[str],
    steps: int,
    *,
    source=None,
    device: Device | str | None = None,
    tolerance: float | None = None,
    **options,
) -> Iterator[VerifyResult]:
    """Train the reference once, then each trainer from the same seed on the same batches.

    Yields one result per trainer as soon as it is known (so callers can show progress). device:
    as a trainer's (a Device with a stand-in runtime trains on the CPU through the CUDA lines; the
    reference then trains on that CPU, and the tolerance is CUDA's unless given). `options`: the
    trainers' own (`own_planner=` a planner of your own for scratchpipe: make_trainer).
    """
    if steps <= 0:
        raise ValueError(f"steps must be positive, got {steps}")
    if tolerance is not None and not tolerance >= 0:  # NaN too: nothing would ever pass
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    source = source if source is not None else SyntheticSource(config.data)
    dev = as_device(device)
    if tolerance is None:
        tolerance = GPU_TOLERANCE if dev.is_cuda else CPU_TOLERANCE
        if config.summation_order is SummationOrder.BY_ID:
            tolerance = max(tolerance, BY_ID_TOLERANCE)
    reference = ReferenceRun(config, source, dev.torch)
    reference.train(steps)
    ref_dense = reference.dense_parameters()
    ref_emb, ref_state = reference.embedding_weights(), reference.embedding_state()
    for name in trainers:
        with make_trainer(name, config, source=source, device=dev, **options) as trainer:
            records = list(trainer.train(steps))
            trainer.close()  # flush any cache so the host tables are complete
            dense = [p.detach().cpu() for p in trainer.model.parameters()]
            emb, state = trainer.embedding_weights(), trainer.embedding_state()
        d, e, s = (
            largest_difference(dense, ref_dense),
            largest_difference(emb, ref_emb),
            largest_difference(state, ref_state),
        )
        extras = {"threads": trainer.host_threads}  # the host embedding loops' (TrainConfig.threads)
        if DESIGNS[name].plans_ahead:
            lookups = sum(r.lookups for r in records)
            extras["train_hit_rate"] = sum(r.hits or 0 for r in records) / max(lookups, 1)
        yield VerifyResult(name, steps, max(d, e, s), d, e, s, tolerance, str(dev.torch), extras)
