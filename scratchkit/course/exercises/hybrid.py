"""Notebook 01's exercises: an embedding bag's forward, the embedding share of a step, table memory.

bag_sums(table, ids, offsets)       pooled rows, checked against torch's own embedding_bag
embedding_share(stage_seconds)      checked against scratchkit.course.analysis
criteo_scale_for(gib, dim)          the smallest Criteo scale whose tables pass `gib` GiB
"""

from __future__ import annotations

import math

import numpy as np
import torch

from scratchkit.course.analysis import embedding_share as kit_embedding_share
from scratchkit.course.exercises.checking import Case, Exercise, close_arrays, register
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.profiles import criteo_like, get_profile

GIB = 2**30


def torch_bag_sums(table: np.ndarray, ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The reference: torch.nn.functional.embedding_bag in sum mode (what nn.EmbeddingBag runs)."""
    pooled = torch.nn.functional.embedding_bag(
        torch.from_numpy(np.asarray(ids, dtype=np.int64)),
        torch.from_numpy(np.asarray(table, dtype=np.float32)),
        torch.from_numpy(np.asarray(offsets, dtype=np.int64)),
        mode="sum",
    )
    return pooled.numpy()


def _bag_cases() -> list[Case]:
    table = np.arange(15, dtype=np.float32).reshape(5, 3)  # row r = [3r, 3r+1, 3r+2]
    ids = lambda *v: np.array(v, dtype=np.int64)
    config = get_profile("small")
    batch = SyntheticSource(config.data).batch(0)
    big = np.random.default_rng(1).standard_normal((config.data.table_sizes[0], config.model.dim)).astype(np.float32)
    return [
        Case((table, ids(0, 1, 2, 3), ids(0, 2)), "two bags of two ids"),
        Case(
            (table, ids(4, 4, 1), ids(0)),
            "one id twice in a bag",
            "a row looked up twice in one bag counts twice in its sum",
        ),
        Case(
            (table, ids(1, 2, 3), ids(0, 2, 2)),
            "an empty bag in the middle",
            "offsets[b] == offsets[b+1] is an empty bag: its pooled row is all zeros",
        ),
        Case(
            (table, ids(0, 1, 2, 3), ids(0, 1)),
            "the last bag runs to the end of ids",
            "the last bag has no offsets[b+1]: it ends at len(ids)",
        ),
        Case(
            (table, ids(2, 0), ids(0, 2)),
            "an empty last bag",
            "a last bag that starts at len(ids) is empty: a row of zeros, still one row per bag",
        ),
        Case(
            (big, batch.ids[0], batch.offsets[0]),
            "batch 0 of the small profile, table 0",
            "one pooled row per bag: the result has len(offsets) rows of table.shape[1] numbers",
            shown=f"<20,000 x 16 table>, <{batch.ids[0].size:,} ids>, <{batch.offsets[0].size} offsets>",
        ),
    ]


def _share_cases() -> list[Case]:
    hybrid = {
        "data": 0.4e-3,
        "embedding_forward": 3.1e-3,
        "transfer": 0.2e-3,
        "mlp": 1.1e-3,
        "embedding_backward": 2.2e-3,
        "update": 1.5e-3,
    }
    return [
        Case((hybrid,), "a hybrid step's stages"),
        Case(
            ({"embedding_forward": 2e-3, "mlp": 2e-3},),
            "a stage missing from the dict",
            "a step need not have every stage: count the ones it has (dict.get(stage, 0.0))",
        ),
        Case(
            ({"transfer": 5e-3, "embedding_forward": 1e-3, "mlp": 4e-3},),
            "transfer is not embedding work",
            "only embedding_forward, embedding_backward and update are embedding stages; transfer "
            "moves the pooled vectors",
        ),
        Case(
            ({"embedding_forward": 1e-3, "embedding_backward": 1e-3, "update": 2e-3},), "nothing but embedding stages"
        ),
    ]


def reference_scale(gib: float, dim: int) -> float:
    """The smallest scale k/100 at which criteo_like(scale)'s tables need more than `gib` GiB."""
    for k in range(1, 100_001):
        sizes = criteo_like(k / 100).data.table_sizes
        if sum(sizes) * dim * 4 > gib * GIB:
            return k / 100
    raise ValueError(f"no scale up to 1000 needs more than {gib} GiB")


def _scale_cases() -> list[Case]:
    return [
        Case((1.0, 16), "1 GiB at dim 16", "bytes = rows x dim x 4 (float32); a GiB is 2**30 bytes, not 1e9"),
        Case((0.25, 16), "a quarter GiB at dim 16"),
        Case((1.0, 64), "1 GiB at dim 64", "the dim multiplies the bytes of every row"),
        Case(
            (0.01, 128),
            "10 MiB-ish at dim 128",
            "try scales 0.01, 0.02, ... in order: k / 100, "
            "and return the first whose tables need *more than* the given GiB",
        ),
    ]


register(
    Exercise(
        "bag_sums",
        "bag_sums(table, ids, offsets)",
        _bag_cases,
        torch_bag_sums,
        "bag b is ids[offsets[b]:offsets[b+1]]; its pooled row is the sum of table[id] over its ids",
        compare=close_arrays(rtol=1e-5, atol=1e-5),
    ),
    Exercise(
        "embedding_share",
        "embedding_share(stage_seconds)",
        _share_cases,
        kit_embedding_share,
        "share = (embedding_forward + embedding_backward + update) / (all stages together)",
    ),
    Exercise(
        "criteo_scale_for",
        "criteo_scale_for(gib, dim)",
        _scale_cases,
        reference_scale,
        "loop k = 1, 2, ...: sizes = criteo_like(k / 100).data.table_sizes; stop when "
        "sum(sizes) * dim * 4 > gib * 2**30",
        compare=lambda got, expected: (
            None
            if isinstance(got, (int, float)) and math.isclose(got, expected)
            else f"returned {got!r}, expected the scale {expected}"
        ),
    ),
)
