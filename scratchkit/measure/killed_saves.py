"""Nothing left behind: a checkpoint save killed part way leaves no torn file, and no temporary
file outlives the next save (scratchkit/trainers/checkpoint.py).

Each round forks a process that saves the same checkpoint over and over, SIGKILLs it at a random
moment, then checks what a user would find: the checkpoint file, if there is one, is whole (it
loads, and equals what was saved); and after this process's own next save, no temporary file of
the path is left.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from scratchkit.trainers.checkpoint import load_checkpoint_file, save_checkpoint_file


@dataclass
class KilledSaves:
    kills: int = 0
    inside_a_save: int = 0  # kills that left a temporary file: the kill landed mid-save
    torn_files: int = 0  # checkpoint files that did not load whole
    left_after_next_save: int = 0


def _save_forever(path: Path, checkpoint: dict) -> None:
    while True:
        save_checkpoint_file(checkpoint, path)


def kill_saves(folder: str | Path, kills: int, seed: int = 0, megabytes: int = 8) -> KilledSaves:
    """`kills` rounds of save-and-SIGKILL into `folder`, each at a random moment of 0.2-0.6 s."""
    path = Path(folder) / "run.pt"
    checkpoint = {"step": torch.tensor(7), "ballast": torch.arange(megabytes * 2**18, dtype=torch.float32)}
    leftovers = lambda: list(path.parent.glob(f".{path.name}.*.tmp"))
    rng, tally = np.random.default_rng(seed), KilledSaves()
    fork = multiprocessing.get_context("fork")
    for _ in range(kills):
        child = fork.Process(target=_save_forever, args=(path, checkpoint), daemon=True)
        child.start()
        time.sleep(float(rng.uniform(0.2, 0.6)))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        tally.kills += 1
        tally.inside_a_save += bool(leftovers())
        if path.exists():
            try:
                whole = torch.equal(load_checkpoint_file(path)["ballast"], checkpoint["ballast"])
            except Exception:  # noqa: BLE001 - any failure to load is a torn file
                whole = False
            tally.torn_files += not whole
        save_checkpoint_file(checkpoint, path)
        tally.left_after_next_save += len(leftovers())
    return tally
