"""Machines by name: `this-cpu` (this machine, calibrated) and the GPU servers.

    this-cpu      this machine: the hardware `scratchkit calibrate` saved (hardware.json in
                  the kit's cache folder, or $SCRATCHKIT_HARDWARE) when there is one; else
                  measured now, quickly (a few seconds, once per process). `origin` says which.
    the GPU servers
                  v100-pcie3, a100-pcie4, h100-pcie5, h100-sxm5, h200 and any registered since (`SERVERS`),
                  every constant with its source (scratchkit/costmodel/servers.py); each host at
                  one GPU's share of its cores and memory, or with `:socket` (h100-pcie5:socket)
                  at a whole socket's

A machine's figures, their curves and their JSON form are a `Hardware` (costmodel/hardware.py); how
this machine is measured, in calibration/calibrate.py.
"""

from __future__ import annotations

import os
import warnings
from functools import lru_cache
from pathlib import Path

from scratchkit.costmodel.hardware import Hardware, OutdatedHardwareError, load_hardware, save_hardware
from scratchkit.costmodel.servers import SERVERS, HostShare, server

THIS_CPU = "this-cpu"


def machine_names() -> tuple[str, ...]:
    """`this-cpu`, then every registered GPU server."""
    return (THIS_CPU, *SERVERS)


ENV_PATH = "SCRATCHKIT_HARDWARE"


def saved_hardware_path() -> Path:
    """Where `scratchkit calibrate` saves this machine's hardware and `this-cpu` looks for it:
    $SCRATCHKIT_HARDWARE, else hardware.json in the kit's cache folder (beside the
    built kernels: $SCRATCHKIT_CACHE_DIR, else ~/.cache/scratchkit)."""
    from scratchkit.kernels.host_build import default_cache_dir

    override = os.environ.get(ENV_PATH)
    return Path(override) if override else default_cache_dir().parent / "hardware.json"


def save_calibration(machine: Hardware, path: Path | None = None) -> Path:
    """Save calibrated hardware where `this-cpu` finds it (or at `path`), and forget any
    hardware this process had read or measured before."""
    written = save_hardware(machine, path if path is not None else saved_hardware_path())
    forget_this_cpu()
    return written


def forget_this_cpu() -> None:
    """Read or measure `this-cpu` afresh next time (after a calibration, or in tests)."""
    _saved.cache_clear()
    _measured.cache_clear()


def this_cpu() -> Hardware:
    """This machine: the saved calibration when there is one, else measured now (quick)."""
    path = saved_hardware_path()
    if not path.exists():
        return _measured()
    try:
        return _saved(path, path.stat().st_mtime_ns)
    except OutdatedHardwareError as err:
        warnings.warn(
            f"{err}: measuring this machine now, quickly; `scratchkit calibrate` saves it again", stacklevel=2
        )
        return _measured()


def changed_loops(machine: Hardware) -> list[str]:
    """The kit's C++ loops built otherwise now than when `machine` was measured (an edit, another
    compiler): their speed in it is not theirs now. Hardware saved before builds were recorded
    names them all."""
    from scratchkit.calibration.calibrate import loop_builds

    return [name for name, build in loop_builds().items() if machine.native_builds.get(name) != build]


@lru_cache(maxsize=4)
def _saved(path: Path, mtime_ns: int) -> Hardware:
    from dataclasses import replace

    machine = load_hardware(path)
    changed = changed_loops(machine)  # checked once per file, here: the sources hash on each check
    if machine.co_run_cores is None:
        raise OutdatedHardwareError(
            f"hardware {path} was saved before the kit measured the cores ScratchPipe's two sides get at once"
        )
    if changed:
        raise OutdatedHardwareError(
            f"hardware {path} was measured with other builds of the kit's C++ loops ({', '.join(changed)})"
        )
    return replace(machine, origin=f"saved calibration {path} ({machine.origin or 'no date'})")


@lru_cache(maxsize=1)
def _measured() -> Hardware:
    from dataclasses import replace

    from scratchkit.calibration.calibrate import calibrate

    machine = calibrate(quick=True)
    path = saved_hardware_path()
    why = f"the saved calibration at {path} is an earlier kit's" if path.exists() else f"no saved calibration at {path}"
    return replace(machine, origin=f"measured now, quickly ({machine.origin}): {why}; `scratchkit calibrate` saves one")


def get_machine(name: str) -> Hardware:
    """A machine by name (`this-cpu`: the saved calibration, else measured on first use; a
    server's name with `:socket`, its host priced at a whole socket: servers.HostShare)."""
    if name == THIS_CPU:
        return this_cpu()
    base, _, share = name.partition(":")
    if base not in SERVERS or share not in ("", HostShare.SOCKET.value):
        raise ValueError(f"unknown machine {name!r}; choose one of {', '.join(machine_names())} or all")
    return server(base, HostShare(share) if share else HostShare.GPU)


def parse_machines(text: str) -> list[str]:
    """'all' or a comma-separated list of machine names -> names, each checked."""
    known = machine_names()
    names = list(known) if text.strip() == "all" else [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"give a machine: one of {', '.join(known)} or all")
    for n in names:
        if n not in known:
            raise ValueError(f"unknown machine {n!r}; choose one of {', '.join(known)} or all")
    return names
