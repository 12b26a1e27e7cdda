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
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    torch.empty(10 * 2**20).fill_(1.0)              # 40 MiB of float32
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", LOOP, mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_a_steps_big_temporary_is_reused_not_faulted_in_again():
    pages = 40 * 2**20 // 4096
    assert faults("default") > 10 * pages       # the control: fresh pages every time (20 x 10,240)
    assert faults("kept") < pages               # reused: not even one allocation's pages again


def test_it_is_idempotent():
    first = keep_step_memory()
    assert keep_step_memory() is first
