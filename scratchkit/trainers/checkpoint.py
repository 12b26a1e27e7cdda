"""Checkpoints on disk that a crash cannot tear: written whole, or not at all.

A process killed while writing a file leaves half a file. So the checkpoint goes to a temporary
file beside the target, is flushed to the disk (fsync), and only then renamed over the target
(`os.replace` is atomic on POSIX and Windows): a reader finds the previous checkpoint or the new
one, never a mix. The folder is fsynced too, so the rename itself survives a power cut.

    save_checkpoint_file(trainer.checkpoint(), "run.pt")
    trainer.load_checkpoint(load_checkpoint_file("run.pt"))
"""
from __future__ import annotations

import os
from pathlib import Path

import torch


def save_checkpoint_file(checkpoint: dict, path: str | Path) -> Path:
    """Write `checkpoint` (a trainer's `checkpoint()`) to `path` atomically. -> the path."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as file:
            torch.save(checkpoint, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    _sync_folder(path.parent)
    return path


def load_checkpoint_file(path: str | Path) -> dict:
    """Read a checkpoint that `save_checkpoint_file` wrote (tensors and plain data only)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint file {path} does not exist")
    return torch.load(path, weights_only=True)


def _sync_folder(folder: Path) -> None:
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:   # e.g. Windows, where folders cannot be opened
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
