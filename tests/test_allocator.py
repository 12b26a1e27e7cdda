"""The allocator's thresholds (scratchkit/allocator.py): a step's big temporaries are reused."""

import subprocess
import sys

import pytest

from scratchkit.allocator import keep_step_memory

# a step's worth of a big temporary, allocated, written and freed 20 times after 10: 40 MiB, above
# glibc's largest dynamic mmap threshold (32 MiB), so by default every allocation is fresh pages
LOOP = """
import resource, sys, torch
if sys.argv[1] == "kept":
    from scratchkit.allocator import keep_step_memory
    assert keep_step_memory()
for _ in range(10):                                 # the first ones fault in either way (the heap
    torch.empty(10 * 2**20).fill_(1.0)              # grows by a few of them: torch's aligned blocks)
for _ in range(20):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.empty(10 * 2**20).fill_(1.0)              # 40 MiB of float32
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
PAGES = 40 * 2**20 // 4096  # 10,240 pages of 4 KiB in one allocation


def fresh_allocations(mode: str) -> int:
    """How many of the 20 measured allocations faulted in (nearly) all their pages anew."""
    done = subprocess.run([sys.executable, "-c", LOOP, mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    faults = [int(line) for line in done.stdout.split()]
    assert len(faults) == 20, done.stdout
    return sum(f > PAGES // 2 for f in faults)


# Counted per allocation, not summed: on CI's machine (2026-12-02) 3 of the 20 kept allocations
# faulted in their pages once (30,720 faults in all) where this machine counts none, for a reason
# not seen here (the heap growing a few more times is a guess). The property is the steady state.
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_a_steps_big_temporary_is_reused_not_faulted_in_again():
    assert fresh_allocations("default") >= 15  # the control: fresh pages nearly every time
    assert fresh_allocations("kept") <= 5  # reused: at most a few more heap growths


def test_it_is_idempotent():
    first = keep_step_memory()
    assert keep_step_memory() is first
