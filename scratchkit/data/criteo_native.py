"""A block of Criteo lines decoded by a C++ loop (criteo_loop.cpp): the loader's fast path.

One pass over the bytes checks every field against the Criteo grammar and decodes it (label,
13 counts to log(1 + max(x, 0)), 26 hashes): 6-8x pyarrow's tokenizer plus NumPy's checks on
these 40-column lines, ~1.6x pandas' parse alone (benchmarks/bench_load.py, datasets/README.md).
On anything outside the grammar it declines the block, and the caller reads it again with the
line parser (`criteo.parse_line`), which names the line: so errors and `LoadReport` counts do not
depend on which path read a block, and tests/test_criteo_native.py holds the two equal on random
and corrupted lines.

Built with g++ on first use, cached, called through ctypes with Python's lock released
(scratchkit/native.py), so the next block is decoded on the reader thread while this one is
written. Where no compiler is found (or SCRATCHKIT_NATIVE=0), `native_loader_available()` is
False and the loader uses pyarrow's reader and NumPy (fields.py) instead.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from scratchkit.data.convert import Chunk
from scratchkit.native import CLibrary, address

_I64, _PTR = ctypes.c_int64, ctypes.c_void_p  # arrays go as addresses (native.address)
_SIGNATURES = {
    "sk_criteo_parse": (_I64, [ctypes.c_char_p, _I64, _I64, _I64, _PTR, _I64] + [_PTR] * 9),
}
LOOP = CLibrary("criteo", Path(__file__).resolve().parent, ("criteo_loop.cpp",), _SIGNATURES)
DECLINE, WIDE = -1, -2  # criteo_loop.cpp's answers besides a number of lines
NUM_DENSE, NUM_CATEGORICAL = 13, 26
LOG1P = np.log1p(np.arange(1 << 16, dtype=np.float64)).astype(np.float32)  # small counts: most


def native_loader_available() -> bool:
    """Whether the C++ decoder can run here (a compiler, or a cached build)."""
    return LOOP.available()


def decode_block(data: bytes, lines: int, loop: CLibrary = LOOP) -> Chunk | None:
    """The `lines` lines of `data` decoded, or None when the block needs the line parser.

    Counts below 65536 are looked up in LOG1P (log1p in float64, rounded once to float32); larger
    ones come back from the loop as (position, value) and are computed here with NumPy's log1p,
    as the other paths compute them. Sparse values are uint32 when every hash has at most 8 hex
    digits (Criteo's), else uint64 (the loop is run again for those). `data` must be `bytes`."""
    n = lines
    labels = np.empty(n, np.uint8)  # [n]
    dense = np.empty((n, NUM_DENSE), np.float32)  # [n, 13]
    missing = np.empty((n, NUM_DENSE), np.uint8)  # [n, 13]
    negative = np.empty((n, NUM_DENSE), np.uint8)  # [n, 13]
    cat_missing = np.empty((n, NUM_CATEGORICAL), np.uint8)  # [n, 26]
    big_pos, big_val = np.empty(n * NUM_DENSE, np.int64), np.empty(n * NUM_DENSE, np.int64)  # [<= 13n]
    big = np.zeros(1, np.int64)
    for dtype in (np.uint32, np.uint64):
        sparse = np.empty((n, NUM_CATEGORICAL), dtype)
        got = loop.library.sk_criteo_parse(
            data,
            len(data),
            n,
            int(dtype is np.uint64),
            address(LOG1P, np.float32),
            LOG1P.size,
            address(labels, np.uint8),
            address(dense, np.float32),
            address(sparse, dtype),
            address(missing, np.uint8),
            address(negative, np.uint8),
            address(cat_missing, np.uint8),
            address(big_pos, np.int64),
            address(big_val, np.int64),
            address(big, np.int64),
        )
        if got != WIDE:
            break
    if got != n:  # declined, or fewer lines than the block counts
        return None
    k = int(big[0])
    if k:  # counts past the table: as criteo._log_dense does
        dense.reshape(-1)[big_pos[:k]] = np.log1p(big_val[:k].astype(np.float64)).astype(np.float32)
    return Chunk(
        labels,
        dense,
        sparse,
        {
            "dense_missing": missing.view(bool),
            "dense_negative": negative.view(bool),
            "categorical_missing": cat_missing.view(bool),
        },
    )


__all__ = ["decode_block", "native_loader_available", "LOOP", "LOG1P"]
