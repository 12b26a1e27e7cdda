"""A planner of your own (scratchkit/scratchpipe/own_planner.py) in the real ScratchPipe trainer.

The solution planner of notebook 09 (solutions/09_capstone_planner.py) trains exactly as plain
PyTorch does, every lookup a hit; a planner that breaks one of the rules is stopped at the Plan of
the batch where it broke it, with the rule's words, and the host tables keep every row trained
before it (compared with the plain PyTorch reference trained on as many batches).
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from course_solutions import SOLUTIONS, load_solutions
from scratchkit.config import CacheParams
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.measure.reference import ReferenceRun
from scratchkit.measure.verify import largest_difference, verify
from scratchkit.profiles import get_profile
from scratchkit.scratchpipe import own_planner
from scratchkit.scratchpipe.own_planner import Plan, PlanMistake
from scratchkit.trainers import make_trainer

SOLUTION = load_solutions(SOLUTIONS / "09_capstone_planner.py")
plan_batch = SOLUTION.plan_batch


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_the_solution_planner_trains_small_exactly_and_always_hits(depth):
    config = get_profile("small")
    config = config.replace(cache=replace(config.cache, depth=depth))
    steps = 32
    # every table's scratchpad must evict within these batches, or the victims would go untested
    source = SyntheticSource(config.data)
    for t in range(len(config.data.table_sizes)):
        touched = len(np.unique(np.concatenate([source.batch(b).ids[t] for b in range(steps)])))
        assert touched > config.cache.capacity, t
    (result,) = verify(config, ["scratchpipe"], steps, own_planner=plan_batch)
    assert result.max_abs_diff == 0.0, result
    assert result.extras["train_hit_rate"] == 1.0


def evicting(tiny_config):
    """tiny at depth 2 with a scratchpad that evicts from the first batches on."""
    return tiny_config.replace(cache=CacheParams(capacity=140, depth=2))


def test_the_solution_planner_evicts_and_the_kit_keeps_its_map(tiny_config):
    """Plans go through as given: the kit's bookkeeping follows them, and what the planner does to
    its own arguments (here: writes over them) changes nothing of the kit's."""

    def scribbling(b, ids, slot_ids, held, window):
        plan = plan_batch(b, ids, slot_ids, held, window)
        slot_ids[:] = -1
        held[:] = True
        return plan

    config = evicting(tiny_config)
    with make_trainer("scratchpipe", config, own_planner=scribbling) as trainer:
        records = list(trainer.train(16))
        trainer.close()
        weights = trainer.embedding_weights()
    assert sum(r.written_back_rows for r in records) > 0
    assert sum(r.hits for r in records) == sum(r.lookups for r in records)
    reference = ReferenceRun(config, trainer.source)
    reference.train(16)
    assert largest_difference(weights, reference.embedding_weights()) == 0.0


# --- four mistakes, each planted from batch FROM on, each stopped at its Plan -------------------
FROM = 5


def _held_victims(b, ids, slot_ids, held, window):
    """Forgets the holds: a slot that a batch in flight still needs may become a victim."""
    return plan_batch(b, ids, slot_ids, held if b < FROM else np.zeros_like(held), window)


def _slots_not_free(b, ids, slot_ids, held, window):
    """Gives the misses the lowest slots, free or not."""
    plan = plan_batch(b, ids, slot_ids, held, window)
    if b < FROM:
        return plan
    unique, found = SOLUTION.working_set(ids, slot_ids)
    found[found < 0] = np.arange(int(np.count_nonzero(found < 0)))
    return Plan(b, found[np.searchsorted(unique, ids)], plan.misses, plan.victims)


def _misses_left_out(b, ids, slot_ids, held, window):
    """Collects only the misses that took a free slot, not those that took a victim's."""
    plan = plan_batch(b, ids, slot_ids, held, window)
    if b < FROM or not len(plan.victims):
        return plan
    return Plan(b, plan.slots, plan.misses[: len(plan.misses) - len(plan.victims)], plan.victims)


def _ahead_of_itself(b, ids, slot_ids, held, window):
    """Plans the next batch, the first of the window, once it has one."""
    if b < FROM or not window:
        return plan_batch(b, ids, slot_ids, held, window)
    return plan_batch(b + 1, window[0], slot_ids, held, window[1:])


PLANTED = {
    "held victim": (_held_victims, own_planner.HOLDS),
    "slot given twice": (_slots_not_free, own_planner.ONE_SLOT_EACH),
    "miss not collected": (_misses_left_out, own_planner.COLLECT_EVERY_MISS),
    "planned out of order": (_ahead_of_itself, own_planner.IN_ORDER),
}


@pytest.mark.parametrize("mistake", sorted(PLANTED))
def test_a_wrong_planner_is_stopped_naming_the_rule_and_nothing_trained_is_lost(tiny_config, mistake):
    planner, rule = PLANTED[mistake]
    config = evicting(tiny_config)
    with make_trainer("scratchpipe", config, own_planner=planner) as trainer:
        with pytest.raises(PlanMistake) as caught:
            for _ in trainer.train(24):
                pass
        trained = trainer.next_batch
        weights, state = trainer.embedding_weights(), trainer.embedding_state()
    error = caught.value
    assert error.rule == rule and str(error).startswith(f"Plan({error.batch}), table {error.table}: {rule}: ")
    assert FROM <= error.batch and 0 < trained <= error.batch
    reference = ReferenceRun(config, trainer.source)
    reference.train(trained)
    assert largest_difference(weights, reference.embedding_weights()) == 0.0
    assert largest_difference(state, reference.embedding_state()) == 0.0


def test_the_held_victim_names_the_batch_in_flight_that_holds_it(tiny_config):
    with make_trainer("scratchpipe", evicting(tiny_config), own_planner=_held_victims) as trainer:
        with pytest.raises(PlanMistake) as caught:
            list(trainer.train(24))
    words, b = str(caught.value), caught.value.batch
    found = re.search(r"victim slot \d+ \(id \d+\) is held by batch ([\d, ]+), still in flight", words)
    assert found, words
    holders = [int(k) for k in found.group(1).split(", ")]
    assert all(b - 2 <= k < b for k in holders), words  # the batches in flight at depth 2


def test_a_planner_may_not_be_split_into_plan_stripes(tiny_config):
    config = tiny_config.replace(cache=CacheParams(capacity=200, depth=2, plan_stripes=2))
    with make_trainer("scratchpipe", config, own_planner=plan_batch) as trainer:
        with pytest.raises(Exception, match="plans each table whole"):
            list(trainer.train(4))


def test_a_second_train_call_goes_on_from_the_first(tiny_config):
    """A call starts the planner from the row stores as the last one left them."""
    config = evicting(tiny_config)
    with make_trainer("scratchpipe", config, own_planner=plan_batch) as trainer:
        records = list(trainer.train(8)) + list(trainer.train(8))
        trainer.close()
        weights = trainer.embedding_weights()
    assert sum(r.hits for r in records) == sum(r.lookups for r in records)
    reference = ReferenceRun(config, trainer.source)
    reference.train(16)
    assert largest_difference(weights, reference.embedding_weights()) == 0.0


def test_where_and_own_planner_are_two_choices_and_a_pair_that_cannot_run_is_refused(tiny_config):
    """`where=` is a place, `own_planner=` a plan function (scratchpipe/drivers.py `place_for`): your
    planner runs in the trainer's process, on its threads (the default) or inline, and only in
    the host planner's trainer; the device is a trainer of its own."""
    from scratchkit.scratchpipe.drivers import PlanIn
    from scratchkit.trainers.scratchpipe import DeviceScratchPipeTrainer, ScratchPipeTrainer

    assert ScratchPipeTrainer(tiny_config, own_planner=plan_batch).plan_in is PlanIn.THREAD
    config = evicting(tiny_config)
    with ScratchPipeTrainer(config, own_planner=plan_batch, where="inline") as trainer:
        assert trainer.where_host_stages_run(8) is PlanIn.INLINE
        records = list(trainer.train(8))
    assert sum(r.hits for r in records) == sum(r.lookups for r in records)
    refused = [
        (lambda: ScratchPipeTrainer(tiny_config, own_planner=plan_batch, where="host-process"), "trainer's process"),
        (lambda: ScratchPipeTrainer(tiny_config, own_planner=plan_batch, where="process"), "not where='process'"),
        (lambda: ScratchPipeTrainer(tiny_config, where="device"), "that is the trainer 'scratchpipe-device'"),
        (lambda: DeviceScratchPipeTrainer(tiny_config, own_planner=plan_batch), "plans on the device with the kit's"),
        (lambda: DeviceScratchPipeTrainer(tiny_config, where="thread"), "for a host place use the trainer"),
        (lambda: ScratchPipeTrainer(tiny_config, own_planner="thread"), "must be a plan function"),
    ]
    for make, why in refused:
        with pytest.raises(ValueError, match=why):
            make()


# --- check_plan on a hand-made map: 6 slots, ids 10..15 resident, slots 4 and 5 free ---------------
def small_map():
    slot_map = own_planner.SlotMap(40, 6)
    slot_map.insert(np.array([10, 11, 12, 13]), np.array([0, 1, 2, 3]))
    slot_map.hold(np.array([1]))  # batch 6, in flight, holds slot 1
    return slot_map


IDS = np.array([10, 20, 21, 22, 10])  # 10 is a hit in slot 0; 20, 21, 22 miss


def a_plan(slots, misses=(20, 21, 22), victims=(2,), batch=7):
    return Plan(batch, np.array(slots), np.array(misses), np.array(victims))


CHECKED = {
    "right": (a_plan([0, 4, 5, 2, 0]), None),
    "not a Plan": (([0, 4, 5, 2, 0], [20, 21, 22], [2]), own_planner.INTERFACE),
    "a slot per lookup": (a_plan([0, 4, 5, 2]), own_planner.INTERFACE),
    "another batch": (a_plan([0, 4, 5, 2, 0], batch=8), own_planner.IN_ORDER),
    "an id in two slots": (a_plan([0, 4, 5, 2, 3]), own_planner.ONE_SLOT_EACH),
    "two ids in one slot": (a_plan([0, 4, 4, 2, 0]), own_planner.ONE_SLOT_EACH),
    "a slot past the end": (a_plan([0, 4, 6, 2, 0]), own_planner.ONE_SLOT_EACH),
    "a miss on a resident slot": (a_plan([0, 4, 5, 3, 0]), own_planner.ONE_SLOT_EACH),
    "a miss left out": (a_plan([0, 4, 5, 2, 0], misses=(20, 21)), own_planner.COLLECT_EVERY_MISS),
    "a hit collected": (a_plan([0, 4, 5, 2, 0], misses=(10, 20, 21, 22)), own_planner.ONLY_MISSES),
    "a hit moved": (a_plan([3, 4, 5, 2, 3], victims=(2, 3)), own_planner.ONLY_MISSES),
    "a held victim": (a_plan([0, 4, 5, 1, 0], victims=(1,)), own_planner.HOLDS),
    "a free victim": (a_plan([0, 4, 5, 2, 0], victims=(2, 4)), own_planner.VICTIMS),
    "the batch's own row": (a_plan([0, 4, 5, 2, 0], victims=(0, 2)), own_planner.VICTIMS),
    "an unused victim": (a_plan([0, 4, 5, 2, 0], victims=(2, 3)), own_planner.VICTIMS),
}


@pytest.mark.parametrize("case", sorted(CHECKED))
def test_check_plan_names_the_rule_each_plan_breaks(case):
    plan, rule = CHECKED[case]
    holders = own_planner.Holders({6: np.array([1])})
    if rule is None:
        unique, slots = own_planner.check_plan(plan, 7, 0, IDS, small_map(), holders)
        assert unique.tolist() == [10, 20, 21, 22] and slots.tolist() == [0, 4, 5, 2]
        return
    with pytest.raises(PlanMistake) as caught:
        own_planner.check_plan(plan, 7, 0, IDS, small_map(), holders)
    assert caught.value.rule == rule, str(caught.value)
    assert str(caught.value).startswith(f"Plan(7), table 0: {rule}")
