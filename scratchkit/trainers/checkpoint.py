"""Checkpoints on disk that a crash cannot tear: written whole, or not at all.

A process killed while writing a file leaves half a file. So the checkpoint goes to a temporary
file beside the target, is flushed to the disk (fsync), and only then renamed over the target
(`os.replace` is atomic on POSIX and Windows): a reader finds the previous checkpoint or the new
one, never a mix. The folder is fsynced too, so the rename itself survives a power cut.

A process killed part way through a save leaves its temporary file behind (`.run.pt.<pid>.tmp`,
beside `run.pt`). The next save or load of that path removes every such file whose process is
gone, so a crash leaves nothing for long; a live process's save in progress is left alone.

    save_checkpoint_file(trainer.checkpoint(), "run.pt")
    trainer.load_checkpoint(load_checkpoint_file("run.pt"))
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import torch


def save_checkpoint_file(checkpoint: dict, path: str | Path) -> Path:
    """Write `checkpoint` (a trainer's `checkpoint()`) to `path` atomically. -> the path."""
    path = Path(path)
    remove_abandoned_saves(path)
    temporary = _temporary(path, os.getpid())
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
    remove_abandoned_saves(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint file {path} does not exist")
    return torch.load(path, weights_only=True)


def remove_abandoned_saves(path: str | Path) -> list[Path]:
    """Remove the temporary files of saves to `path` whose process has died. -> those removed."""
    path = Path(path)
    removed = []
    for temporary in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = temporary.name.removeprefix(f".{path.name}.").removesuffix(".tmp")
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            temporary.unlink(missing_ok=True)
            removed.append(temporary)
    return removed


def _temporary(path: Path, pid: int) -> Path:
    return path.with_name(f".{path.name}.{pid}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def _sync_folder(folder: Path) -> None:
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. Windows, where folders cannot be opened
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
