"""A step is all or nothing, in every trainer: a batch is refused whole at the door, a failure part
way through a step changes nothing (or, inside the update itself, stops the trainer, which says so),
and after the source is repaired training goes on to equal plain PyTorch bit for bit.

The cases are scratchkit/measure/step_faults.py's; benchmarks/bench_faults.py runs them all.
(Before the fix: a batch of uint64 ids passed the door, the dense optimizer stepped, then the
embedding backward failed, so the repaired batch's dense step was taken twice; prefetch-lru kept
the spoiled batch it had read ahead and refused every later call; a batch of no samples was stopped
as a NaN loss.)
"""

from dataclasses import replace

import numpy as np
import pytest

from scratchkit.config import CacheParams
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.measure.faults import Snapshots
from scratchkit.measure.step_faults import (
    INSIDE_UPDATE,
    SPOILERS,
    STEPS,
    TORN,
    StepFaultCase,
    case_config,
    fault_points,
    prefetch_capacity_case,
    run_case,
)
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.designs import DESIGNS
from scratchkit.trainers import make_trainer
from scratchkit.measure.killed_saves import kill_saves

TRAINERS = list(DESIGNS)


@pytest.fixture(scope="module")
def snapshots():
    return Snapshots(case_config("adagrad"), STEPS)


@pytest.mark.parametrize("spoiler", list(SPOILERS))
@pytest.mark.parametrize("name", TRAINERS)
def test_a_spoiled_batch_is_refused_whole_and_training_goes_on_exactly(name, spoiler, snapshots):
    result = run_case(StepFaultCase(name, spoiler), snapshots)
    assert result.error == SPOILERS[spoiler][1]  # one line, the same from every trainer
    assert result.refused_after == ""
    assert result.exact, f"{result.lost_rows} rows (or the dense model) differ from the reference"


@pytest.mark.parametrize("name", TRAINERS)
def test_a_failure_anywhere_before_the_update_changes_nothing(name, snapshots):
    points = [p for p in fault_points(name) if p not in INSIDE_UPDATE]
    assert len(points) >= 5, points  # the stages were found, not skipped
    for point in points:
        result = run_case(StepFaultCase(name, point), snapshots)
        assert "planted failure" in result.error, (point, result.error)
        assert result.one_line and result.refused_after == "", (point, result)
        assert result.exact, (point, result.lost_rows)


@pytest.mark.parametrize("name", TRAINERS)
def test_a_torn_update_stops_the_trainer_and_says_so(name, snapshots):
    result = run_case(StepFaultCase(name, TORN), snapshots)
    assert result.error.startswith("step 3 failed inside its update (PlantedFault"), result.error
    assert "trains no further" in result.refused_after and result.refused_after.startswith("step 3")
    # what it says is true: the tables hold the batches before it, the dense model has moved on
    assert result.lost_rows == 0 and not result.exact


# --- prefetch-lru's look-ahead --------------------------------------------------------------------
class WideLast(SyntheticSource):
    """Batch `wide` touches every row of each table: no cache short of the whole table holds it
    beside another batch."""

    def __init__(self, data, wide):
        super().__init__(data)
        self.wide = wide

    def batch(self, index):
        batch = super().batch(index)
        if index != self.wide:
            return batch
        B = batch.batch_size
        ids = tuple(np.arange(n, dtype=np.int64) % n for n in self.table_sizes)
        offsets = tuple((np.arange(B, dtype=np.int64) * (n // B)) for n in self.table_sizes)
        return replace(batch, ids=ids, offsets=offsets)


def test_prefetch_lru_never_refuses_a_call_at_the_capacity_its_message_names(tiny_config):
    steps = 5
    source = WideLast(tiny_config.data, wide=steps)  # batch 5: past the call's last batch
    need = max(minimum_capacities(source, 1, 0, steps))
    assert need < max(minimum_capacities(source, 1, 0, steps + 1))  # batch 5 would not fit
    config = tiny_config.replace(cache=CacheParams(capacity=need))
    trainer = make_trainer("prefetch-lru", config, source=source)
    assert len(list(trainer.train(steps))) == steps  # it looked no further than batch 4


def test_prefetch_lru_names_the_minimum_its_call_needs(tiny_config):
    steps = 5
    source = SyntheticSource(tiny_config.data)
    need = max(minimum_capacities(source, 1, 0, steps))
    config = tiny_config.replace(cache=CacheParams(capacity=need - 1))
    with pytest.raises(ValueError, match=f"at least {need} rows") as error:
        list(make_trainer("prefetch-lru", config, source=source).train(steps))
    assert "\n" not in str(error.value)
    config = tiny_config.replace(cache=CacheParams(capacity=need))
    assert len(list(make_trainer("prefetch-lru", config, source=source).train(steps))) == steps


# --- an interrupted checkpoint save leaves nothing behind -------------------------------------------
def test_a_save_killed_part_way_leaves_no_torn_file_and_nothing_after_the_next_save(tmp_path):
    tally = kill_saves(tmp_path, kills=8)  # about a third of kills land between saves: 8 all miss 1 in 4,000
    assert tally.inside_a_save > 0, "no kill landed inside a save: the test proved nothing"
    assert tally.torn_files == 0 and tally.left_after_next_save == 0, tally


def test_prefetch_lru_trains_random_calls_at_the_capacity_it_names():
    for seed in range(6):
        result = prefetch_capacity_case(seed)
        assert result.error == "" and result.exact, result
