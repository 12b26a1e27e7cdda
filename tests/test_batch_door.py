"""The door's ids and offsets checks (scratchkit/data/checks.py), which reduce over all tables at
once, against the rules written out per table with plain Python: the same batches refused, with
the message of the first bad table, over random batches with one value changed."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scratchkit.data.checks import BadBatchError, check_batch
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.profiles import get_profile


def first_problem(ids, offsets, sizes):
    """(table, 'id' or 'offset') of the first table breaking a rule, by plain loops; None: fine."""
    for t, (i, o, n) in enumerate(zip(ids, offsets, sizes)):
        if any(not 0 <= int(x) < n for x in i):
            return t, "id"
        o = [int(x) for x in o]
        if o[0] != 0 or any(b < a for a, b in zip(o, o[1:])) or any(x > len(i) for x in o):
            return t, "offset"
    return None


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    table=st.integers(0, 7),
    where=st.floats(0, 0.999),
    what=st.sampled_from(["id", "offset", "end"]),
    value=st.integers(-3, 3),
    empty=st.lists(st.integers(0, 7), max_size=3),
)
def test_the_door_refuses_what_the_rules_refuse(seed, table, where, what, value, empty):
    config = get_profile("small")
    batch = SyntheticSource(replace(config.data, seed=seed)).batch(0)
    ids, offsets = [i.copy() for i in batch.ids], [o.copy() for o in batch.offsets]
    sizes = list(config.data.table_sizes)
    for t in empty:  # tables with no ids: every bag empty
        ids[t], offsets[t] = ids[t][:0], np.zeros_like(offsets[t])
    if what == "id" and ids[table].size:
        k = int(where * ids[table].size)
        ids[table][k] = value if value < 0 else sizes[table] - 1 + value  # 0: the last row, fine
    elif what == "offset":
        k = int(where * offsets[table].size)
        offsets[table][k] += value
    elif what == "end":  # the last bag starting at or past the end
        offsets[table][-1] = ids[table].size + value
    problem = first_problem(ids, offsets, sizes)
    corrupted = replace(batch, ids=tuple(ids), offsets=tuple(offsets))
    if problem is None:
        check_batch(corrupted, sizes, 0, num_dense=config.data.num_dense)
        return
    with pytest.raises(BadBatchError, match=rf"batch 0, table {problem[0]}: (id|offset)") as error:
        check_batch(corrupted, sizes, 0, num_dense=config.data.num_dense)
    assert problem[1] in str(error.value)
