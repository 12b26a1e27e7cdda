"""calibration/steal.py: the share of CPU time a VM's hypervisor took while a block ran, read from
/proc/stat's steal ticks (here from files written as the kernel writes it)."""

import time

import pytest

from scratchkit.calibration.steal import StealMeter, read_cpu_ticks

#        user nice system idle iowait irq softirq steal guest guest_nice
BEFORE = "cpu  100 0 50 1000 10 0 0 5 0 0\ncpu0 50 0 25 500 5 0 0 2 0 0\n"
AFTER = "cpu  180 0 70 1500 40 0 0 25 7 0\ncpu0 90 0 35 750 20 0 0 12 3 0\n"


def test_steal_is_a_share_of_the_ticks_the_cores_wanted(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(BEFORE)
    assert read_cpu_ticks(stat) == (5, 155)  # idle and iowait are not wanted; guest is in user
    with StealMeter(stat) as meter:
        stat.write_text(AFTER)
    # 20 ticks stolen of 120 wanted (80 user + 20 system + 20 steal): idle time does not dilute it
    assert meter.share == pytest.approx(20 / 120)


@pytest.mark.parametrize("content", [None, "", "intr 1 2 3\n", "cpu 1 2 3\n"])
def test_no_proc_stat_or_another_format_is_no_figure(tmp_path, content):
    stat = tmp_path / "stat"
    if content is not None:
        stat.write_text(content)
    assert read_cpu_ticks(stat) is None
    with StealMeter(stat) as meter:
        pass
    assert meter.share is None


def test_this_machine_reads_a_share_between_0_and_1():
    if read_cpu_ticks() is None:
        pytest.skip("no /proc/stat here")
    deadline = time.monotonic() + 5.0
    with StealMeter() as meter:  # busy until the cores have wanted a few ticks (~10 ms each)
        ticks = read_cpu_ticks()  # after the meter's start: a preemption before it would end the loop at once
        while read_cpu_ticks()[1] < ticks[1] + 5 and time.monotonic() < deadline:
            sum(range(10_000))
    assert meter.share is not None and 0.0 <= meter.share <= 1.0
