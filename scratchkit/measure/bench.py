"""Measure trainers side by side on identical batches: samples/s and where the time goes."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from scratchkit.data.synthetic import SyntheticSource
from scratchkit.trainers import make_trainer


@dataclass
class BenchResult:
    trainer: str
    steps: int                 # timed steps (after warm-up)
    samples_per_s: float
    seconds: float
    stage_seconds: dict[str, float] = field(default_factory=dict)   # per step, mean
    hit_rate: float | None = None
    ratio: float = 1.0         # samples/s relative to the first trainer of the run
    lookups_per_step: float = 0.0           # means over the timed steps: the cost model's inputs
    fetched_rows_per_step: float = 0.0      # rows host -> device
    written_back_rows_per_step: float = 0.0 # rows device -> host
    evicting_tables_per_step: float = 0.0   # tables whose victim choice ran

    def to_dict(self) -> dict:
        return asdict(self)


def run_bench(config, trainers: list[str], steps: int, *, warmup: int = 5, source=None,
              device: str | None = None, wrap=None) -> list[BenchResult]:
    """Each trainer trains `warmup` untimed then `steps` timed steps on the same batches.

    Both in one `train()` call: the warm-up then warms what is timed. (ScratchPipe starts its
    pipeline at each call: it forks the host process and plans a batch's look-ahead before the
    first Train, ~50-70 ms that a warm-up call of its own would not have taken off the timed one.)
    `wrap(iterable, total, desc)` may add a progress bar.
    """
    if steps <= 0:
        raise ValueError(f"steps must be positive, got {steps}")
    source = source if source is not None else SyntheticSource(config.data)
    results = []
    for name in trainers:
        with make_trainer(name, config, source=source, device=device) as trainer:
            if hasattr(trainer, "events"):
                trainer.events.enabled = False   # the visualizer's trace is not what we measure
            steps_run = trainer.train(warmup + steps)
            for _ in range(warmup):
                next(steps_run)
            records = list(wrap(steps_run, steps, name) if wrap else steps_run)
        seconds = sum(r.seconds for r in records)
        stages: dict[str, float] = {}
        for r in records:
            for k, v in r.stage_seconds.items():
                stages[k] = stages.get(k, 0.0) + v / steps
        lookups = sum(r.lookups for r in records)
        hits = None if records[0].hits is None else sum(r.hits for r in records) / max(lookups, 1)
        results.append(BenchResult(name, steps, sum(r.samples for r in records) / seconds, seconds,
                                   stages, hits, lookups_per_step=lookups / steps,
                                   fetched_rows_per_step=sum(r.fetched_rows for r in records) / steps,
                                   written_back_rows_per_step=sum(r.written_back_rows for r in records) / steps,
                                   evicting_tables_per_step=sum(r.evicting_tables for r in records) / steps))
    for r in results:
        r.ratio = r.samples_per_s / results[0].samples_per_s
    return results
