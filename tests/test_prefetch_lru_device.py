"""`prefetch-lru-device`, the production peer: an LRU cache filled one batch ahead whose lookup,
victim choice and fill run on the device (as FBGEMM's TBE cache under TorchRec's prefetch
pipeline). It is scratchpipe-device with look-ahead depth 1 and LRU victims, whatever depth and
victim policy the config gives: the trainer and the projection's counters both plan with those."""

from dataclasses import replace

import pytest

from scratchkit.config import CacheParams, VictimPolicy
from scratchkit.measure.verify import verify
from scratchkit.projection.machines import get_machine
from scratchkit.projection.project import stage_work, works_of
from scratchkit.projection.counters import simulated_counters
from scratchkit.designs import DESIGNS, PEERS
from scratchkit.trainers import make_trainer

PEER = "prefetch-lru-device"


@pytest.fixture
def config(tiny_config):
    """The tiny profile with ScratchPipe's own cache (depth 2, furthest next use): a cache small
    enough to evict, so that the depth and the victim choice change the rows moved."""
    return tiny_config.replace(cache=CacheParams(load_factor=0.5, depth=2, victim_policy="furthest"))


def moved(name, config, steps=12):
    with make_trainer(name, config, device="cpu") as trainer:
        return [(r.fetched_rows, r.written_back_rows) for r in trainer.train(steps)]


def test_it_is_counted_as_the_code_it_runs_on_its_own_work_and_is_the_production_peer(config):
    """It runs scratchpipe-device's code at depth 1 with LRU victims, so the same functions count
    it, on its own StepWork: its Plan without next uses (fewer launches than the furthest-next-use
    planner's) and its own rows moved."""
    design, device = DESIGNS[PEER], DESIGNS["scratchpipe-device"]
    assert (design.count, design.combine) == (device.count, device.combine) and design.plans_ahead
    assert design.trainer_class().name == PEER and design.help
    assert PEERS == ("hybrid", "lru-device", PEER) and all(peer in DESIGNS for peer in PEERS)  # "x peer"
    mine, pipe = (
        w.with_counters(*simulated_counters(config, name, batches=12))
        for w, name in zip(works_of(config, [PEER, "scratchpipe-device"], batches=2), [PEER, "scratchpipe-device"])
    )
    assert (mine.fetched_rows, mine.written_back_rows) != (pipe.fetched_rows, pipe.written_back_rows)
    machine = get_machine("h100-pcie5")
    plan = lambda name, w: stage_work(name, w, machine)["plan"].launch_seconds(machine)
    assert plan(PEER, mine) < plan("scratchpipe-device", pipe)  # no urgencies, no horizon's stamps


def test_it_trains_bit_exactly_as_plain_pytorch(config):
    (result,) = verify(config, [PEER], steps=8, device="cpu", tolerance=0.0)
    assert result.max_abs_diff == 0.0


def test_it_plans_one_batch_ahead_with_lru_victims(config):
    fixed = config.replace(cache=replace(config.cache, depth=1, victim_policy=VictimPolicy.LRU))
    assert DESIGNS[PEER].config_for(config) == fixed and DESIGNS["scratchpipe-device"].config_for(config) == config
    with make_trainer(PEER, config, device="cpu") as trainer:
        assert (trainer.depth, trainer.policy) == (1, VictimPolicy.LRU)
    peer = moved(PEER, config)
    assert peer == moved("scratchpipe-device", fixed)
    assert peer != moved("scratchpipe-device", config)  # the depth and the policy matter here


def test_the_projection_counts_the_plans_it_makes(config):
    fixed = config.replace(cache=replace(config.cache, depth=1, victim_policy="lru"))
    peer = simulated_counters(config, PEER, batches=12)
    assert peer == simulated_counters(fixed, "scratchpipe-device", batches=12)
    assert peer != simulated_counters(config, "scratchpipe-device", batches=12)
    # its Plan looks for no next use (LRU), scratchpipe-device's 4 x (depth + 1) batches ahead
    mine, pipe = works_of(config, [PEER, "scratchpipe-device"], batches=2)
    assert (mine.plan_horizon, pipe.plan_horizon) == (0, 12)


def test_the_command_line_checks_its_capacity_at_depth_1(capsys):
    from scratchkit.commands.cli import main
    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.profiles import get_profile
    from scratchkit.scratchpipe.capacity import minimum_capacities

    source = SyntheticSource(get_profile("tiny").data)
    two, four = (max(minimum_capacities(source, depth, 0, 8)) for depth in (1, 3))
    assert two < four  # a capacity between them fits depth 1, not --depth 3
    args = ["verify", "--profile", "tiny", "--trainers", PEER, "--depth", "3", "--steps", "8"]
    assert main(args + ["--capacity", str(two), "--json"]) == 0
    capsys.readouterr()
    assert main(args + ["--capacity", str(two - 1)]) == 2
    assert "2 batches in flight (look-ahead depth 1)" in capsys.readouterr().err


def test_the_cost_model_prices_the_launches_and_the_wait_its_plan_counts():
    """Its Plan on tests/strict_device.py's device (a GPU's code path), at depth 1 with LRU victims
    in full steps, against designs/scratchpipe_device.py's count: no urgencies, no horizon."""
    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.designs import scratchpipe_device as priced
    from scratchkit.kernels.engine import host_build_works
    from scratchkit.scratchpipe.capacity import minimum_capacities
    from strict_device import StrictDevice
    from test_device_plan import setup_for
    from test_device_plan_waits import DATA, device_planner, kinds

    if not host_build_works():
        pytest.skip("the strict device runs the host build")
    source = SyntheticSource(DATA)
    setup = setup_for(DATA.table_sizes, minimum_capacities(source, 1, 0, 30), 1, VictimPolicy.LRU, True, 8, False)
    planner = device_planner(setup, source, StrictDevice())
    for b in range(10):
        planner.plan(b)
    kernels = priced.PLAN_KERNELS + priced.WORKING_SET_KERNELS + priced.VICTIM_KERNELS
    ops = priced.PLAN_OPS + priced.WORKING_SET_OPS + priced.VICTIM_OPS
    compared = 0
    for b in range(10, 24):
        rebuilds = planner.plans.map.rebuilds
        planned = planner.plan(b)
        assert planned.work.host_syncs == priced.PLAN_SYNCS, b
        if all(p.victims for p in planned.tables) and planner.plans.map.rebuilds == rebuilds:
            assert kinds(planned.work) == (kernels, ops), b
            compared += 1
    assert compared >= 3
