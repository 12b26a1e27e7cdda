"""Checking what the simulators are given: a trace of row ids and a capacity in rows.

Every public simulator calls these first, so bad input fails before any work, with a message
that says which argument is wrong, where, and what was expected.
"""

from __future__ import annotations

import operator

import numpy as np


def as_trace(trace, name: str = "trace") -> np.ndarray:
    """Return `trace` as a contiguous 1-D int64 array of non-negative ids, or raise ValueError.

    Any integer dtype is accepted (it is cast without loss); floats, bools and objects are not,
    because a silently rounded id would simulate a different trace.
    """
    array = np.asarray(trace)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D (ids in access order), got shape {array.shape}")
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        if array.size == 0 and array.dtype == np.float64:  # np.asarray([]) is float64
            return np.zeros(0, np.int64)
        raise ValueError(f"{name} must hold integer ids (int64), got dtype {array.dtype}")
    if array.size and array.dtype.kind == "u" and array.max() > np.iinfo(np.int64).max:
        at = int(np.argmax(array > np.iinfo(np.int64).max))
        raise ValueError(f"{name}[{at}] = {int(array[at])} does not fit in int64")
    array = np.ascontiguousarray(array, dtype=np.int64)
    if array.size and array.min() < 0:
        at = int(np.argmax(array < 0))
        raise ValueError(f"{name} ids must be >= 0, but {name}[{at}] = {int(array[at])}")
    return array


INT64_MAX = np.iinfo(np.int64).max


def check_file_ids(ids: np.ndarray, path) -> None:
    """Refuse a trace file (`ids`: its array, loaded or memory-mapped) that is not 1-D int64,
    naming the file and how to convert it: what `scratchkit trace` writes, and what every reader
    of a file takes, so that an int32 or uint64 file is not read one way here and another there.
    A uint64 id of 2**63 or more has no int64 value: named with its position, never wrapped
    around to a negative id."""
    if ids.ndim != 1:
        raise ValueError(f"{path}: a trace is a 1-D array of int64 ids, got shape {ids.shape} dtype {ids.dtype}")
    if ids.dtype == np.int64:
        return
    if ids.dtype == np.bool_ or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(
            f"{path}: the trace's ids are {ids.dtype}, not int64: a trace holds row ids, whole numbers "
            f"from 0; write them as int64 (np.save(path, ids.astype(np.int64)), where every id is whole)"
        )
    if ids.dtype == np.uint64:
        for start in range(0, ids.size, 1 << 20):  # a chunk at a time: the file may not fit in memory
            beyond = np.flatnonzero(ids[start : start + (1 << 20)] > INT64_MAX)
            if beyond.size:
                at = start + int(beyond[0])
                raise ValueError(
                    f"{path}: id {int(ids[at])} at position {at} is 2**63 or more: the trace's ids are "
                    f"uint64, and this one has no int64 value (ids count a table's rows from 0)"
                )
    raise ValueError(
        f"{path}: the trace's ids are {ids.dtype}, not int64: "
        f"np.save({str(path)!r}, np.load({str(path)!r}).astype(np.int64)) converts them exactly"
    )


def as_count(value, name: str, minimum: int = 1) -> int:
    """Return `value` as a Python int >= `minimum` (an integer, not a float or bool)."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {number}")
    return int(number)


def as_capacity(capacity) -> int:
    """Capacity is counted in rows; a cache holds at least one."""
    return as_count(capacity, "capacity", minimum=1)


def as_share(value, name: str) -> float:
    """A share in (0, 1], e.g. the fraction of the trace a static cache is profiled on."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    try:
        share = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}") from None
    if not 0.0 < share <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {share}")
    return share
