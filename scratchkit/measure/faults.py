"""A fault campaign: kill, interrupt and checkpoint ScratchPipe at random moments, then check that
nothing trained was lost.

Each case trains `steps` batches and injects one kind of fault (`FaultKind`). Afterwards the host
tables, the optimizer state and the dense model must equal plain PyTorch (scratchkit.measure.reference)
trained on exactly the batches whose Train finished, bit for bit; then `train()` is called again to
the end, and the result must equal the reference trained on every batch. A row that differs is a
*lost row*: a trained update that never reached the host tables (or a stale one that did).

    from scratchkit.measure.faults import Campaign
    campaign = Campaign.for_profile("tiny")
    print(campaign.run_case(FaultCase(FaultKind.KILL_HOST, "host-process", "sgd", seed=3)))

`benchmarks/bench_faults.py` runs hundreds of cases and prints the tally; the tests run a slice.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, replace
from enum import Enum
from pathlib import Path

import numpy as np
import torch

from scratchkit.trainers.checkpoint import load_checkpoint_file
from scratchkit.config import CacheParams, OptimizerConfig, OptimizerKind, TrainConfig
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.scratchpipe.events import Stage
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.profiles import get_profile
from scratchkit.measure.reference import ReferenceRun


class FaultKind(str, Enum):
    KILL_HOST = "kill-host"  # SIGKILL the host process at a random moment
    KILL_HOST_AT = "kill-host-at"  # SIGKILL the host process as a given stage of a batch starts
    KILL_PLANNER = "kill-planner"  # SIGKILL the planner process ("process" mode)
    KILL_RUN = "kill-run"  # SIGKILL the whole training process; resume from its last file
    CHECKPOINT = "checkpoint"  # checkpoint() between random steps of a running loop
    SIGINT = "sigint"  # Ctrl-C at a random moment


@dataclass(frozen=True)
class FaultCase:
    kind: FaultKind
    where: str  # where ScratchPipe's host stages run (PlanIn's names)
    optimizer: str  # OptimizerKind's names
    seed: int  # draws the moment (and, for KILL_HOST_AT, nothing: stage and batch say it)
    stage: Stage | None = None
    batch: int = -1


@dataclass
class CaseResult:
    case: FaultCase
    finished_batches: int  # batches whose Train finished before the fault
    error: str  # what train() raised ("" if the fault landed after the last step)
    lost_rows: int  # rows unequal to the reference after the fault, all tables
    resumed_lost_rows: int  # rows unequal after training on to the end
    exact: bool  # both comparisons equal bit for bit, dense model included
    checkpoints: int = 0  # live checkpoints taken (and each compared with the reference)

    def to_dict(self) -> dict:
        return asdict(self) | {
            "case": {k: (v.value if isinstance(v, Enum) else v) for k, v in asdict(self.case).items()}
        }


class Snapshots:
    """The reference's parameters after each of steps 0..n, trained once (the oracle of a case)."""

    def __init__(self, config: TrainConfig, steps: int):
        run = ReferenceRun(config, SyntheticSource(config.data))
        self.after = [_state_of(run)]
        for _ in range(steps):
            run.train(1)
            self.after.append(_state_of(run))

    def lost_rows(self, trainer, finished: int) -> tuple[int, bool]:
        """(rows of the trainer's tables unequal to the reference after `finished` steps, and
        whether everything, the dense model too, is bit for bit equal)."""
        weights, state, dense = self.after[finished]
        lost = 0
        for t, (mine, ref) in enumerate(zip(trainer.embedding_weights(), weights)):
            differs = (mine != ref).any(dim=1)
            ref_state, my_state = state[t], trainer.embedding_state()[t]
            if ref_state is not None:
                differs |= (my_state != ref_state).any(dim=1)
            lost += int(differs.sum())
        dense_equal = all(torch.equal(a.detach(), b) for a, b in zip(trainer.model.parameters(), dense))
        return lost, lost == 0 and dense_equal


def _state_of(run: ReferenceRun):
    return (
        [w.clone() for w in run.embedding_weights()],
        [s.clone() if s is not None else None for s in run.embedding_state()],
        [p.clone() for p in run.dense_parameters()],
    )


class Campaign:
    """Cases over one configuration: the reference is trained once per optimizer."""

    def __init__(self, config: TrainConfig, steps: int):
        self.base, self.steps = config, steps
        self._snapshots: dict[str, Snapshots] = {}
        self._durations: dict[str, float] = {}  # place -> seconds a whole train() takes

    def duration(self, where: str) -> float:
        """How long a fault-free `train(steps)` takes here, so random moments land inside one."""
        from scratchkit.trainers.scratchpipe import ScratchPipeTrainer

        if where not in self._durations:
            trainer = ScratchPipeTrainer(self.config("sgd"), where=where)
            start = time.perf_counter()
            list(trainer.train(self.steps))
            self._durations[where] = time.perf_counter() - start
        return self._durations[where]

    @classmethod
    def for_profile(cls, profile: str = "tiny", steps: int = 40, depth: int = 2) -> "Campaign":
        """The profile at its smallest scratchpad for `depth`: every batch evicts, dirty rows move."""
        config = get_profile(profile)
        minimum = max(minimum_capacities(SyntheticSource(config.data), depth, 0, steps))
        return cls(config.replace(cache=CacheParams(capacity=minimum, depth=depth)), steps)

    def config(self, optimizer: str) -> TrainConfig:
        return self.base.replace(optimizer=OptimizerConfig(kind=OptimizerKind.parse(optimizer), lr=0.1))

    def snapshots(self, optimizer: str) -> Snapshots:
        if optimizer not in self._snapshots:
            self._snapshots[optimizer] = Snapshots(self.config(optimizer), self.steps)
        return self._snapshots[optimizer]

    def run_case(self, case: FaultCase) -> CaseResult:
        from scratchkit.trainers.scratchpipe import ScratchPipeTrainer

        config, rng = self.config(case.optimizer), np.random.default_rng(case.seed)
        if case.kind is FaultKind.KILL_RUN:
            return self._kill_run(case, config, rng)
        hook = _kill_self_at(case.stage, case.batch) if case.kind is FaultKind.KILL_HOST_AT else None
        trainer = ScratchPipeTrainer(config, where=case.where, stage_hook=hook)
        error, checkpoints = "", 0
        with _injector(case, rng.random() * self.duration(case.where)):
            try:
                for record in trainer.train(self.steps):
                    if case.kind is FaultKind.CHECKPOINT and rng.random() < 0.3:
                        saved = trainer.checkpoint()
                        checkpoints += 1
                        if not self._checkpoint_exact(saved, case.optimizer):
                            error = f"checkpoint after step {record.step} differs from the reference"
                            break
            except (Exception, KeyboardInterrupt) as raised:  # the fault, reported by train()
                error = f"{type(raised).__name__}: {raised}"
        result = self._judge(case, trainer, error)
        result.checkpoints = checkpoints
        return result

    def _judge(self, case: FaultCase, trainer, error: str) -> CaseResult:
        snapshots = self.snapshots(case.optimizer)
        finished = trainer.next_batch
        lost, exact = snapshots.lost_rows(trainer, finished)
        trainer.stage_hook = None
        list(trainer.train(self.steps - finished))  # and on to the end, from where it stopped
        resumed_lost, resumed_exact = snapshots.lost_rows(trainer, self.steps)
        return CaseResult(case, finished, error, lost, resumed_lost, exact and resumed_exact and "differs" not in error)

    def _checkpoint_exact(self, saved: dict, optimizer: str) -> bool:
        weights, state, _ = self.snapshots(optimizer).after[saved["next_batch"]]
        return all(torch.equal(a, b) for a, b in zip(saved["weights"], weights)) and all(
            a is None or torch.equal(a, b) for a, b in zip(saved["state"], state)
        )

    # --- the whole run killed: a child process trains and saves checkpoint files ---------------
    def _kill_run(self, case: FaultCase, config: TrainConfig, rng) -> CaseResult:
        from scratchkit.trainers.scratchpipe import ScratchPipeTrainer

        with tempfile.TemporaryDirectory() as folder:
            spec = json.dumps(
                {"folder": folder, "steps": self.steps, "where": case.where, "config": _config_fields(config)}
            )
            child = subprocess.Popen(
                [sys.executable, "-c", _CHILD, spec], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            pids = Path(folder) / "pids"
            while not pids.exists() and child.poll() is None:  # until its first step (torch loads)
                time.sleep(0.01)
            time.sleep(rng.random() * 1.5 * self.duration(case.where))  # sometimes after the end
            child.kill()
            child.wait()
            left = _survivors(pids)
            trainer = ScratchPipeTrainer(config, where=case.where)
            path = Path(folder) / "checkpoint.pt"
            if path.exists():
                trainer.load_checkpoint(load_checkpoint_file(path))
        error = "killed the training process" + (f"; {len(left)} of its processes outlived it" if left else "")
        result = self._judge(case, trainer, error)
        result.exact = result.exact and not left
        return result


def _kill_self_at(stage: Stage, batch: int):
    """A stage hook that SIGKILLs the host process as `stage` of `batch` starts there."""
    parent = os.getpid()

    def hook(s, b):
        if s is stage and b == batch and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


class _injector:
    """For the random-moment kinds: a timer thread that strikes once, `seed`'s moment after start."""

    TARGETS = {FaultKind.KILL_HOST: "scratchpipe-host", FaultKind.KILL_PLANNER: "scratchpipe-planner"}

    def __init__(self, case: FaultCase, delay: float):
        self.case, self.delay, self.done = case, delay, threading.Event()

    def __enter__(self):
        if self.case.kind in self.TARGETS or self.case.kind is FaultKind.SIGINT:
            threading.Thread(target=self._strike, daemon=True).start()
        return self

    def _strike(self):
        if self.done.wait(self.delay):
            return
        if self.case.kind is FaultKind.SIGINT:
            os.kill(os.getpid(), signal.SIGINT)
            return
        for child in multiprocessing.active_children():
            if child.name == self.TARGETS[self.case.kind]:
                # The child may have exited between the listing and the kill: nothing to strike.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGKILL)

    def __exit__(self, *exc):
        self.done.set()
        return False


def _survivors(pids_file: Path, wait: float = 5.0) -> list[int]:
    """Processes the killed run had started that are still running after `wait` seconds."""
    pids = [int(p) for p in pids_file.read_text().split()] if pids_file.exists() else []
    deadline = time.monotonic() + wait
    while True:
        alive = [p for p in pids if _running(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has ended; only its exit status is left


def _config_fields(config: TrainConfig) -> dict:
    """What a KILL_RUN child needs to rebuild `config` (JSON)."""
    data, model = config.data, config.model
    return {
        "table_sizes": list(data.table_sizes),
        "pooling": data.pooling,
        "batch_size": data.batch_size,
        "num_dense": data.num_dense,
        "zipf": data.zipf,
        "dim": model.dim,
        "bottom_mlp": list(model.bottom_mlp),
        "top_mlp": list(model.top_mlp),
        "capacity": config.cache.capacity,
        "depth": config.cache.depth,
        "optimizer": config.optimizer.kind.value,
        "lr": config.optimizer.lr,
    }


def _config_from_fields(f: dict) -> TrainConfig:
    from scratchkit.config import DataConfig, ModelConfig

    return TrainConfig(
        data=DataConfig(
            table_sizes=tuple(f["table_sizes"]),
            pooling=f["pooling"],
            batch_size=f["batch_size"],
            num_dense=f["num_dense"],
            zipf=f["zipf"],
        ),
        model=ModelConfig(dim=f["dim"], bottom_mlp=tuple(f["bottom_mlp"]), top_mlp=tuple(f["top_mlp"])),
        cache=CacheParams(capacity=f["capacity"], depth=f["depth"]),
        optimizer=OptimizerConfig(kind=OptimizerKind.parse(f["optimizer"]), lr=f["lr"]),
    )


def child_main(text: str) -> None:
    """The KILL_RUN child: train, save a checkpoint file every few steps, note each process it
    starts (so the parent can see that none outlives it)."""
    from scratchkit.trainers.checkpoint import save_checkpoint_file
    from scratchkit.trainers.scratchpipe import ScratchPipeTrainer

    spec = json.loads(text)
    folder = Path(spec["folder"])
    trainer = ScratchPipeTrainer(_config_from_fields(spec["config"]), where=spec["where"])
    seen: set[int] = set()
    for record in trainer.train(spec["steps"]):
        pids = {c.pid for c in multiprocessing.active_children()}
        if pids - seen or not seen:
            seen |= pids
            _write_atomically(folder / "pids", " ".join(map(str, sorted(seen))))
        if record.step % 3 == 2:
            save_checkpoint_file(trainer.checkpoint(), folder / "checkpoint.pt")
    time.sleep(60)  # finished: wait to be killed, as a run that goes on would


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


_CHILD = "import sys; from scratchkit.measure.faults import child_main; child_main(sys.argv[1])"


def default_cases(count: int, kinds: list[FaultKind], seed: int = 0, steps: int = 40) -> list[FaultCase]:
    """`count` cases per kind, spread over the places and optimizers each kind can use."""
    places = {
        FaultKind.KILL_HOST: ["host-process"],
        FaultKind.KILL_HOST_AT: ["host-process"],
        FaultKind.KILL_PLANNER: ["process"],
        FaultKind.KILL_RUN: ["host-process", "process"],
        FaultKind.CHECKPOINT: ["host-process", "process", "thread"],
        FaultKind.SIGINT: ["host-process", "process", "thread"],
    }
    optimizers = [k.value for k in OptimizerKind]
    stages = [Stage.COLLECT, Stage.WRITE_BACK, Stage.TRANSFER, Stage.INSERT]
    rng = np.random.default_rng(seed)
    cases = []
    for kind in kinds:
        for i in range(count):
            case = FaultCase(
                kind,
                places[kind][i % len(places[kind])],
                optimizers[(i // len(places[kind])) % 3],
                seed=int(rng.integers(2**31)),
            )
            if kind is FaultKind.KILL_HOST_AT:  # every stage boundary, at batches spread over the run
                case = replace(case, stage=stages[i % len(stages)], batch=int(rng.integers(1, steps - 1)))
            cases.append(case)
    return cases
