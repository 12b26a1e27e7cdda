"""The kernel puzzles of notebook 08: what each kernel must do, its inputs, and its twin.

Each puzzle is one of the scratchpad's kernels (scratchkit/kernels/*.cu), with the same name and
arguments, so the NumPy twin the kit's own kernels are tested against (`kernels/twin.py`) is the
specification. Inputs are random and edge cases: more columns than a warp's 32 lanes and fewer, the
first and last slot, a partial last block of threads, empty bags, an empty last bag, probe chains
past tombstones, around the table's end, and in a table with no EMPTY bucket left.

Every launch uses blocks of `BLOCK` threads, so the last block has threads with no work: a kernel
without its bounds check writes past the end of an output, which the checker sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from scratchkit.kernels import twin

BLOCK = 64
LANES = 32  # threads per row in gather_rows / scatter_rows (rows.cu)


@dataclass(frozen=True)
class KernelCase:
    """One launch: its arguments in the kernel's order (outputs as the kernel finds them) and threads."""

    about: str
    args: list
    threads: int
    hint: str = ""


@dataclass(frozen=True)
class Puzzle:
    name: str
    names: tuple[str, ...]  # argument names, as in the .cu file
    outputs: frozenset[int]  # positions of the arrays the kernel writes
    cases: Callable[[], list[KernelCase]]
    twin: Callable[[list], dict[int, np.ndarray]]  # expected contents of the outputs
    hint: str
    tolerance: tuple[float, float] = (0.0, 0.0)  # (rtol, atol) on floats: 0 = bit for bit
    timeout_hint: str = ""
    extra: dict = field(default_factory=dict)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _floats(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _unset(*shape, dtype=np.float32) -> np.ndarray:
    """An output as the kernel finds it: uninitialised (NaN here, as `empty` may give anything)."""
    return np.full(shape, np.nan if np.issubdtype(dtype, np.floating) else -99, dtype=dtype)


# ------------------------------------------------------------------------------------ rows
def _gather_case(about, rng, capacity, width, slots, hint="") -> KernelCase:
    slots = np.asarray(slots, dtype=np.int64)
    return KernelCase(
        about,
        [_floats(rng, capacity, width), width, slots, slots.size, _unset(slots.size, width)],
        slots.size * LANES,
        hint,
    )


def gather_cases() -> list[KernelCase]:
    rng = _rng(8)
    return [
        _gather_case(
            "37 rows of 40 columns: more columns than a row's 32 lanes",
            rng,
            64,
            40,
            rng.integers(0, 64, 37),
            "lane l copies columns l, l + 32, l + 64, ... while < width",
        ),
        _gather_case(
            "9 rows of 5 columns: fewer columns than lanes",
            rng,
            20,
            5,
            rng.integers(0, 20, 9),
            "lanes 5..31 of each row have no column to copy",
        ),
        _gather_case(
            "the table's first and last rows, one of them twice",
            rng,
            64,
            8,
            [63, 0, 63],
            "row i of out comes from row slots[i] of the table",
        ),
        _gather_case("one row of 33 columns", rng, 16, 33, [7], "lane 0 copies columns 0 and 32"),
    ]


def _scatter_case(about, rng, capacity, width, slots, hint="") -> KernelCase:
    slots = np.asarray(slots, dtype=np.int64)
    return KernelCase(
        about,
        [_floats(rng, capacity, width), width, slots, slots.size, _floats(rng, slots.size, width)],
        slots.size * LANES,
        hint,
    )


def scatter_cases() -> list[KernelCase]:
    rng = _rng(9)
    return [
        _scatter_case(
            "37 rows into 64 slots, 40 columns",
            rng,
            64,
            40,
            rng.permutation(64)[:37],
            "row i of src goes to row slots[i] of the table; every other row stays as it was",
        ),
        _scatter_case("9 rows of 5 columns", rng, 20, 5, rng.permutation(20)[:9]),
        _scatter_case("the first and last slots", rng, 64, 8, [63, 0], "slot 63 is the table's last row"),
        _scatter_case("one row of 33 columns", rng, 16, 33, [4], "lane 0 copies columns 0 and 32"),
    ]


def gather_twin(args) -> dict[int, np.ndarray]:
    table, _, slots, _, _ = args
    return {4: twin.gather_rows(table, slots)}


def scatter_twin(args) -> dict[int, np.ndarray]:
    table, _, slots, _, src = args
    table = table.copy()
    twin.scatter_rows(table, slots, src)
    return {0: table}


# ------------------------------------------------------------------------------- hash map
def _hash_table(buckets: int, ids, erase=()) -> tuple[np.ndarray, np.ndarray]:
    keys = np.full(buckets, twin.EMPTY, dtype=np.int64)
    values = np.full(buckets, -1, dtype=np.int64)
    ids = np.asarray(ids, dtype=np.int64)
    twin.hashmap_insert(keys, values, ids, np.arange(ids.size, dtype=np.int64) * 3 + 1)
    twin.hashmap_erase(keys, values, np.asarray(erase, dtype=np.int64))
    return keys, values


def _query_case(about, keys, values, queries, hint="") -> KernelCase:
    queries = np.asarray(queries, dtype=np.int64)
    return KernelCase(
        about,
        [keys, values, keys.size - 1, queries, queries.size, _unset(queries.size, dtype=np.int64)],
        queries.size,
        hint,
    )


def ids_with_home(home: int, mask: int, count: int) -> np.ndarray:
    """The first `count` ids whose probe sequence starts at bucket `home`."""
    candidates = np.arange(200_000, dtype=np.int64)
    return candidates[twin.home_buckets(candidates, mask) == home][:count]


def query_cases() -> list[KernelCase]:
    rng = _rng(10)
    stored = rng.choice(1_000_000, 50, replace=False)
    absent = np.setdiff1d(rng.choice(1_000_000, 30, replace=False), stored)[:10]
    keys, values = _hash_table(64, stored[:40])
    erased_keys, erased_values = _hash_table(64, stored, erase=stored[::3])
    wrapping = np.concatenate([ids_with_home(63, 63, 3), ids_with_home(62, 63, 2)])
    wrap_keys, wrap_values = _hash_table(64, wrapping)
    full = rng.choice(1_000_000, 64, replace=False)
    full_keys, full_values = _hash_table(64, full)
    missing = np.setdiff1d(rng.choice(1_000_000, 8, replace=False), full)[:3]
    return [
        _query_case(
            "40 ids in 64 buckets, 10 ids absent",
            keys,
            values,
            rng.permutation(np.concatenate([stored[:30], absent])),
            "walk from the home bucket sk_hash(id) & mask until the id (its slot is values[bucket]) "
            "or an EMPTY bucket (absent: -1)",
        ),
        _query_case(
            "probing past erased ids (tombstones)",
            erased_keys,
            erased_values,
            stored,
            "a TOMBSTONE (-2) is an erased id: walk past it; only EMPTY (-1) ends a chain",
        ),
        _query_case(
            "chains that wrap around the last bucket",
            wrap_keys,
            wrap_values,
            wrapping,
            "after bucket mask comes bucket 0: bucket = (bucket + 1) & mask",
        ),
        _query_case(
            "a full table: no EMPTY bucket anywhere",
            full_keys,
            full_values,
            np.concatenate([full[:5], missing]),
            "with no EMPTY bucket an absent id's walk never meets one: stop after mask + 1 probes",
        ),
    ]


def query_twin(args) -> dict[int, np.ndarray]:
    keys, values, _, ids, _, _ = args
    return {5: twin.hashmap_query(keys, values, ids)}


# --------------------------------------------------------------------------- embedding bag
def _bag_case(about, rng, capacity, dim, lengths, hint="") -> KernelCase:
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    nnz = int(lengths.sum())
    slots = rng.integers(0, capacity, nnz).astype(np.int64)
    return KernelCase(
        about,
        [_floats(rng, capacity, dim), dim, slots, nnz, offsets, lengths.size, _unset(lengths.size, dim)],
        lengths.size * dim,
        hint,
    )


def bag_cases() -> list[KernelCase]:
    rng = _rng(11)
    twice = _bag_case("a slot twice in one bag", rng, 10, 4, [3, 2])
    twice.args[2][:3] = [5, 1, 5]
    return [
        _bag_case(
            "12 bags of 0 to 6 lookups, dim 8",
            rng,
            50,
            8,
            rng.integers(0, 7, 12),
            "bag b is slots[offsets[b]] .. slots[offsets[b + 1] - 1]; an empty bag pools to zeros",
        ),
        _bag_case(
            "an empty last bag",
            rng,
            30,
            8,
            [2, 3, 0],
            "the last bag has no offsets[b + 1]: it ends at nnz (here it is empty)",
        ),
        twice,
        _bag_case("5 bags, dim 40", rng, 40, 40, [4, 1, 6, 2, 3], "thread t works on bag t / dim, column t % dim"),
    ]


def bag_twin(args) -> dict[int, np.ndarray]:
    rows, _, slots, _, offsets, _, _ = args
    return {6: twin.embedding_bag_forward(rows, slots, offsets)}


PUZZLES: dict[str, Puzzle] = {
    p.name: p
    for p in (
        Puzzle(
            "gather_rows",
            ("table", "width", "slots", "n", "out"),
            frozenset({4}),
            gather_cases,
            gather_twin,
            "i = t / 32 is the row, lane = t % 32; threads with i >= n return; lane l copies columns "
            "l, l + 32, ... of table row slots[i] into out row i",
        ),
        Puzzle(
            "scatter_rows",
            ("table", "width", "slots", "n", "src"),
            frozenset({0}),
            scatter_cases,
            scatter_twin,
            "i = t / 32 is the row, lane = t % 32; threads with i >= n return; lane l copies "
            "columns l, l + 32, ... of src row i into table row slots[i]",
        ),
        Puzzle(
            "hashmap_query",
            ("keys", "values", "mask", "ids", "n", "out_slots"),
            frozenset({5}),
            query_cases,
            query_twin,
            "one thread per id: probe from sk_hash(id) & mask; the id's bucket gives "
            "values[bucket]; an EMPTY bucket (or mask + 1 probes) means absent: -1",
            timeout_hint="a probe loop must end: at the id, at an EMPTY bucket, or after mask + 1 probes",
        ),
        Puzzle(
            "embedding_bag_forward",
            ("rows", "dim", "slots", "nnz", "offsets", "num_bags", "pooled"),
            frozenset({6}),
            bag_cases,
            bag_twin,
            "one thread per (bag, column): sum rows[slots[j] * dim + c] over the bag's lookups j, in order, "
            "and write the sum once",
            tolerance=(1e-6, 1e-6),
        ),
    )
}
