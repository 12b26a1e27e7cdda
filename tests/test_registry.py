"""The registries: a trainer (a design priced as gpu-only's) and a GPU server of one's own,
registered here and nowhere else, are found by the command line, `bench`, `verify` and the
projection; and gone once unregistered. (A design with pricing of its own: tests/test_designs.py.)"""

import json
from contextlib import ExitStack
from dataclasses import replace

import pytest

from scratchkit.choices import Registry, UnknownName
from scratchkit.config import CacheParams
from scratchkit.commands.cli import main, parse
from scratchkit.commands.common import parse_trainer_list
from scratchkit.costmodel.servers import SERVERS
from scratchkit.measure.bench import run_bench
from scratchkit.designs import StepWork
from scratchkit.projection.project import project, project_all, stage_work
from scratchkit.projection.machines import get_machine, parse_machines, machine_names
from scratchkit.designs import DESIGNS, Place
from scratchkit.designs.scratchpipe import SCRATCHPIPE
from scratchkit.designs.serial import GPU_ONLY
from scratchkit.trainers import make_trainer
from scratchkit.trainers.device_only import DeviceOnlyTrainer

OWN_TRAINER, OWN_SERVER = "gpu-only-again", "h100-fast-link"


class AgainTrainer(DeviceOnlyTrainer):
    """gpu-only under another name: it trains as gpu-only does, and is priced as gpu-only is."""

    name = OWN_TRAINER


def again(trainer, help: str = "x"):
    """gpu-only's design under another name, run by `trainer`."""
    return replace(GPU_ONLY, name=OWN_TRAINER, trainer=trainer, help=help)


def fast_link_server() -> dict:
    """The H100 server with a link twice as fast (and nothing else changed)."""
    figures = dict(SERVERS["h100-pcie5"])
    rate, source = figures["link"]
    return figures | {
        "description": "H100 with a made-up PCIe link twice as fast",
        "link": (2 * rate, f"made up for a test: twice '{source}'"),
    }


@pytest.fixture
def own():
    """The made-up trainer and server, registered for one test and removed after it."""
    with ExitStack() as stack:
        stack.enter_context(
            DESIGNS.registered(OWN_TRAINER, again("tests.test_registry:AgainTrainer", "gpu-only under another name"))
        )
        stack.enter_context(SERVERS.registered(OWN_SERVER, fast_link_server()))
        yield


def test_the_command_line_offers_them(own):
    assert parse_trainer_list(f"gpu-only,{OWN_TRAINER}") == ["gpu-only", OWN_TRAINER]
    assert parse_machines(OWN_SERVER) == [OWN_SERVER] and OWN_SERVER in parse_machines("all")
    args = parse(["bench", "--trainers", OWN_TRAINER, "--project", OWN_SERVER])
    assert (args.trainers, args.project) == (OWN_TRAINER, OWN_SERVER)
    with pytest.raises(ValueError, match=f"choose from .*{OWN_TRAINER}"):
        parse_trainer_list("gpu-only-agian")


def test_the_help_lists_the_server(own, capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    assert OWN_SERVER in capsys.readouterr().out.replace("\n", " ")


def test_bench_runs_it_and_projects_it(own, tiny_config, capsys):
    results = run_bench(tiny_config, ["gpu-only", OWN_TRAINER], steps=3, warmup=1)
    assert [r.trainer for r in results] == ["gpu-only", OWN_TRAINER]
    code = main(
        [
            "bench",
            "--profile",
            "tiny",
            "--trainers",
            f"gpu-only,{OWN_TRAINER}",
            "--quick",
            "--json",
            "--project",
            f"h100-pcie5,{OWN_SERVER}",
        ]
    )
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and [r["trainer"] for r in rows] == ["gpu-only", OWN_TRAINER]
    assert set(rows[1]["projected"]) == {"h100-pcie5", OWN_SERVER}


def test_verify_finds_it_bit_exact(own, capsys):
    code = main(["verify", "--profile", "tiny", "--trainers", OWN_TRAINER, "--steps", "5", "--json"])
    (result,) = json.loads(capsys.readouterr().out)
    assert code == 0 and result["trainer"] == OWN_TRAINER and result["max_abs_diff"] == 0.0


def test_the_projection_prices_it_as_its_entry_says(own, tiny_config):
    work = StepWork.from_config(tiny_config, batches=2)
    rows = project_all(["gpu-only", OWN_TRAINER], [work, work], ["h100-pcie5", OWN_SERVER])
    for p in ("h100-pcie5", OWN_SERVER):
        assert rows[1][p].trainer == OWN_TRAINER and rows[1][p].machine == p
        assert rows[1][p].stage_seconds == rows[0][p].stage_seconds and rows[1][p].ratio == 1.0
    assert stage_work(OWN_TRAINER, work) == stage_work("gpu-only", work)
    # the faster link: only the copies are quicker
    slow, fast = rows[0]["h100-pcie5"].stage_seconds, rows[0][OWN_SERVER].stage_seconds
    assert fast["transfer"] < slow["transfer"] and fast["mlp"] <= slow["mlp"]
    assert get_machine(OWN_SERVER).pcie_bw == 2 * get_machine("h100-pcie5").pcie_bw


def test_a_trainer_priced_as_a_pipeline_is_projected_as_one(tiny_config):
    work = StepWork.from_config(tiny_config, batches=2)
    with DESIGNS.registered("pipe-again", replace(SCRATCHPIPE, name="pipe-again", help="a second name")):
        again, pipe = (project(n, work, get_machine("h200")) for n in ("pipe-again", "scratchpipe"))
        assert again.pipelined and again.resource_seconds == pipe.resource_seconds
        with pytest.raises(ValueError, match="whose name is 'scratchpipe'"):
            make_trainer("pipe-again", tiny_config)  # the class names itself otherwise


def test_unregistered_they_are_gone():
    with DESIGNS.registered(OWN_TRAINER, again(AgainTrainer)):
        assert OWN_TRAINER in parse_trainer_list(OWN_TRAINER)
    assert OWN_TRAINER not in DESIGNS and OWN_SERVER not in SERVERS
    assert OWN_SERVER not in machine_names()
    with pytest.raises(ValueError, match=f"unknown trainer '{OWN_TRAINER}'"):
        parse_trainer_list(OWN_TRAINER)
    with pytest.raises(ValueError, match=f"unknown machine '{OWN_SERVER}'"):
        get_machine(OWN_SERVER)
    with pytest.raises(ValueError, match=f"unknown trainer '{OWN_TRAINER}'"):
        project(OWN_TRAINER, StepWork.from_config(get_profile_tiny()), get_machine("h200"))


def get_profile_tiny():
    from scratchkit.profiles import get_profile

    return get_profile("tiny")


def test_a_registry_refuses_a_taken_name_and_undoes_on_error():
    colours = Registry("colour ", {"red": 1})
    with pytest.raises(ValueError, match="colour 'red' is registered already"):
        colours.register("red", 2)
    with pytest.raises(ValueError, match="non-empty"):
        colours.register(" blue", 2)
    with pytest.raises(RuntimeError), colours.registered("blue", 2):
        assert list(colours) == ["red", "blue"]
        raise RuntimeError
    assert list(colours) == ["red"] and colours.get("blue") is None and "blue" not in colours
    with pytest.raises(UnknownName, match="unknown colour 'blue'; choose from red"):
        colours["blue"]
    with pytest.raises(ValueError, match="module:Class"):
        again("no.colon")
    with pytest.raises(ValueError, match="count must be a function"):
        replace(GPU_ONLY, count="lru")
    with pytest.raises(ValueError, match="fixed_cache names no CacheParams field: size"):
        replace(GPU_ONLY, fixed_cache=(("size", 4),))


def test_a_workload_of_ones_own_is_a_profile(tiny_config, capsys):
    from scratchkit.profiles import PROFILES, Workload, get_profile, scalable_profiles

    with PROFILES.registered("tiny-again", Workload(lambda: tiny_config)):
        assert get_profile("tiny-again") == tiny_config and "tiny-again" not in scalable_profiles()
        code = main(["bench", "--profile", "tiny-again", "--trainers", "gpu-only", "--quick", "--json"])
        assert code == 0 and json.loads(capsys.readouterr().out)[0]["trainer"] == "gpu-only"
        with pytest.raises(ValueError, match="profile 'tiny-again' has no scale"):
            get_profile("tiny-again", scale=0.5)
    with pytest.raises(ValueError, match="unknown profile 'tiny-again'"):
        get_profile("tiny-again")


def test_a_simulator_policy_of_ones_own_is_simulated(tmp_path, capsys):
    import numpy as np

    from scratchkit.sim import POLICIES, SimPolicy, simulate, simulate_lru

    trace = np.random.default_rng(0).zipf(1.3, 2_000).astype(np.int64) % 300
    np.save(tmp_path / "ids.npy", trace)
    with POLICIES.registered("lru-again", SimPolicy(simulate_lru, help="lru under another name")):
        assert simulate(trace, " LRU-again ", 64).hits == simulate(trace, "lru", 64).hits
        code = main(
            ["simulate", "--trace", str(tmp_path / "ids.npy"), "--policy", "lru-again", "--capacity", "64", "--json"]
        )
        assert code == 0 and json.loads(capsys.readouterr().out)["hits"] == simulate(trace, "lru", 64).hits
        with pytest.raises(ValueError, match="policy lru-again does not take ways"):
            simulate(trace, "lru-again", 64, ways=4)
    with pytest.raises(ValueError, match="unknown cache policy 'lru-again'"):
        simulate(trace, "lru-again", 64)


def test_each_of_the_kits_designs_is_registered_once_and_counts_the_stages_it_names(tiny_config):
    work = StepWork.from_config(tiny_config, batches=1).with_counters(8, 4)
    for name, design in DESIGNS.items():
        assert design.name == name and design.trainer_class().name == name and design.help
        for place in (Place(), Place(device_is_host=True)):
            assert tuple(design.count(work, place)) == design.stages, name
        assert design.caches == (name not in ("gpu-only", "hybrid"))
        assert (design.window(tiny_config) is not None) == (name not in ("gpu-only", "hybrid", "static"))


@pytest.mark.parametrize("name", list(DESIGNS))
def test_each_design_names_the_stages_its_trainer_records(name, tiny_config):
    """A design's `stages` name its trainer's StepRecord stages (but `data`, which no model prices;
    a stage that did nothing in a step, a write-back with no victim, is not recorded): what the
    projection prices is what a run measures, past the first step (prefetch-lru fetches batch 0
    on demand, then ahead)."""
    config = tiny_config.replace(cache=CacheParams(capacity=192, depth=2))  # 3 batches in flight fit; caches evict
    with make_trainer(name, config, device="cpu") as trainer:
        recorded = {stage for record in list(trainer.train(6))[1:] for stage in record.stage_seconds}
    assert "train" in recorded or "update" in recorded
    assert recorded - {"data"} <= set(DESIGNS[name].stages)
