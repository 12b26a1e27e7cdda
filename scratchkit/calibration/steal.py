"""How much of the CPU the hypervisor took while something ran: a virtual machine's *steal* time.

On a VM the host may run other guests on the cores this one thinks it has. The guest's kernel
counts the time its virtual CPUs were ready to run but not running as `steal`, the eighth number
of /proc/stat's `cpu` line (in clock ticks, summed over the cores). A stage timed by the wall
clock grows by it; the calibration's CPU-time figures (`time.thread_time`) do not see it. So a
validation run that says how much was stolen says how quiet the machine was, which the bounds
assume. On a shared virtual machine steal is a few percent of the ticks its cores want, more
in bursts: a part of a validation run's noise, not most of it.

    with StealMeter() as meter:
        run()
    meter.share    # of the time the guest's cores wanted to run meanwhile, 0..1; None off Linux

The share is of the busy ticks (all but idle and iowait) plus steal: a trainer on one of two
cores that lost a fifth of its time reads 0.2 however idle the other core was.
"""

from __future__ import annotations

from pathlib import Path

PROC_STAT = Path("/proc/stat")
IDLE, IOWAIT, STEAL = 3, 4, 7  # fields after "cpu": user nice system idle iowait irq softirq steal ...


def read_cpu_ticks(path: Path = PROC_STAT) -> tuple[int, int] | None:
    """(steal ticks, wanted ticks: busy or stolen) of every core since boot; None where there is
    no /proc/stat."""
    try:
        fields = (path.read_text().splitlines() or [""])[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) <= STEAL + 1:
        return None
    ticks = [int(x) for x in fields[1:]]
    idle = ticks[IDLE] + ticks[IOWAIT]
    # guest and guest_nice (fields 9-10) are already counted in user and nice
    return ticks[STEAL], sum(ticks[: STEAL + 1]) - idle


class StealMeter:
    """`with StealMeter() as m:` -> `m.share`: steal over the wanted ticks while the block ran."""

    def __init__(self, path: Path = PROC_STAT):
        self.path, self.share = path, None
        self._start: tuple[int, int] | None = None

    def __enter__(self) -> "StealMeter":
        self._start = read_cpu_ticks(self.path)
        return self

    def __exit__(self, *exc) -> bool:
        end = read_cpu_ticks(self.path)
        if self._start is not None and end is not None and end[1] > self._start[1]:
            self.share = (end[0] - self._start[0]) / (end[1] - self._start[1])
        return False


__all__ = ["StealMeter", "read_cpu_ticks"]
