"""The training designs, one record each (`Design`, design.py), in one place that the trainers, the
cost model and the command line all read: who trains it, what it fixes, and how a step of it is
counted, combined and which rows it moves. No torch, no machine.

    design.py        the record, `DESIGNS` (by name) and `register`
    work.py, kit.py  the units a step's work is counted in, and the kit's calls in them
    step.py          what a step touches (`StepWork`): the count's input
    train.py         the stages every design trains with
    serial.py        gpu-only, hybrid (host_threads.py: hybrid's host work on many threads)
    demand_cache.py  static, lru, lfu; lru_device.py: lru-device
    prefetch.py      prefetch-lru, prefetch-lru-device
    scratchpipe.py   scratchpipe; scratchpipe_device.py: scratchpipe-device

A design of your own, with pricing of its own, is one file and one call:

    from scratchkit.designs import Design, register
    register(Design("lru-beside", "mypkg.trainers:LRUBesideTrainer", "help", stages=...,
                    count=my_stages, combine=my_step, moves=my_rows))

and `--trainers`, `bench --project`, the capacity check and the course's tables find it
(docs/design.md, "Names written once"; tests/test_designs.py registers one).
"""

from __future__ import annotations

from scratchkit.designs.demand_cache import LFU, LRU, STATIC
from scratchkit.designs.lru_device import LRU_DEVICE
from scratchkit.designs.design import (
    DESIGNS,
    Compared,
    Design,
    Place,
    StepTime,
    design_of,
    register,
    versus,
)
from scratchkit.designs.prefetch import PREFETCH_LRU, PREFETCH_LRU_DEVICE
from scratchkit.designs.scratchpipe import SCRATCHPIPE
from scratchkit.designs.scratchpipe_device import SCRATCHPIPE_DEVICE
from scratchkit.designs.serial import GPU_ONLY, HYBRID
from scratchkit.designs.step import StepWork, TableWork
from scratchkit.designs.work import Work

# The kit's own, family by family: the order the command line lists them in.
for _design in (
    GPU_ONLY,
    HYBRID,
    STATIC,
    LRU,
    LFU,
    LRU_DEVICE,
    PREFETCH_LRU,
    PREFETCH_LRU_DEVICE,
    SCRATCHPIPE,
    SCRATCHPIPE_DEVICE,
):
    register(_design)
del _design

# The designs every other is compared with ("x hybrid", "x lru-device", "x prefetch-lru-device"):
# the baseline, at its best on its server's cores; the backward-looking cache the ScratchPipe paper
# measured against, filled on demand inside the step and bookkept on the device; and the production
# peer, the cache people run as they run it, filled one batch ahead (lru and prefetch-lru are those
# two caches bookkept on one host core). The upper bound: every table on the device, where they fit.
BASELINE, ON_DEMAND_PEER, PRODUCTION_PEER = HYBRID.name, LRU_DEVICE.name, PREFETCH_LRU_DEVICE.name
UPPER_BOUND = GPU_ONLY.name
PEERS = (BASELINE, ON_DEMAND_PEER, PRODUCTION_PEER)

__all__ = [
    "BASELINE",
    "DESIGNS",
    "ON_DEMAND_PEER",
    "PEERS",
    "PRODUCTION_PEER",
    "UPPER_BOUND",
    "Compared",
    "Design",
    "Place",
    "StepTime",
    "StepWork",
    "TableWork",
    "Work",
    "design_of",
    "register",
    "versus",
]
