"""One word, one meaning (docs/design.md, vocabulary): "profile" is a training workload
(scratchkit/profiles.py, `--profile`), never a machine's speeds (`Hardware`, costmodel/hardware.py);
"shard" is a rank's part of the tables (scratchkit/distributed/), never the planner's parts
(stripes, scratchpipe/stripes.py) nor SHARDS sampling (sim/sampling.py, the algorithm's name)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HARDWARE_PROFILE = re.compile(r"(?i)hardware[ _-]?profile|hw_profile|gpu_profile|\bprofile_names\b")
LOWER_SHARD = re.compile(r"\b[Ss]hard(?!S)|\bSHARD(?!S)")  # shard, Shard, sharded, SHARD_... but not SHARDS


def prose_and_code() -> list[Path]:
    docs = [p for p in (ROOT / "docs").glob("*.md") if p.name != "results.md"]  # results.md quotes old runs
    return (
        sorted((ROOT / "scratchkit").rglob("*.py"))
        + docs
        + [ROOT / "README.md"]
        + sorted((ROOT / "notebooks").glob("*.py"))
        + sorted((ROOT / "scripts").glob("*"))
        + sorted((ROOT / "benchmarks").glob("*.py"))
    )


def hits(paths, pattern) -> list[str]:
    return [
        f"{p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}:{n}: {line.strip()}"
        for p in paths
        if p.is_file()
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]


def test_a_machine_is_hardware_never_a_profile():
    assert hits(prose_and_code(), HARDWARE_PROFILE) == []


@pytest.mark.parametrize("folder", ["scratchpipe", "sim"])
def test_shard_means_a_ranks_part_only(folder):
    assert hits(sorted((ROOT / "scratchkit" / folder).rglob("*.py")), LOWER_SHARD) == []


def test_the_checks_see_the_words(tmp_path):
    own = tmp_path / "own.py"
    own.write_text("from scratchkit.costmodel.hw_profile import HardwareProfile\n# each planner shard\n# SHARDS\n")
    assert len(hits([own], HARDWARE_PROFILE)) == 1 and len(hits([own], LOWER_SHARD)) == 1
