"""`bench --validate` holds the model to each stage run alone, as `calibrate` times it
(`TrainConfig.alone`): no batch loader's thread beside the steps, one thread. On this 2-core
machine, with the loader on, a demand cache's fetch on `small` measured 1.7-2.7 ms a step against
0.6 without it, and gpu-only's MLP 1.7-1.9 against 0.9: the loader's thread took a core and the GIL
from the stages, which the model does not price (docs/costmodel.md, "What validation holds")."""

from __future__ import annotations

from scratchkit.calibration import fixed_costs
from scratchkit.commands.common import config_of
from scratchkit.commands.request import DataRequest, TrainingRequest
from scratchkit.commands.validation import as_calibrated
from scratchkit.config import TrainConfig


def test_a_validation_runs_the_stages_alone_where_the_command_line_leaves_it():
    training = as_calibrated(TrainingRequest())
    config = config_of(DataRequest(profile="tiny"), training, 4, 1)
    assert (config.batches_ahead, config.threads) == (0, 1)


def test_flags_given_on_the_command_line_are_kept():
    training = as_calibrated(TrainingRequest(batches_ahead=3, threads=2))
    config = config_of(DataRequest(profile="tiny"), training, 4, 1)
    assert (config.batches_ahead, config.threads) == (3, 2)


def test_a_bench_without_validate_keeps_the_loader():
    config = config_of(DataRequest(profile="tiny"), TrainingRequest(), 4, 1)
    assert config.batches_ahead == TrainConfig.batches_ahead > 0 and config.threads is None


def test_the_calibration_times_its_training_steps_alone(monkeypatch):
    """The dense step's rate and the calls' fixed costs come from gpu-only's steps: run alone too."""
    import scratchkit.trainers as trainers

    made, seen = trainers.make_trainer, []

    def spy(name, config, **kwargs):
        seen.append((config.batches_ahead, config.threads))
        return made(name, config, **kwargs)

    monkeypatch.setattr(trainers, "make_trainer", spy)  # stage_times imports it as it runs
    fixed_costs.stage_times(fixed_costs.tiny_config(2, 1, fixed_costs.OptimizerKind.SGD), 2, min)
    assert seen == [(0, 1)]
