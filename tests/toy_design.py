"""A design of one's own, with pricing of its own, in one file: `lru-beside`, an LRU cache bookkept
on the device (its map lookups and its fill device kernels) whose write-back runs on a stream of its
own beside the step. It trains as `lru` does (its trainer is lru's under its name); what is new is
how it is counted and combined. tests/test_designs.py registers it with one call."""

from __future__ import annotations

from scratchkit.designs import Design, StepTime, Work, kit
from scratchkit.designs.demand_cache import DemandCache, device_move_rows, lru_moves
from scratchkit.trainers.cached import LRUCacheTrainer


class LRUBesideTrainer(LRUCacheTrainer):
    name = "lru-beside"


def lru_beside_stages(w, place) -> dict[str, Work]:
    """lru's stages, its fetch a probe of the device's map per distinct id, three kernels and the
    fill by the device's row kernels."""
    stages = DemandCache()(w, place)
    fetch = Work()
    for t, rows in zip(w.tables, w.share(w.fetched_rows)):
        fetch += (
            Work(device_probes=((t.unique, t.capacity),))
            + kit.calls(True, "kernel", 3)
            + device_move_rows(w, rows, t.rows, t.capacity, cpu=place.device_is_host)
        )
    return stages | {"fetch": fetch}


def write_back_beside(parts: dict[str, Work], w, machine, extra_s: float) -> StepTime:
    """The write-back on a stream of its own beside the other stages: the step is the larger."""
    stages = {name: part.seconds(machine) for name, part in parts.items()}
    rest = sum(s for name, s in stages.items() if name != "write_back") + extra_s
    resources = {"write-back stream": stages["write_back"], "step": rest}
    bound = "write_back" if stages["write_back"] > rest else max(stages, key=stages.get)
    return StepTime(stages, max(resources.values()), bound, True, resources)


LRU_BESIDE = Design(
    "lru-beside",
    LRUBesideTrainer,
    "LRU cache bookkept on the device, written back beside the step",
    stages=("fetch", "write_back", "transfer", "embedding_forward", "mlp", "embedding_backward", "update"),
    count=lru_beside_stages,
    combine=write_back_beside,
    moves=lru_moves,
    window_depth=0,
)
