"""Nothing trained is lost, whatever happens: a killed host or planner process, a killed run, a
checkpoint taken between the steps of a running loop, Ctrl-C. The oracle is plain PyTorch
(scratchkit.measure.reference) trained on exactly the batches whose Train finished.

The first tests use only the trainer's API (they failed before the crash-safety fix: a SIGKILL in
Write-back lost that batch's dirty victims; a live checkpoint raced with Insert). The rest run a
slice of the fault campaign that benchmarks/bench_faults.py runs in full.
"""
import os
import signal

import pytest
import torch

from scratchkit.trainers.checkpoint import load_checkpoint_file, save_checkpoint_file
from scratchkit.config import CacheParams, OptimizerConfig, OptimizerKind
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.scratchpipe.events import Stage
from scratchkit.measure.faults import Campaign, FaultCase, FaultKind, default_cases
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.measure.reference import ReferenceRun
from scratchkit.trainers import make_trainer
from scratchkit.trainers.scratchpipe import PipelineError, ScratchPipeTrainer

STEPS = 20


def evicting_config(tiny_config, kind=OptimizerKind.SGD, depth=2):
    """The smallest scratchpad for the run: every batch evicts dirty rows."""
    minimum = max(minimum_capacities(SyntheticSource(tiny_config.data), depth, 0, STEPS))
    return tiny_config.replace(cache=CacheParams(capacity=minimum, depth=depth),
                               optimizer=OptimizerConfig(kind=kind, lr=0.1))


def differs_from_reference(trainer, steps) -> float:
    reference = ReferenceRun(trainer.config, trainer.source)
    reference.train(steps)
    pairs = list(zip(trainer.embedding_weights(), reference.embedding_weights()))
    pairs += [(a, b) for a, b in zip(trainer.embedding_state(), reference.embedding_state()) if a is not None]
    return max(float((a - b).abs().max()) for a, b in pairs)


def kill_host_process_at(stage, batch):
    parent = os.getpid()

    def hook(s, b):
        if s is stage and b == batch and os.getpid() != parent:   # in the forked host process
            os.kill(os.getpid(), signal.SIGKILL)
    return hook


@pytest.mark.parametrize("stage", [Stage.COLLECT, Stage.WRITE_BACK, Stage.TRANSFER, Stage.INSERT])
def test_a_killed_host_process_loses_no_row(tiny_config, stage):
    trainer = ScratchPipeTrainer(evicting_config(tiny_config), planner="host-process",
                                 stage_hook=kill_host_process_at(stage, 9))
    with pytest.raises(PipelineError, match=f"stage {stage.value} failed on batch 9: .*killed by SIGKILL"):
        list(trainer.train(STEPS))
    assert trainer.next_batch == 9                       # Train(9) waited for the dead process
    assert differs_from_reference(trainer, 9) == 0.0     # every trained row is home
    trainer.stage_hook = None
    list(trainer.train(STEPS - 9))                       # and training goes on, exactly
    assert differs_from_reference(trainer, STEPS) == 0.0


@pytest.mark.parametrize("planner", ["host-process", "process", "thread", "device"])
def test_checkpoints_between_the_steps_of_a_running_loop_are_exact(tiny_config, planner):
    config = evicting_config(tiny_config, OptimizerKind.ROWWISE_ADAGRAD)
    trainer = ScratchPipeTrainer(config, planner=planner)
    reference = ReferenceRun(config, trainer.source)
    for record in trainer.train(STEPS):
        saved = trainer.checkpoint()                     # while the host stages run ahead
        reference.train(1)
        assert saved["next_batch"] == record.step + 1
        for mine, theirs in zip(saved["weights"], reference.embedding_weights()):
            assert torch.equal(mine, theirs), record.step
        for mine, theirs in zip(saved["state"], reference.embedding_state()):
            assert torch.equal(mine, theirs), record.step
    assert differs_from_reference(trainer, STEPS) == 0.0


def test_what_cannot_run_inside_a_running_loop_is_refused(tiny_config):
    trainer = ScratchPipeTrainer(evicting_config(tiny_config))
    saved = trainer.checkpoint()
    for _ in trainer.train(10):
        with pytest.raises(RuntimeError, match=r"load_checkpoint\(\) inside a running .* leave the loop"):
            trainer.load_checkpoint(saved)
        with pytest.raises(RuntimeError, match=r"train\(\) inside a running"):
            next(iter(trainer.train(1)))
        break
    trainer.load_checkpoint(saved)                       # after the loop: fine
    assert trainer.next_batch == 0


def test_a_checkpoint_file_is_whole_or_absent(tmp_path, tiny_config, monkeypatch):
    trainer = ScratchPipeTrainer(evicting_config(tiny_config))
    list(trainer.train(5))
    path = save_checkpoint_file(trainer.checkpoint(), tmp_path / "run.pt")
    list(trainer.train(5))

    def dies_halfway(obj, file):                         # as if killed while writing
        file.write(b"half a checkpoint")
        raise OSError("disk full")
    monkeypatch.setattr(torch, "save", dies_halfway)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint_file(trainer.checkpoint(), path)
    assert load_checkpoint_file(path)["next_batch"] == 5   # the previous one, intact
    assert [p.name for p in tmp_path.iterdir()] == ["run.pt"]   # no temporary left behind
    with pytest.raises(FileNotFoundError, match="checkpoint file .*nothing.pt does not exist"):
        load_checkpoint_file(tmp_path / "nothing.pt")


class PressesCtrlC(SyntheticSource):
    """Ctrl-C while batch 4 is being read, in the middle of that training step."""
    armed = False

    def batch(self, index):
        if self.armed and index == 4:
            self.armed = False
            signal.raise_signal(signal.SIGINT)
        return super().batch(index)


@pytest.mark.parametrize("name", ["hybrid", "gpu-only", "lru", "static"])
def test_ctrl_c_inside_a_step_finishes_it_yields_it_then_stops(tiny_config, name):
    source = PressesCtrlC(tiny_config.data)
    trainer = make_trainer(name, tiny_config, source=source)
    source.armed = True
    seen = []
    with pytest.raises(KeyboardInterrupt):
        for record in trainer.train(10):
            seen.append(record.step)
    assert seen == [0, 1, 2, 3, 4] and trainer.next_batch == 5   # step 4 whole, and yielded
    assert differs_from_reference(trainer, 5) == 0.0


# --- a slice of the campaign ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def campaign():
    return Campaign.for_profile("tiny", steps=STEPS)


@pytest.mark.parametrize("kind", [FaultKind.KILL_HOST, FaultKind.KILL_HOST_AT, FaultKind.KILL_PLANNER,
                                  FaultKind.CHECKPOINT, FaultKind.SIGINT])
def test_campaign_slice_loses_nothing(campaign, kind):
    for case in default_cases(3, [kind], seed=7, steps=STEPS):
        result = campaign.run_case(case)
        assert result.exact and result.lost_rows == 0 and result.resumed_lost_rows == 0, result


def test_a_killed_run_leaves_no_process_and_resumes_from_its_last_file(campaign):
    for planner in ("host-process", "process"):
        result = campaign.run_case(FaultCase(FaultKind.KILL_RUN, planner, "adagrad", seed=11))
        assert "outlived" not in result.error, result
        assert result.exact, result


def test_the_campaign_sees_a_lost_row(campaign, monkeypatch):
    """The judge can fail: a Write-back that drops the first victim of each batch is caught."""
    from scratchkit.scratchpipe.host_stages import HostStages

    honest = HostStages.write_back

    def drops_one(self, item):
        for plan in item.tables:
            plan.victim_ids, plan.victim_slots = plan.victim_ids[1:], plan.victim_slots[1:]
        honest(self, item)
    monkeypatch.setattr(HostStages, "write_back", drops_one)
    result = campaign.run_case(FaultCase(FaultKind.CHECKPOINT, "host-process", "sgd", seed=1))
    assert not result.exact
