"""Each policy against a plain reference written here, plus the record and the dispatcher."""

from __future__ import annotations

import json
import math
from collections import Counter, OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchkit.sim import (
    POLICIES,
    SimResult,
    hot_set,
    min_capacity,
    simulate,
    simulate_lru,
    simulate_lookahead,
    simulate_setassoc,
    simulate_static,
)
from scratchkit.sim.setassoc import set_of

NEVER = math.inf


def skewed(n: int, rows: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, rows + 1)
    return rng.choice(rows, size=n, p=weights / weights.sum()).astype(np.int64)


# ---- static ------------------------------------------------------------------------------------


def test_static_pins_the_hottest_ids_of_the_prefix():
    trace = skewed(4_000, 300, seed=1)
    for share, capacity in [(0.1, 20), (0.5, 50), (1.0, 300)]:
        prefix = trace[: math.ceil(share * len(trace))].tolist()
        ranked = sorted(Counter(prefix).items(), key=lambda kv: (-kv[1], kv[0]))
        pinned = {row for row, _ in ranked[:capacity]}
        hits = sum(row in pinned for row in trace.tolist())
        result = simulate_static(trace, capacity, share)
        assert sorted(hot_set(trace, capacity, share).tolist()) == sorted(pinned)
        assert (result.hits, result.misses) == (hits, len(trace) - hits)
        assert result.fetched_rows == result.misses
        assert result.written_back_rows == 0
        assert result.flushed_rows == len(pinned)


def test_static_oracle_is_the_best_static_choice():
    trace = skewed(3_000, 200, seed=2)
    oracle = simulate_static(trace, 30, prefix_share=1.0).hits
    top = sum(count for _, count in Counter(trace.tolist()).most_common(30))
    assert oracle == top
    assert simulate_static(trace, 30, prefix_share=0.02).hits <= oracle


def test_static_ties_go_to_the_smaller_id():
    assert hot_set([5, 3, 9, 3, 5, 9], 2, 1.0).tolist() == [3, 5]


# ---- set-associative ----------------------------------------------------------------------------


def setassoc_reference(trace, capacity, ways):
    """Per-set OrderedDict LRUs, one access at a time; also a fully associative LRU alongside."""
    sets = capacity // ways
    cache = [OrderedDict() for _ in range(sets)]
    full = OrderedDict()
    hits = conflicts = 0
    where = set_of(trace, sets).tolist()
    for row, s in zip(trace.tolist(), where):
        hit = row in cache[s]
        full_hit = row in full
        hits += hit
        conflicts += full_hit and not hit
        cache[s][row] = None
        cache[s].move_to_end(row)
        if len(cache[s]) > ways:
            cache[s].popitem(last=False)
        full[row] = None
        full.move_to_end(row)
        if len(full) > capacity:
            full.popitem(last=False)
    return hits, conflicts, sum(len(c) for c in cache)


@pytest.mark.parametrize("capacity, ways", [(8, 1), (32, 4), (64, 8), (96, 32)])
def test_setassoc_equals_per_set_lru_reference(capacity, ways):
    trace = skewed(3_000, 400, seed=capacity)
    hits, conflicts, resident = setassoc_reference(trace, capacity, ways)
    result = simulate_setassoc(trace, capacity, ways)
    assert (result.hits, result.extra["conflict_misses"]) == (hits, conflicts)
    assert result.flushed_rows == resident
    assert result.written_back_rows == result.misses - resident
    assert result.extra["sets"] == capacity // ways


def test_one_set_is_plain_lru_and_has_no_conflicts():
    trace = skewed(2_000, 100, seed=4)
    result = simulate_setassoc(trace, 40, ways=40)
    assert result.hits == simulate_lru(trace, 40).hits
    assert result.extra["conflict_misses"] == 0


def test_set_hash_is_deterministic_and_spreads_neighbours():
    ids = np.arange(10_000)
    sets = set_of(ids, 64)
    assert sets.tolist() == set_of(ids, 64).tolist()
    counts = np.bincount(sets, minlength=64)
    assert counts.min() > 100 and counts.max() < 220  # ~156 each; not all in a few sets


def test_setassoc_refuses_capacity_not_a_multiple_of_ways():
    with pytest.raises(ValueError, match="capacity 100 is not a multiple of ways 32; use 96 or 128"):
        simulate_setassoc([1, 2], 100, 32)
    with pytest.raises(ValueError, match="ways must be an integer >= 1"):
        simulate_setassoc([1, 2], 8, 0)


# ---- look-forward -------------------------------------------------------------------------------


def lookahead_reference(trace, capacity, batch_size, depth, horizon):
    """The planner's rules done the slow way: recompute held sets and next uses from scratch."""
    batches = [trace[i : i + batch_size].tolist() for i in range(0, len(trace), batch_size)]
    resident, last_use = set(), {}
    fetched = written = reused = 0
    hits = []

    def next_use(row, k):
        return next((j for j in range(k + 1, len(batches)) if row in batches[j]), NEVER)

    for k in range(len(batches) + depth):
        if k < len(batches):
            wanted = set(batches[k])
            missing = wanted - resident
            reused += len(wanted) - len(missing)
            for row in wanted:
                last_use[row] = k
            held = set().union(*batches[max(0, k - depth) : k + 1])
            for _ in range(len(resident) + len(missing) - capacity):

                def rank(row):
                    nxt = next_use(row, k)
                    seen = nxt != NEVER and (horizon is None or nxt <= k + horizon)
                    return (0, last_use[row], row) if not seen else (1, -nxt, last_use[row], row)

                victim = min(resident - held, key=rank)
                resident.remove(victim)
                written += 1
            resident |= missing
            fetched += len(missing)
        if k - depth >= 0:
            hits.append(sum(row in resident for row in batches[k - depth]))
    return fetched, written, reused, hits, len(resident)


def window_reference(trace, batch_size, depth):
    batches = [set(trace[i : i + batch_size].tolist()) for i in range(0, len(trace), batch_size)]
    return max((len(set().union(*batches[max(0, k - depth) : k + 1])) for k in range(len(batches))), default=0)


@settings(max_examples=40, deadline=None)
@given(
    trace=st.lists(st.integers(0, 15), max_size=50).map(np.array),
    batch_size=st.integers(1, 6),
    depth=st.integers(0, 3),
    extra=st.integers(0, 4),
    horizon=st.sampled_from([None, 0, 1, 3]),
)
def test_lookahead_equals_reference_and_always_hits(trace, batch_size, depth, extra, horizon):
    trace = trace.astype(np.int64)
    need = window_reference(trace, batch_size, depth)
    assert min_capacity(trace, batch_size, depth) == need
    capacity = max(need, 1) + extra
    fetched, written, reused, hits, resident = lookahead_reference(trace, capacity, batch_size, depth, horizon)
    result = simulate_lookahead(trace, capacity, batch_size, depth, horizon)
    assert result.batch_hits.tolist() == hits
    assert result.hits == result.lookups == len(trace)  # 100% at use time
    assert result.misses == 0 and not result.batch_misses.any()
    assert (result.fetched_rows, result.written_back_rows) == (fetched, written)
    assert (result.extra["reused_rows"], result.flushed_rows) == (reused, resident)
    assert result.batch_fetched.sum() == fetched
    assert result.batch_written_back.sum() == written


def test_lookahead_refuses_capacity_below_the_window_and_names_the_minimum():
    trace = skewed(2_000, 500, seed=5)
    need = window_reference(trace, 64, 2)
    assert simulate_lookahead(trace, need, 64, 2).hit_rate == 1.0
    with pytest.raises(ValueError, match=f"the minimum capacity is {need} rows"):
        simulate_lookahead(trace, need - 1, 64, 2)


def test_the_refusal_says_batch_size_counts_lookups_not_samples():
    """Notebook 03 cuts a trace of 256-sample batches into batch_size = 256 x 8 = 2048 lookups:
    the refusal must not read as if a batch had 2048 samples."""
    trace = skewed(2_000, 500, seed=5)
    with pytest.raises(ValueError, match="with batches of 64 lookups \\(batch_size counts lookups, not samples\\)"):
        simulate_lookahead(trace, window_reference(trace, 64, 2) - 1, 64, 2)


def test_seeing_further_fetches_no_more_than_lru_victims():
    trace = skewed(6_000, 2_000, seed=6)
    capacity = min_capacity(trace, 128, 1) + 50
    far = simulate_lookahead(trace, capacity, 128, 1)
    blind = simulate_lookahead(trace, capacity, 128, 1, horizon=0)
    assert far.fetched_rows <= blind.fetched_rows
    assert far.fetched_rows - far.written_back_rows == far.flushed_rows


# ---- record, names, dispatcher ------------------------------------------------------------------


def test_policy_names_parse_in_any_case_and_unknown_lists_the_valid_ones():
    trace = skewed(500, 60, seed=3)
    assert simulate(trace, "LRU", 16).to_dict() == simulate(trace, "lru", 16).to_dict()
    assert simulate(trace, " setassoc ", 16, ways=4).policy == "setassoc"
    with pytest.raises(ValueError, match="choose from static, lru, lfu, opt, lookahead, setassoc"):
        simulate(trace, "fifo", 16)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_every_policy_returns_one_consistent_json_record(policy):
    trace = skewed(1_500, 120, seed=7)
    options = {"lookahead": {"batch_size": 50, "depth": 1}, "setassoc": {"ways": 8}}
    result = simulate(trace, policy, 64, **options.get(policy, {}))
    assert isinstance(result, SimResult)
    assert result.policy == policy and result.capacity == 64
    assert result.hits + result.misses == result.lookups == 1_500
    assert result.hit_rate == pytest.approx(result.hits / 1_500)
    data = json.loads(json.dumps(result.to_dict()))
    for key in ("policy", "capacity", "lookups", "hits", "misses", "hit_rate", "fetched_rows", "written_back_rows"):
        assert key in data
    assert ("batches" in data) == (policy == "lookahead")


@pytest.mark.parametrize("policy", ["lru", "lfu", "opt", "setassoc"])
def test_demand_policies_on_edge_traces(policy):
    def run(trace, capacity):  # setassoc as one set: nothing to conflict
        return simulate(trace, policy, capacity, **({"ways": capacity} if policy == "setassoc" else {}))

    empty = run([], 3)
    assert (empty.lookups, empty.hits, empty.hit_rate, empty.flushed_rows) == (0, 0, 0.0, 0)
    assert run([5, 5, 5], 1).hits == 2  # capacity 1
    assert run([1, 2, 1, 2], 1).hits == 0
    roomy = run([1, 2, 3, 1, 2, 3], 10)  # capacity >= unique ids
    assert (roomy.hits, roomy.fetched_rows, roomy.written_back_rows, roomy.flushed_rows) == (3, 3, 0, 3)


def test_static_and_lookahead_on_edge_traces():
    assert simulate([5, 5, 5], "static", 1).hits == 3  # pinned before the trace
    assert simulate([], "static", 2).hits == 0
    assert simulate([1, 2, 1, 2], "static", 5, prefix_share=1.0).hits == 4
    empty = simulate([], "lookahead", 1, batch_size=4, depth=2)
    assert (empty.num_batches, empty.hits) == (0, 0)
    single = simulate([7], "lookahead", 1, batch_size=4, depth=3)
    assert (single.hits, single.fetched_rows, single.flushed_rows) == (1, 1, 1)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: simulate([1, 2], "lru", 0), "capacity must be an integer >= 1, got 0"),
        (lambda: simulate([1, 2], "lru", 2.5), "capacity must be an integer >= 1"),
        (lambda: simulate([1, 2], "lru", 4, ways=4), "policy lru does not take ways"),
        (lambda: simulate([1, 2], "lookahead", 4, batch_size=2), "lookahead needs depth"),
        (lambda: simulate([1, 2], "lookahead", 4, batch_size=0, depth=1), "batch_size must be"),
        (lambda: simulate([1, 2], "lookahead", 4, batch_size=1, depth=-1), "depth must be"),
        (lambda: simulate([1, 2], "static", 4, prefix_share=0), r"prefix_share must be in \(0, 1\]"),
        (lambda: simulate([1, -2], "opt", 4), r"trace\[1\] = -2"),
        (lambda: simulate([[1]], "lfu", 4), "1-D"),
        (lambda: simulate([1, 2], "belady", 4), "unknown cache policy 'belady'"),
    ],
)
def test_bad_input_says_what_is_wrong(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=1, max_size=200), st.integers(1, 8))
def test_the_lru_served_a_batch_at_a_time_is_the_lru_with_one_id_a_batch(trace, capacity):
    """lru_by_batch, the cache the kit's trainers and projection counters serve a batch at a time,
    is simulate_lru where each batch is one access: the same fills and the same victims."""
    from scratchkit.sim.lru import lru_by_batch

    moved = lru_by_batch([np.array([row]) for row in trace], rows=21, capacity=capacity)
    result = simulate_lru(trace, capacity)
    assert moved[:, 0].sum() == result.fetched_rows and moved[:, 1].sum() == result.written_back_rows
