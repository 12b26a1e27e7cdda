"""Hardware profiles by name: `this-cpu` (this machine, calibrated) and the GPU servers.

    this-cpu      this machine: the profile `scratchkit calibrate` saved (hardware_profile.json in
                  the kit's cache folder, or $SCRATCHKIT_HARDWARE_PROFILE) when there is one; else
                  measured now, quickly (a few seconds, once per process). `origin` says which.
    the GPU servers
                  v100-pcie3, a100-pcie4, h100-pcie5, h200 and any registered since (`SERVERS`),
                  every constant with its source (scratchkit/costmodel/gpu_profiles.py)

The numbers themselves, their curves and their JSON form are in costmodel/hw_profile.py; how this machine
is measured, in calibration/calibrate.py.
"""
from __future__ import annotations

import os
import warnings
from functools import lru_cache
from pathlib import Path

from scratchkit.costmodel.gpu_profiles import SERVERS, server
from scratchkit.costmodel.hw_profile import GB, US, HardwareProfile, OutdatedProfileError, load_profile, save_profile

__all__ = ["GB", "US", "HardwareProfile", "SERVERS", "THIS_CPU", "get_hardware", "parse_profiles", "profile_names",
           "saved_profile_path", "save_calibration", "this_cpu", "forget_this_cpu"]

THIS_CPU = "this-cpu"


def profile_names() -> tuple[str, ...]:
    """`this-cpu`, then every registered GPU server."""
    return (THIS_CPU, *SERVERS)
ENV_PATH = "SCRATCHKIT_HARDWARE_PROFILE"


def saved_profile_path() -> Path:
    """Where `scratchkit calibrate` saves this machine's profile and `this-cpu` looks for it:
    $SCRATCHKIT_HARDWARE_PROFILE, else hardware_profile.json in the kit's cache folder (beside the
    built kernels: $SCRATCHKIT_CACHE_DIR, else ~/.cache/scratchkit)."""
    from scratchkit.kernels.host_build import default_cache_dir

    override = os.environ.get(ENV_PATH)
    return Path(override) if override else default_cache_dir().parent / "hardware_profile.json"


def save_calibration(profile: HardwareProfile, path: Path | None = None) -> Path:
    """Save a calibrated profile where `this-cpu` finds it (or at `path`), and forget any
    profile this process had read or measured before."""
    written = save_profile(profile, path if path is not None else saved_profile_path())
    forget_this_cpu()
    return written


def forget_this_cpu() -> None:
    """Read or measure `this-cpu` afresh next time (after a calibration, or in tests)."""
    _saved.cache_clear()
    _measured.cache_clear()


def this_cpu() -> HardwareProfile:
    """This machine: the saved calibration when there is one, else measured now (quick)."""
    path = saved_profile_path()
    if not path.exists():
        return _measured()
    try:
        return _saved(path, path.stat().st_mtime_ns)
    except OutdatedProfileError as err:
        warnings.warn(f"{err}: measuring this machine now, quickly; `scratchkit calibrate` saves "
                      "it again", stacklevel=2)
        return _measured()


def changed_loops(profile: HardwareProfile) -> list[str]:
    """The kit's C++ loops built otherwise now than when `profile` was measured (an edit, another
    compiler): their speed in it is not theirs now. A profile saved before builds were recorded
    names them all."""
    from scratchkit.calibration.calibrate import loop_builds

    return [name for name, build in loop_builds().items() if profile.native_builds.get(name) != build]


@lru_cache(maxsize=4)
def _saved(path: Path, mtime_ns: int) -> HardwareProfile:
    from dataclasses import replace

    profile = load_profile(path)
    changed = changed_loops(profile)      # checked once per file, here: the sources hash on each check
    if profile.co_run_cores is None:
        raise OutdatedProfileError(f"hardware profile {path} was saved before the kit measured the cores "
                                   "ScratchPipe's two sides get at once")
    if changed:
        raise OutdatedProfileError(f"hardware profile {path} was measured with other builds of the kit's "
                                   f"C++ loops ({', '.join(changed)})")
    return replace(profile, origin=f"saved calibration {path} ({profile.origin or 'no date'})")


@lru_cache(maxsize=1)
def _measured() -> HardwareProfile:
    from dataclasses import replace

    from scratchkit.calibration.calibrate import calibrate

    profile = calibrate(quick=True)
    path = saved_profile_path()
    why = f"the saved calibration at {path} is an earlier kit's" if path.exists() else f"no saved calibration at {path}"
    return replace(profile, origin=f"measured now, quickly ({profile.origin}): {why}; `scratchkit calibrate` saves one")


def get_hardware(name: str) -> HardwareProfile:
    """A profile by name (`this-cpu`: the saved calibration, else measured on first use)."""
    if name == THIS_CPU:
        return this_cpu()
    if name not in SERVERS:
        raise ValueError(f"unknown hardware profile {name!r}; choose one of {', '.join(profile_names())} or all")
    return server(name)


def parse_profiles(text: str) -> list[str]:
    """'all' or a comma-separated list of profile names -> names, each checked."""
    known = profile_names()
    names = list(known) if text.strip() == "all" else [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"give a hardware profile: one of {', '.join(known)} or all")
    for n in names:
        if n not in known:
            raise ValueError(f"unknown hardware profile {n!r}; choose one of {', '.join(known)} or all")
    return names
