"""A design of one's own with pricing of its own (tests/toy_design.py: one file) is one register call
away from everything that reads the designs: the command line's choices, `bench --project`, the
capacity check and the course's headline tables; and gone once unregistered."""

import json

import pytest

from scratchkit.commands.cli import main
from scratchkit.commands.common import parse_trainer_list
from scratchkit.course.headline import headline_rows, shown_designs
from scratchkit.designs import DESIGNS, StepWork
from scratchkit.profiles import get_profile
from scratchkit.projection.counters import project_config
from scratchkit.projection.machines import get_machine
from scratchkit.projection.project import figures, project, stage_work
from toy_design import LRU_BESIDE

TOY = LRU_BESIDE.name


@pytest.fixture
def toy():
    with DESIGNS.registered(TOY, LRU_BESIDE):  # the one call
        yield LRU_BESIDE


def test_the_command_line_offers_it(toy, capsys):
    assert parse_trainer_list(f"lru,{TOY}") == ["lru", TOY]
    assert main(["bench", "--profile", "tiny", "--trainers", "warp"]) == 2
    assert TOY in capsys.readouterr().err  # the choices listed with the refusal


def test_bench_project_prices_it_as_it_says(toy, capsys):
    code = main(["bench", "--profile", "tiny", "--trainers", f"lru,{TOY}", "--quick", "--json", "--project", "h200"])
    lru, mine = json.loads(capsys.readouterr().out)
    projected = mine["projected"]["h200"]
    assert code == 0 and mine["trainer"] == TOY and projected["trainer"] == TOY
    # its own combine: the write-back beside the other stages, the step the larger of the two
    stages = projected["stage_seconds"]
    rest = sum(s for name, s in stages.items() if name != "write_back")
    assert projected["step_seconds"] == max(stages["write_back"], rest) and projected["pipelined"]
    assert projected["resource_seconds"] == {"write-back stream": stages["write_back"], "step": rest}
    # its own count: the fetch on the device's kernels, not lru's host bookkeeping
    assert stages["fetch"] != lru["projected"]["h200"]["stage_seconds"]["fetch"]


def test_its_count_and_combine_are_what_the_projection_walks(toy, tiny_config):
    work = StepWork.from_config(tiny_config, batches=2).with_counters(40, 20)
    machine = get_machine("h100-pcie5")
    parts = stage_work(TOY, work, machine)
    assert parts["fetch"].device_probes and not stage_work("lru", work, machine)["fetch"].device_probes
    timed = LRU_BESIDE.combine(parts, work, machine, 0.0)
    assert project(TOY, work, machine).step_seconds == timed.step_seconds


def test_the_capacity_check_holds_it_to_its_window(toy, capsys):
    code = main(["bench", "--profile", "tiny", "--trainers", TOY, "--quick", "--capacity", "2"])
    err = capsys.readouterr().err
    assert code == 2 and f"too small for {TOY}" in err and "a batch touches" in err


def test_the_headline_shows_it(toy):
    config = get_profile("tiny")
    names = ["gpu-only", "hybrid", "prefetch-lru-device", "scratchpipe-device", TOY]
    rows = project_config(config, names, ["h100-pcie5"], batches=4)
    record = {
        "figures": {"tiny": {name: {"h100-pcie5": f} for name, f in figures([r["h100-pcie5"] for r in rows]).items()}}
    }
    assert shown_designs(record) == ["hybrid", "prefetch-lru-device", "scratchpipe-device", TOY, "gpu-only"]
    head, table = headline_rows(record)
    assert [row[0] for row in table][3] == TOY and table[3][1].endswith(
        record["figures"]["tiny"][TOY]["h100-pcie5"]["bound_stage"]
    )


def test_unregistered_it_is_gone(capsys):
    with DESIGNS.registered(TOY, LRU_BESIDE):
        pass
    assert TOY not in DESIGNS
    with pytest.raises(ValueError, match=f"unknown trainer '{TOY}'"):
        parse_trainer_list(TOY)
