"""Bad input is refused at the door with one clear line, the same for every trainer, and nothing
already trained is lost. (Before the fix: an id of -1 crashed ScratchPipe by signal, an id equal to
the table size raised a bare IndexError, `static` said "operands could not be broadcast", and NaN
dense values and labels of 2 were trained silently by every trainer.)"""

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch

from scratchkit.commands.cli import main
from scratchkit.config import CacheParams, OptimizerConfig
from scratchkit.data.checks import BadBatchError
from scratchkit.data.criteo import load_criteo
from scratchkit.data.movielens import load_movielens
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.scratchpipe.capacity import minimum_capacities
from scratchkit.measure.reference import ReferenceRun
from scratchkit.designs import DESIGNS
from scratchkit.trainers.scratchpipe import ScratchPipeTrainer
from scratchkit.scratchpipe.drivers import PlanIn
from scratchkit.trainers import make_trainer
from scratchkit.trainers.base import NonFiniteLossError

BAD_BATCH = 3


class Corrupted(SyntheticSource):
    """The synthetic batches, batch BAD_BATCH changed by `corrupt(batch) -> batch`; `num_dense`:
    a source whose model takes that many dense features (each batch's dense values cut to it)."""

    def __init__(self, data, corrupt, num_dense=None):
        super().__init__(data)
        self.corrupt = corrupt
        self.num_dense = data.num_dense if num_dense is None else num_dense

    def batch(self, index):
        batch = super().batch(index)
        batch = replace(batch, dense=np.ascontiguousarray(batch.dense[:, : self.num_dense]))
        return self.corrupt(batch) if index == BAD_BATCH else batch


def changed(field, change):
    """A corruption: `field` of the batch ('dense', 'labels', or 'ids'/'offsets' of table 1)
    replaced by `change(a copy of it)`."""

    def corrupt(batch):
        if field in ("ids", "offsets"):
            tables = list(getattr(batch, field))
            tables[1] = change(tables[1].copy())
            return replace(batch, **{field: tuple(tables)})
        return replace(batch, **{field: change(getattr(batch, field).copy())})

    return corrupt


def set_at(field, where, value):
    def change(array):
        array[where] = value
        return array

    return changed(field, change)


def set_id(value):
    return set_at("ids", 5, value)


def same_values_reversed_view(array):
    """The same values as `array`, read through a view with negative strides (`x[::-1]` of a copy)."""
    return array[::-1].copy()[::-1]


def with_dense(width):
    return changed("dense", lambda dense: np.ones((dense.shape[0], width), dtype=np.float32))


STRIDES = "a view such as x[::-1] or x[:, ::2]"
# name -> (corrupt, the door's message for batch 3 of `tiny`, the model's num_dense if not tiny's 4)
CORRUPTIONS = {
    "negative id": (set_id(-1), "batch 3, table 1: id -1 at position 5 is out of range [0, 300)"),
    "id = table size": (set_id(300), "batch 3, table 1: id 300 at position 5 is out of range [0, 300)"),
    "NaN dense": (set_at("dense", (2, 1), np.nan), "batch 3: dense value nan at sample 2, feature 1 is not finite"),
    "inf dense": (set_at("dense", (2, 1), np.inf), "batch 3: dense value inf at sample 2, feature 1 is not finite"),
    "label 2": (set_at("labels", 4, 2.0), "batch 3: label 2.0 at sample 4 is not 0 or 1"),
    "label -1": (set_at("labels", 4, -1.0), "batch 3: label -1.0 at sample 4 is not 0 or 1"),
    "ids a list": (
        changed("ids", list),
        "batch 3, table 1: ids are a Python list, not a NumPy array (np.asarray(ids, dtype=np.int64))",
    ),
    "labels a list": (
        changed("labels", list),
        "batch 3: labels are a Python list, not a NumPy array (np.asarray(labels, dtype=np.float32))",
    ),
    "ids reversed": (
        changed("ids", same_values_reversed_view),
        f"batch 3, table 1: ids are not contiguous in memory (strides (-8,): {STRIDES}); "
        "np.ascontiguousarray(ids) copies them",
    ),
    "offsets reversed": (
        changed("offsets", same_values_reversed_view),
        f"batch 3, table 1: offsets are not contiguous in memory (strides (-8,): {STRIDES}); "
        "np.ascontiguousarray(offsets) copies them",
    ),
    "labels reversed": (
        changed("labels", same_values_reversed_view),
        f"batch 3: labels are not contiguous in memory (strides (-4,): {STRIDES}); "
        "np.ascontiguousarray(labels) copies them",
    ),
    "dense every other feature": (
        changed("dense", lambda dense: np.repeat(dense, 2, axis=1)[:, ::2]),
        f"batch 3: dense values are not contiguous in memory (strides (32, 8): {STRIDES}); "
        "np.ascontiguousarray(dense) copies them",
    ),
    "dense too wide": (
        with_dense(5),
        "batch 3: dense values of shape (32, 5), but the model takes 4 dense features a sample "
        "(the source's num_dense): give each sample 4, or make the source's num_dense 5",
    ),
    "dense too narrow": (
        with_dense(3),
        "batch 3: dense values of shape (32, 3), but the model takes 4 dense features a sample "
        "(the source's num_dense): give each sample 4, or make the source's num_dense 3",
    ),
    "dense to a model without": (
        with_dense(4),
        "batch 3: dense values of shape (32, 4), but the model takes 0 dense features a sample "
        "(the source's num_dense): give each sample 0, or make the source's num_dense 4",
        0,
    ),
}

# Every trainer, and ScratchPipe in every place its planner runs (its default, auto, is the first
# entry; scratchpipe-device is the trainer that plans on the device) and prefetch-lru's prefetch on
# its own thread.
MODES = {name: (name, {}) for name in DESIGNS} | {
    **{
        f"scratchpipe, where={p.value}": ("scratchpipe", {"where": p})
        for p in PlanIn
        if p.value not in ("auto", "device", "step")  # step: lru-device's, a trainer above
    },
    "prefetch-lru, prefetch_in=thread": ("prefetch-lru", {"prefetch_in": "thread"}),
}


@pytest.mark.parametrize("what", list(CORRUPTIONS))
@pytest.mark.parametrize("mode", list(MODES))
def test_every_trainer_refuses_a_bad_batch_in_the_same_words(tiny_config, mode, what):
    corrupt, message, *num_dense = CORRUPTIONS[what]
    name, options = MODES[mode]
    source = Corrupted(tiny_config.data, corrupt, *num_dense)
    with pytest.raises(BadBatchError) as error:
        trainer = make_trainer(name, tiny_config, source=source, **options)  # static profiles batch 3 here
        list(trainer.train(10))
    assert str(error.value) == message
    if name == "static":
        return
    # a trainer on ScratchPipe's stages (its pipeline, or lru-device's stages in its step) checks
    # every batch of the call before its first step (its capacity check reads them all); the
    # others train batches 0-2 and stop at batch 3's door. Nothing trained is lost.
    checks_first = issubclass(DESIGNS[name].trainer_class(), ScratchPipeTrainer)
    assert trainer.next_batch == (0 if checks_first else BAD_BATCH)
    reference = ReferenceRun(tiny_config, Corrupted(tiny_config.data, lambda batch: batch, *num_dense))
    reference.train(trainer.next_batch)
    for mine, theirs in zip(trainer.embedding_weights(), reference.embedding_weights()):
        assert torch.equal(mine, theirs)
    trainer.close()


def test_a_bad_batch_beyond_the_capacity_check_is_refused_by_the_planner(tiny_config):
    """ScratchPipe's planner looks ahead past the call's last batch: it checks what it reads."""
    source = Corrupted(tiny_config.data, set_id(-1))
    # the smallest scratchpad for batches 0-2 at depth 1: Plan(2) must evict, so it looks ahead
    minimum = max(minimum_capacities(SyntheticSource(tiny_config.data), 1, 0, 3))
    config = tiny_config.replace(cache=CacheParams(capacity=minimum, depth=1))
    trainer = make_trainer("scratchpipe", config, source=source)
    with pytest.raises(BadBatchError, match="batch 3, table 1: id -1"):
        list(trainer.train(3))  # batches 0-2 pass the capacity check; Plan peeks at 3
    assert trainer.next_batch <= 2


def test_no_crash_by_signal_on_a_negative_id(tiny_config, tmp_path):
    """Before the fix this died with SIGSEGV or 'double free or corruption' in every planner mode."""
    script = tmp_path / "negative.py"
    script.write_text(f"""
import sys
sys.path.insert(0, {str(tmp_path.parent)!r})
from scratchkit.profiles import get_profile
from scratchkit.trainers.scratchpipe import ScratchPipeTrainer
sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
from test_bad_input import Corrupted, set_id
config = get_profile("tiny")
for planner in ("host-process", "process", "thread"):
    trainer = ScratchPipeTrainer(config, source=Corrupted(config.data, set_id(-1)), where=planner)
    try:
        list(trainer.train(20))
    except ValueError as error:
        print(planner, error)
""")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("id -1 at position 5 is out of range") == 3


def test_a_non_finite_loss_stops_before_the_step_changes_anything(tiny_config):
    config = tiny_config.replace(optimizer=OptimizerConfig(lr=1e30))  # diverges within a few steps
    trainer = make_trainer("hybrid", config)
    with pytest.raises(NonFiniteLossError, match=r"step (\d+): the loss is (nan|inf)") as error:
        list(trainer.train(50))
    step = int(str(error.value).split()[1].rstrip(":"))
    assert trainer.next_batch == step  # the bad step was not taken
    for w in trainer.embedding_weights():
        assert torch.isfinite(w).all()
    reference = ReferenceRun(config, SyntheticSource(config.data))
    reference.train(step)
    for mine, theirs in zip(trainer.embedding_weights(), reference.embedding_weights()):
        assert torch.equal(mine, theirs)
    onwards = make_trainer("hybrid", config.replace(nonfinite_loss="continue"))
    assert len(list(onwards.train(step + 2))) == step + 2  # the option trains on


def test_nonfinite_loss_option_is_a_closed_choice(tiny_config):
    with pytest.raises(ValueError, match="unknown nonfinite_loss 'ignore'; choose from 'raise', 'continue'"):
        tiny_config.replace(nonfinite_loss="ignore")


# --- files and flags, from the command line ---------------------------------------------------------
def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_bad_trace_files_are_refused_in_one_line(tmp_path, capsys):
    np.savez(tmp_path / "two.npz", a=np.arange(3), b=np.arange(4))
    np.save(tmp_path / "empty.npy", np.array([], dtype=np.int64))
    (tmp_path / "ids.txt").write_text("1 2 3\n")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "int32.npy", np.arange(5, dtype=np.int32))
    np.save(tmp_path / "uint64.npy", np.arange(5, dtype=np.uint64))
    np.save(tmp_path / "huge.npy", np.array([3, 4, 2**63 + 5, 1], dtype=np.uint64))
    np.save(tmp_path / "floats.npy", np.arange(5, dtype=np.float64))
    np.save(tmp_path / "square.npy", np.zeros((2, 2), dtype=np.int64))
    convert = "np.save('{0}', np.load('{0}').astype(np.int64)) converts them exactly"
    cases = {
        tmp_path: "is a folder, not a trace file",
        tmp_path / "two.npz": "is an .npz archive, not a single array",
        tmp_path / "empty.npy": "the trace is empty",
        tmp_path / "ids.txt": "is not a .npy file (it is text, starting '1 2 3')",
        tmp_path / "objects.npy": "is not a trace (it holds Python objects)",
        tmp_path / "int32.npy": "the trace's ids are int32, not int64: " + convert.format(tmp_path / "int32.npy"),
        tmp_path / "uint64.npy": "the trace's ids are uint64, not int64: " + convert.format(tmp_path / "uint64.npy"),
        tmp_path / "huge.npy": f"huge.npy: id {2**63 + 5} at position 2 is 2**63 or more: the trace's ids are uint64",
        tmp_path / "floats.npy": "the trace's ids are float64, not int64: a trace holds row ids, whole numbers from 0; "
        "write them as int64 (np.save(path, ids.astype(np.int64)), where every id is whole)",
        tmp_path / "square.npy": "a trace is a 1-D array of int64 ids, got shape (2, 2)",
    }
    streamed = {"int32.npy", "uint64.npy", "huge.npy", "floats.npy", "square.npy"}  # --mrc reads a chunk at a time
    for path, expected in cases.items():
        runs = [["--policy", "lru", "--capacity", 4]] + ([["--mrc"]] if path.name in streamed else [])
        for flags in runs:
            code, out, err = cli(capsys, "simulate", "--trace", path, *flags)
            assert code == 2 and expected in err and str(path) in err, (flags, err)
            assert len(err.strip().splitlines()) == 1 and "allow_pickle" not in err


def test_a_negative_tolerance_is_refused(capsys):
    code, _, err = cli(capsys, "verify", "--profile", "tiny", "--tolerance", "-1")
    assert code == 2 and "--tolerance must be >= 0, got -1.0" in err
    with pytest.raises(ValueError, match="tolerance must be >= 0"):
        from scratchkit.measure.verify import verify

        next(verify(__import__("scratchkit.profiles").profiles.get_profile("tiny"), ["hybrid"], 2, tolerance=-1.0))


def test_a_criteo_count_too_large_for_a_float_is_refused_or_skipped_and_counted(tmp_path):
    good = "\t".join(["1", *(["3"] * 13), *(["68fd1e64"] * 26)])
    huge = "\t".join(["0", "1" * 400, *(["3"] * 12), *(["68fd1e64"] * 26)])
    path = tmp_path / "day.tsv"
    path.write_text("\n".join([good] * 3 + [huge] + [good] * 4) + "\n")
    with pytest.raises(ValueError, match=r"day.tsv:4: column 2 \(I1\) .* has 400 digits: more than a float64 holds"):
        load_criteo(path, 100, batch_size=2)
    data = load_criteo(path, 100, batch_size=2, errors="skip")
    assert data.report.skip_reasons["dense value too large"] == 1 and data.num_rows == 7
    assert np.isfinite(data.dense).all()


def test_movielens_numbers_too_large_are_refused(tmp_path):
    path = tmp_path / "u.data"
    path.write_text("1\t2\t4\t880000000\n" + f"3\t4\t{'9' * 400}\t880000001\n")
    with pytest.raises(ValueError, match=r"u.data:2: column 3 \(rating\) .* is too large for a floating-point"):
        load_movielens(path, batch_size=1)
    path.write_text("1\t2\t4\t880000000\n" + f"3\t4\t5\t{'9' * 30}\n")
    with pytest.raises(ValueError, match=r"u.data:2: column 4 \(timestamp\) .* does not fit a 64-bit integer"):
        load_movielens(path, batch_size=1)


def test_too_small_a_scratchpad_names_the_cli_flag_on_the_command_line(capsys):
    code, _, err = cli(
        capsys, "verify", "--profile", "tiny", "--trainers", "scratchpipe", "--capacity", 10, "--steps", 4
    )
    assert code == 2 and "(the fewest every trainer and table here accept) or --capacity min" in err
    assert "CacheParams" not in err and len(err.strip().splitlines()) == 1
    json.dumps(err)  # one plain line
