"""The demand caches' victim choice: `first_k` against its obvious twin, `first_by_keys`."""

import numpy as np
from hypothesis import given, settings, strategies as st

from scratchkit.embedding.victims import first_by_keys, first_k


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_first_k_is_the_lexsort_s_first_k_in_its_order(data):
    slots = data.draw(st.integers(1, 60))
    spread = data.draw(st.sampled_from([2, 5, 1000]))  # few distinct keys: many ties
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    keys = tuple(rng.integers(-1, spread, slots) for _ in range(data.draw(st.integers(1, 3))))
    candidates = rng.permutation(slots)[: data.draw(st.integers(0, slots))]  # any order, as given
    k = data.draw(st.integers(0, len(candidates) + 1))
    expected = first_by_keys(keys, candidates, k)
    np.testing.assert_array_equal(first_k(keys, candidates, k), expected)


def test_ties_go_to_the_earlier_candidate_as_lexsort_s_stable_order():
    recency = np.array([5, 3, 3, 3, 9])
    assert first_k((recency,), np.array([4, 3, 1, 2, 0]), 2).tolist() == [3, 1]
