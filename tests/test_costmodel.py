"""The cost model's arithmetic against hand-worked cases, on a toy profile whose every price is a
round number; the work counted for each trainer's stages; pipelines bound by their slowest
resource; the GPU server' sources. No timing asserts (bounds belong to benchmarks/bench_validate.py)."""

import json
import math
from dataclasses import fields, replace

import numpy as np
import pytest
import torch

from scratchkit.commands.cli import main
from scratchkit.config import CacheParams, DataConfig, ModelConfig, OptimizerKind, TrainConfig
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.designs import kit
from scratchkit.designs import StepWork, Work
from scratchkit.designs.scratchpipe import plan_cores
from scratchkit.designs.step import mlp_flops
from scratchkit.projection.project import Projection, project, project_all, stage_work
from scratchkit.costmodel.servers import SERVERS
from scratchkit.designs.scratchpipe import plan_handoff
from scratchkit.projection.machines import get_machine, parse_machines, machine_names
from scratchkit.costmodel.hardware import CALL_OPS, Hardware, RateCurve, RowCurve
from scratchkit.designs.work import sort_units
from scratchkit.designs.step import TableWork
from scratchkit.designs import DESIGNS

TRAINERS = list(DESIGNS)
US = 1e-6


def toy(**changes) -> Hardware:
    """Round prices: 1 GB/s streams, 1 ns per row anywhere, 1 us per call, sorts of 1e9 key*log2
    per second, 1 TFLOP/s, a planner of 1e8 lookups, 1e7 ids and 1e6 misses per second."""
    flat = RowCurve(((64, 1e6, 1, 1e-9),))
    fields_ = dict(
        name="toy",
        description="round numbers",
        host_cores=4,
        host_stream_bw=1e9,
        host_gather=flat,
        host_scatter=flat,
        host_lookup=flat,
        host_update=flat,
        host_op_latency=US,
        host_numpy_op_latency=US,
        host_calls={c: US for c in CALL_OPS},
        host_sort=RateCurve.constant(1e9),
        host_sort_value_rate=1e9,
        host_numpy_sort=RateCurve.constant(1e9),
        host_plan_lookup_rate=RateCurve.constant(1e8),
        host_plan_id_rate=RateCurve.constant(1e7),
        host_plan_miss_rate=RateCurve.constant(1e6),
        pcie_bw=1e9,
        pcie_latency=US,
        device_stream_bw=1e9,
        device_gather=flat,
        device_scatter=flat,
        device_lookup=flat,
        device_update=flat,
        device_op_latency=US,
        device_calls={c: US for c in CALL_OPS},
        device_sort=RateCurve.constant(1e9),
        device_sort_value_rate=1e9,
        device_flops=RateCurve.constant(1e12),
        device_bmm_flops=RateCurve.constant(1e12),
        device_activation_rate=RateCurve.constant(1e9),
    )
    return Hardware(**(fields_ | changes))


def one_table(lookups=1000.0, unique=500.0, rows=10_000, capacity=2_000, **changes) -> StepWork:
    """Batch 100, one table, dim 16, SGD, MLPs 13 -> 16 and (16 + 1) -> 1."""
    w = StepWork(
        batch_size=100,
        dim=16,
        state_width=0,
        optimizer=OptimizerKind.SGD,
        num_dense=13,
        tables=(TableWork(rows, lookups, unique, capacity),),
        bottom=(13, 16),
        top=(17, 1),
    )
    return replace(w, **changes)


# ---------------------------------------------------------------------------------- arithmetic
def test_each_unit_of_work_is_priced_as_worked_by_hand():
    machine = toy()
    assert Work(host_stream=2e9).seconds(machine) == pytest.approx(2.0)  # 2 GB at 1 GB/s
    assert Work(host_rows=(("gather", 1000, 64, 1e6),)).seconds(machine) == pytest.approx(1e-6)
    assert Work(host_sorts=(("torch", 1024, 3),)).seconds(machine) == pytest.approx(3 * 1024 * 10 / 1e9)
    assert Work(host_sort_values=5e8).seconds(machine) == pytest.approx(0.5)
    assert Work(host_calls=(("lookup", 7),)).seconds(machine) == pytest.approx(7e-6)
    assert Work(pcie=1e9, pcie_copies=2).seconds(machine) == pytest.approx(1.0 + 2e-6)
    assert Work(device_mm=((2e9, 3),)).seconds(machine) == pytest.approx(6e-3)  # 3 x 2 GFLOP
    assert Work(device_activations=1e9).seconds(machine) == pytest.approx(1.0)
    # the planner: 1e6 lookups / 1e8 + 1e5 ids / 1e7 + 1e4 misses / 1e6 = 0.03 s, over 3 cores
    plan = Work(host_plan=((10_000, 1e6, 1e5, 1e4, 2e6, 0.0),))
    assert plan.seconds(machine) == pytest.approx(0.03) and plan.seconds(machine, planners=3) == pytest.approx(0.01)
    # its victim choice scans a full scratchpad of 2e6 slots: + 2e6 / 1e8 = 0.02 s (a profile
    # without the rate leaves it out)
    evicting = Work(host_plan=((10_000, 1e6, 1e5, 1e4, 2e6, 1.0),))
    assert evicting.seconds(toy(host_plan_slot_rate=RateCurve.constant(1e8))) == pytest.approx(0.05)
    assert evicting.seconds(machine) == pytest.approx(0.03)
    # the scratchpad's hash map: 1e6 probes at a measured 1e8 a second = 0.01 s; a profile
    # without the rate reads a bucket (16 B) per probe from the map's 2 buckets a slot: 1 ns each
    probes = Work(device_probes=((1e6, 4096),))
    assert probes.seconds(toy(device_map_probe_rate=RateCurve.constant(1e8))) == pytest.approx(0.01)
    assert probes.seconds(machine) == pytest.approx(1e6 * 1e-9)
    # the same work on the device is priced by the device's numbers; on_host moves it over
    moved = Work(device_stream=1e9, device_calls=(("op", 1),)).on_host()
    assert moved.device_stream == 0 and moved.host_stream == 1e9 and moved.host_calls == (("op", 1),)
    assert moved.seconds(toy(host_stream_bw=2e9)) == pytest.approx(0.5 + 1e-6)


def test_rows_are_priced_at_the_size_of_what_the_step_touches():
    curve = RowCurve(((64, 1e6, 1, 1e-9), (64, 1e8, 1, 1e-8)))  # 10x dearer beyond 100 MB
    assert curve.seconds_per_row(64, 1e6) == pytest.approx(1e-9)
    assert curve.seconds_per_row(64, 1e8) == pytest.approx(1e-8)
    assert curve.seconds_per_row(64, 1e7) == pytest.approx(math.sqrt(1e-9 * 1e-8))  # log-log midpoint
    assert curve.seconds_per_row(64, 1e12) == pytest.approx(1e-8)  # ends held
    assert curve.seconds_per_row(128, 1e6) == pytest.approx(2e-9)  # wider: by bytes
    far = Work(host_rows=(("gather", 1000, 64, 1e8),))
    assert far.seconds(toy(host_gather=curve)) == pytest.approx(1e-5)
    assert far.in_step(touched_rows=1e6 / 64).seconds(toy(host_gather=curve)) == pytest.approx(1e-6)


def test_a_lookup_stage_counts_its_calls_rows_and_bytes_as_worked_by_hand():
    w = one_table()
    forward = stage_work("gpu-only", w)["embedding_forward"]
    # one lookup call + the stage's own; 1000 rows of 64 B; ids (8 B each) read, 100 bags of
    # 64 B written, offsets (8 B each), the stack (2 x 100 x 64 B)
    expected = 2e-6 + 1000 * 1e-9 + (1000 * 8 + 100 * (64 + 8) + 2 * 100 * 64) / 1e9
    assert forward.seconds(toy()) == pytest.approx(expected)
    update = stage_work("gpu-only", w)["embedding_backward"]
    assert update.seconds(toy()) == pytest.approx(2e-6 + sort_units(1000) / 1e9 + 1000 * 16 / 1e9)


def test_the_dense_step_counts_matmuls_by_shape():
    w = one_table()
    mm, bmm = kit.dense_matmuls(w)
    # bottom 13 -> 16 (no input gradient: 2 calls), top 17 -> 1 (3 calls); B = 100
    assert mm == ((2.0 * 100 * 13 * 16, 2), (2.0 * 100 * 17 * 1, 3))
    assert bmm == ((2.0 * 2 * 2 * 16, 300),)
    config = TrainConfig(
        data=DataConfig(table_sizes=(50,), pooling=2, batch_size=100, num_dense=13),
        model=ModelConfig(dim=16, bottom_mlp=(16,), top_mlp=(1,)),
    )
    total, _ = mlp_flops(config, 13, 1)
    assert sum(f * n for f, n in mm) + sum(f * n for f, n in bmm) == total


def test_mlp_flops_match_torchs_flop_counter(tiny_config):
    from torch.utils.flop_counter import FlopCounterMode

    from scratchkit.model import init_dense_model

    model = init_dense_model(tiny_config.model, 4, 3, 0)
    dense = torch.randn(32, 4)
    pooled = torch.randn(32, 3, 8, requires_grad=True)  # as dense_step: pooled needs a gradient
    with FlopCounterMode(display=False) as counter:
        model(dense, pooled).sum().backward()
    flops, layers = mlp_flops(tiny_config, 4, 3)
    assert flops == counter.get_total_flops() and layers == 4


# ---------------------------------------------------------------------------------- the step
def test_step_work_counts_lookups_and_working_sets_of_the_batches(tiny_config):
    source = SyntheticSource(tiny_config.data)
    work = StepWork.from_config(tiny_config, source, batches=3, start=2)
    assert work.lookups == 32 * 2 * 3  # batch x pooling x tables
    expected = sum(len(set(ids.tolist())) for b in range(2, 5) for ids in source.batch(b).ids) / 3
    assert work.unique_rows == pytest.approx(expected)
    assert [t.capacity for t in work.tables] == [200, 200, 200]
    with pytest.raises(ValueError, match="hit_rate must be in"):
        work.with_hit_rate(1.5)
    assert work.with_hit_rate(1.0).fetched_rows == 0
    assert work.with_hit_rate(0.0).fetched_rows == work.unique_rows
    with pytest.raises(ValueError, match="batches must be positive"):
        StepWork.from_config(tiny_config, source, batches=0)


def test_rows_moved_are_split_over_the_tables_by_their_working_sets():
    w = replace(one_table(), tables=(TableWork(1000, 100, 30, 1000), TableWork(1000, 100, 10, 500)))
    assert w.share(40) == [30, 10]
    assert w.share(40, evicting_only=True) == [0, 40]  # a cache that holds its whole table never evicts


@pytest.mark.parametrize("trainer", TRAINERS)
def test_every_trainer_has_stages_and_more_rows_cost_more(trainer, tiny_config):
    work = StepWork.from_config(tiny_config, batches=2)
    few, many = work.with_counters(10, 10), work.with_counters(1000, 1000)
    for name in list(SERVERS):
        machine = get_machine(name)
        low, high = project(trainer, few, machine), project(trainer, many, machine)
        assert all(s >= 0 for s in high.stage_seconds.values()) and high.step_seconds > 0
        if DESIGNS[trainer].caches:
            assert sum(high.stage_seconds.values()) > sum(low.stage_seconds.values())
    with pytest.raises(ValueError, match="unknown trainer 'warp'; choose from gpu-only, hybrid"):
        stage_work("warp", work)


def test_hybrid_does_the_embedding_work_on_the_host():
    stages = stage_work("hybrid", one_table())
    assert stages["embedding_forward"].device_rows == () and stages["embedding_forward"].host_rows
    assert stages["transfer"].pcie == 2 * 100 * 1 * 64  # pooled vectors up, gradients down


@pytest.mark.parametrize("name", list(SERVERS))
def test_the_pipeline_is_bound_by_its_slowest_resource(name):
    machine = get_machine(name)
    w = one_table(lookups=80_000, unique=50_000, rows=1_000_000, capacity=250_000).with_counters(5000, 5000)
    p = project("scratchpipe", w, machine)
    assert set(p.stage_seconds) == {"plan", "collect", "write_back", "transfer", "insert", "train"}
    assert p.pipelined and p.step_seconds == max(p.resource_seconds.values())
    assert p.samples_per_s == pytest.approx(w.batch_size / p.step_seconds)
    assert p.resource_seconds["write-back thread"] == pytest.approx(
        p.stage_seconds["write_back"] + p.stage_seconds["transfer"] + p.stage_seconds["insert"]
    )
    assert p.resource_seconds["plan"] == p.stage_seconds["plan"]
    serial = project("lru", w, machine)
    assert not serial.pipelined and serial.step_seconds == pytest.approx(sum(serial.stage_seconds.values()))
    assert serial.bound_stage == max(serial.stage_seconds, key=serial.stage_seconds.get)


def test_the_planners_per_table_cost_is_priced_at_the_tables_lookups():
    """ScratchPipe's Plan pays `plan_table_few` (timed at 64 lookups a table) for a table of 64 or
    fewer, `plan_table` (2,048) at 2,048 or more, and between them a share of each, by log lookups:
    at 362 (the geometric middle) half of each. Only the fixed part: the rates price the rest."""
    machine = toy(
        host_calls={c: US for c in CALL_OPS} | {"plan_table": 30 * US, "plan_table_few": 10 * US, "plan_batch": 0.0},
        host_plan_lookup_rate=RateCurve.constant(1e30),
        host_plan_id_rate=RateCurve.constant(1e30),
        host_plan_miss_rate=RateCurve.constant(1e30),
    )
    plan = lambda n, tables=1: stage_work(
        "scratchpipe",
        replace(one_table(lookups=n, unique=n / 2), tables=one_table(lookups=n, unique=n / 2).tables * tables),
        machine,
    )["plan"].host_seconds(machine)
    assert plan(64) == pytest.approx(10 * US) and plan(16) == pytest.approx(10 * US)
    assert plan(2048) == pytest.approx(30 * US) and plan(81920, tables=8) == pytest.approx(8 * 30 * US)
    assert plan(2048**0.5 * 8) == pytest.approx(20 * US)


def test_the_victim_choice_is_priced_at_the_evicting_tables_lookups():
    """A table that evicts pays `plan_victims_few` (timed at 64 lookups a table into 256 slots)
    at 64 lookups and `plan_victims` (2,048 into 8k) at 2,048, interpolated as the per-table cost
    is. Priced at 2,048 for every table, the victim choice was 4/5 of tiny's predicted Plan (64
    lookups a table, 200 slots), which came out +94% in validation run m."""
    machine = toy(
        host_calls={c: 0.0 for c in CALL_OPS} | {"plan_victims": 100 * US, "plan_victims_few": 10 * US},
        host_plan_lookup_rate=RateCurve.constant(1e30),
        host_plan_id_rate=RateCurve.constant(1e30),
        host_plan_miss_rate=RateCurve.constant(1e30),
    )

    def plan(n, evicting=1.0):
        w = one_table(lookups=n, unique=n / 2, rows=10_000, capacity=200).with_counters(n / 4, n / 4, evicting)
        return stage_work("scratchpipe", w, machine)["plan"].host_seconds(machine)

    assert plan(64) == pytest.approx(10 * US) and plan(2048) == pytest.approx(100 * US)
    assert plan(2048**0.5 * 8) == pytest.approx(55 * US)
    assert plan(64, evicting=0.5) == pytest.approx(5 * US)  # a table evicting in half the batches
    assert plan(64, evicting=0.0) == pytest.approx(0.0, abs=1e-12)


def test_the_device_planner_launches_as_many_kernels_for_one_table_as_for_eight():
    """scratchpipe-device plans every table at once: its launches a batch do not grow with the
    tables (the per-id work does), and its Plan's only host work is cutting each table's plan out."""
    one = one_table(lookups=8_000, unique=5_000, rows=100_000, capacity=20_000).with_counters(500, 400, 1)
    eight = replace(one, tables=one.tables * 8).with_counters(4000, 3200, 8)
    machine = get_machine("h100-pcie5")
    plans = [stage_work("scratchpipe-device", w, machine)["plan"] for w in (one, eight)]
    assert plans[0].launch_seconds(machine) == pytest.approx(plans[1].launch_seconds(machine))
    assert plans[0].launch_seconds(machine) > 0
    assert plans[1].device_seconds(machine) > plans[0].device_seconds(machine)
    cut = machine.call(False, "device_plan_table")
    assert [p.host_seconds(machine) for p in plans] == pytest.approx([cut, 8 * cut]) and cut > 0
    host = stage_work("scratchpipe", eight, machine)["plan"]
    assert host.host_seconds(machine) > 0 and host.device_seconds(machine) == 0


def test_the_device_pipeline_is_bound_by_train_kernels_link_or_interpreter():
    """On a GPU: the trainer's thread (Train), the device's cores (every stage's kernels, not their
    launches), the link (rows read by Collect, rows written back), the interpreter (every launch,
    and Plan's Python cutting each table's plan out)."""
    machine = get_machine("h100-pcie5")
    w = one_table(lookups=80_000, unique=50_000, rows=1_000_000, capacity=250_000).with_counters(5000, 5000)
    p = project("scratchpipe-device", w, machine)
    parts = stage_work("scratchpipe-device", w, machine)
    assert p.pipelined and p.step_seconds == max(p.resource_seconds.values())
    assert p.stage_seconds["transfer"] == 0.0  # Collect's kernels read over the link
    assert p.resource_seconds["train"] == pytest.approx(p.stage_seconds["train"])
    assert p.resource_seconds["device"] == pytest.approx(
        sum(part.device_seconds(machine) - part.launch_seconds(machine) for part in parts.values())
    )
    assert p.resource_seconds["interpreter"] == pytest.approx(
        sum(part.launch_seconds(machine) + part.host_seconds(machine) for part in parts.values())
    )
    assert parts["plan"].host_seconds(machine) == pytest.approx(machine.call(False, "device_plan_table"))
    assert p.resource_seconds["pcie"] == pytest.approx(
        max(parts["collect"].pcie_seconds(machine), parts["write_back"].pcie_seconds(machine))
    )
    assert sum(n * size for n, size, _, _ in parts["collect"].pcie_rows) == 5000 * 16 * 4  # every miss once


def test_plan_spreads_over_the_cores_the_other_host_stages_leave():
    w = replace(one_table(), tables=(TableWork(10_000, 1000, 500, 2000),) * 8)
    assert plan_cores(w, toy(host_cores=16)) == 8  # one planner per table
    assert plan_cores(w, toy(host_cores=6)) == 3  # less Train, Collect, write-back
    assert plan_cores(replace(w, planners=32), toy(host_cores=16)) == 13
    assert plan_cores(w, toy(host_cores=2, device_is_host=True)) == 1  # a CPU run: Train has the other
    serial = project("scratchpipe", replace(w, planners=1), toy(host_cores=16)).stage_seconds["plan"]
    spread = project("scratchpipe", w, toy(host_cores=16)).stage_seconds["plan"]
    fixed = 9 * US  # the planner's calls: per table, per batch
    assert (serial - fixed) == pytest.approx(8 * (spread - fixed))


def test_on_a_cpu_the_host_process_and_train_share_the_cores():
    w = one_table().with_counters(100, 50)
    machine = toy(host_cores=2, device_is_host=True, pcie_bw=float("inf"), pcie_latency=0.0)
    p = project("scratchpipe", w, machine, extra={"data": 0.5})
    send, receive = (part.seconds(machine) for part in plan_handoff(w))  # each plan's hand-off, both sides
    assert send > 0 and receive > 0
    host = sum(p.stage_seconds[s] for s in ("plan", "collect", "write_back", "transfer", "insert")) + 0.5 + send
    train = p.stage_seconds["train"] + receive
    assert p.resource_seconds["host process"] == pytest.approx(host)
    assert p.resource_seconds["train"] == pytest.approx(train)
    assert p.step_seconds == pytest.approx(max(host, train, (host + train) / 2))


def test_on_a_cpu_where_the_two_sides_take_turns_scratchpipe_is_no_faster_than_their_work_added():
    """The validation on this 2-core VM (results/validate.json, before): ScratchPipe predicted 1.16x
    and 1.2x gpu-only on criteo-like and embedding-bound, measured 0.71x and 0.84x; its Train took
    1.5-1.8x the same Train inline, at the same CPU time: the two processes had taken turns on the
    cores, not slowed each other. Where the run gets P cores at once (co_run_cores), both sides
    progress at P/2 while both have work: the busier side's step is b + a x (2/P - 1), the other's
    a x 2/P; at P = 1 the two added up, and no faster than gpu-only, whose step is the same work
    less the host stages."""
    w = one_table().with_counters(100, 50)
    cpu = dict(device_is_host=True, pcie_bw=float("inf"), pcie_latency=0.0, host_cores=2)
    at = lambda cores, trainer="scratchpipe": project(trainer, w, toy(co_run_cores=cores, **cpu), extra={"data": 5e-5})
    send, receive = (part.seconds(toy(**cpu)) for part in plan_handoff(w))
    host_stages = ("plan", "collect", "write_back", "transfer", "insert")
    alone = at(2.0).stage_seconds
    host = sum(alone[s] for s in host_stages) + 5e-5 + send
    train = alone["train"] + receive
    a, b = sorted((host, train))
    assert at(2.0).step_seconds == pytest.approx(b)  # a core each
    assert at(1.0).step_seconds == pytest.approx(a + b)  # turns: the two added up
    assert at(1.5).step_seconds == pytest.approx(b + a / 3)  # 2/P - 1 = 1/3
    assert at(1.0).samples_per_s < at(1.0, "gpu-only").samples_per_s
    busier, other = ("host process", "train") if host > train else ("train", "host process")
    assert at(1.0).resource_seconds[busier] == pytest.approx(a + b)
    assert at(1.0).resource_seconds[other] == pytest.approx(2 * a)  # a x 2/P
    turns = at(1.0).stage_seconds  # each side's stages stretched alike
    factor = turns["plan"] / alone["plan"]
    assert factor > 1 and turns["train"] > alone["train"]
    assert {s: turns[s] for s in host_stages} == pytest.approx({s: factor * alone[s] for s in host_stages})
    for name in ("gpu-only", "lru", "scratchpipe-device"):  # no process beside their Train
        assert at(1.0, name).stage_seconds == at(2.0, name).stage_seconds
    one_core = dict(cpu, host_cores=1)  # turns: the shared cores' sum
    assert (
        project("scratchpipe", w, toy(co_run_cores=1.0, **one_core)).stage_seconds
        == project("scratchpipe", w, toy(**one_core)).stage_seconds
    )
    gpu = toy(host_cores=16, co_run_cores=1.0)  # a GPU server's threads: alone
    assert project("scratchpipe", w, gpu).stage_seconds == project("scratchpipe", w, toy(host_cores=16)).stage_seconds
    with pytest.raises(ValueError, match="co_run_cores must be 1 to host_cores"):
        toy(host_cores=2, co_run_cores=3.0)


def test_the_plan_handoff_counts_the_bytes_the_ring_carries():
    """plan_handoff's copies are the arrays a real Plan(b), stripped as the host process strips it,
    puts in the ring (scratchpipe/ring.py): counted from the batch, not from the plan."""
    import multiprocessing

    from scratchkit.scratchpipe.plan_ahead import PlanAhead
    from scratchkit.scratchpipe.host_process import what_train_reads
    from scratchkit.scratchpipe.ring import PlanRing

    config = TrainConfig(
        data=DataConfig(table_sizes=(5000, 3000, 80), pooling=6, batch_size=64, num_dense=5, zipf=1.0),
        cache=CacheParams(capacity=1200),
    )
    source = SyntheticSource(config.data)
    planner = PlanAhead.fresh(config, source)
    ring = PlanRing(multiprocessing.get_context("fork"), 4 * planner.plan_bytes(0), slots=1)
    for b in range(4):
        message = ring.pack(what_train_reads(False)(planner.plan(b)))
        assert message[0] == "ring"
        ring.unpack(message)
        send, receive = plan_handoff(StepWork.from_config(config, source, batches=1, start=b))
        assert send.host_stream == receive.host_stream == pytest.approx(2 * sum(message[2]), rel=0.01)
    ring.close()


def test_bench_project_adds_projections_to_json_and_table(capsys):
    code = main(
        [
            "bench",
            "--profile",
            "tiny",
            "--trainers",
            "gpu-only,lru",
            "--capacity",
            "64",
            "--quick",
            "--json",
            "--project",
            "all",
        ]
    )
    results = json.loads(capsys.readouterr().out)
    assert code == 0
    for r in results:
        assert set(r["projected"]) == set(machine_names())
        for p in r["projected"].values():
            assert p["samples_per_s"] > 0 and p["bound_stage"] in p["stage_seconds"]
    assert results[0]["projected"]["v100-pcie3"]["ratio"] == 1.0
    assert results[1]["fetched_rows_per_step"] > 0
    code = main(["bench", "--profile", "tiny", "--trainers", "hybrid", "--quick", "--project", "h100-pcie5"])
    out = capsys.readouterr().out
    head, _, hybrid = out.splitlines()[1:4]  # a row per trainer: its projection's columns beside its figures
    assert code == 0 and "h100-pcie5 (ratio)" in head and "h100-pcie5 bound by" in head
    bounds = ("embedding_forward", "transfer", "mlp", "embedding_backward", "update", "host memory")
    assert hybrid.startswith("hybrid ") and any(f" {stage} " in hybrid for stage in bounds)
    assert "h100-pcie5 x hybrid" in head and head.endswith("x hybrid")  # over the peer, projected and measured


def test_a_prefetching_cache_overlaps_its_fetch_with_training_on_a_gpu():
    """prefetch-lru's prefetch runs beside the step's stages and joins before its update
    (trainers/prefetch.py): on a GPU the step is the larger of the two, plus the update; where
    the device is the host's CPU they take turns: the sum, as lru's."""
    w = one_table().with_counters(400, 300)
    for machine in (toy(), toy(device_is_host=True)):
        lru, ahead = project("lru", w, machine), project("prefetch-lru", w, machine)
        assert sum(ahead.stage_seconds.values()) == pytest.approx(sum(lru.stage_seconds.values()))
        if machine.device_is_host:
            assert ahead.step_seconds == pytest.approx(lru.step_seconds)
            continue
        stages = ahead.stage_seconds
        prefetch = stages["prefetch"] + stages["prefetch_write_back"]
        train = sum(stages.values()) - prefetch
        assert ahead.resource_seconds == pytest.approx({"train": train, "prefetch": prefetch})
        update = stages["update"]
        assert ahead.step_seconds == pytest.approx(max(train - update, prefetch) + update)
        assert ahead.step_seconds < lru.step_seconds
    # a prefetch longer than Train: the step waits for it, then updates
    slow = toy(pcie_bw=1e6)
    ahead = project("prefetch-lru", w, slow)
    prefetch = ahead.stage_seconds["prefetch"] + ahead.stage_seconds["prefetch_write_back"]
    assert prefetch > ahead.resource_seconds["train"]
    assert ahead.step_seconds == pytest.approx(prefetch + ahead.stage_seconds["update"])
    assert ahead.bound_stage == "prefetch"


@pytest.mark.parametrize("trainer", ["static", "lru", "lfu", "prefetch-lru"])
@pytest.mark.parametrize("cpu", [False, True])
def test_a_cache_moves_rows_with_the_device_kernels_over_the_link(trainer, cpu):
    """A miss is read and a dirty victim written by the device's row kernels from/to the host
    table mapped into the device (embedding/device_cache.py): device gathers and scatters, the
    rows over the link, no host core touching a row (its host work is the map's, on ids)."""
    w = replace(one_table(), state_width=1).with_counters(400, 300)  # SGD's rows, with a state column
    machine = toy(device_is_host=cpu)
    names = ("prefetch", "prefetch_write_back") if trainer == "prefetch-lru" else ("fetch", "write_back")
    parts = stage_work(trainer, w, machine)
    fetch, back = parts[names[0]], parts[names[1]]
    row, state = 16 * 4, 1 * 4
    for work, moved in ((fetch, 400), (back, 300)):
        assert not [r for r in work.host_rows if r[2] in (row, state)]  # no host row moves
        for width in (row, state):
            assert ("gather", moved, width) in [r[:3] for r in work.device_rows]
            assert ("scatter", moved, width) in [r[:3] for r in work.device_rows]
        ids = 0 if cpu else 2 * moved * 8  # ids and slots, on a GPU
        # the rows: plain bytes on a CPU; on a GPU read or written row by row over the link by the
        # kernel (a fill in id order, a write-back in the cache's order: kit.rows_over_link)
        rows_over_link = sum(n * size for n, size, _, _ in work.pcie_rows)
        assert work.pcie + rows_over_link == pytest.approx(moved * (row + state) + ids)
        assert rows_over_link == (0 if cpu else pytest.approx(moved * (row + state)))
    table, cache = 10_000 * row, (2_000 + (400 if trainer == "static" else 0)) * row
    gathers = {r[3] for r in fetch.device_rows if r[0] == "gather" and r[2] == row}
    assert gathers == {table}  # read from the host table
    assert {r[3] for r in back.device_rows if r[0] == "scatter" and r[2] == row} == {table}
    assert {r[3] for r in fetch.device_rows if r[0] == "scatter" and r[2] == row} == {cache}


def test_ratios_are_relative_to_the_first_trainer(tiny_config):
    work = StepWork.from_config(tiny_config, batches=1)
    rows = project_all(["gpu-only", "hybrid"], [work, work], ["v100-pcie3", "h200"])
    assert rows[0]["h200"].ratio == 1.0
    assert rows[1]["h200"].ratio == pytest.approx(rows[1]["h200"].samples_per_s / rows[0]["h200"].samples_per_s)


def test_validation_compares_stage_by_stage_and_leaves_unmodelled_stages_unpredicted():
    from scratchkit.measure.validate import compare

    p = Projection("lru", "toy", {"fetch": 0.003}, 0.011, 1.0, "fetch", False)  # the step: data added in
    rows = {r.stage: r for r in compare("tiny", "lru", {"fetch": 0.002, "data": 0.001}, 0.01, p)}
    assert rows["fetch"].error == pytest.approx(0.5) and rows["data"].predicted_s is None
    assert rows["step"].error == pytest.approx(0.1)


# ---------------------------------------------------------------------------------- profiles
@pytest.mark.parametrize("name", list(SERVERS))
def test_every_gpu_profile_constant_has_a_source(name):
    machine = get_machine(name)
    for f in fields(Hardware):
        # a None is no constant: the table-batched host rates, which only `calibrate` measures
        # (native_builds is no constant either: which C++ loops a calibration measured)
        if (
            f.name not in ("name", "description", "sources", "origin", "device_is_host", "native_builds")
            and getattr(machine, f.name) is not None
        ):
            assert machine.sources.get(f.name), f"{name}: {f.name} has no source"
    assert "PCIe" in machine.description and machine.host_cores >= 8 and not machine.device_is_host
    # the device is faster than one host core at gathering rows, and the link slower than both
    assert machine.device_gather.bandwidth(64, 2**30) > machine.host_gather.bandwidth(64, 2**30) > 0
    assert machine.pcie_bw < machine.device_stream_bw


def test_the_gpu_profiles_are_ordered_by_generation():
    v100, a100, h100, h200 = (get_machine(n) for n in ("v100-pcie3", "a100-pcie4", "h100-pcie5", "h200"))
    for key in ("device_stream_bw", "pcie_bw"):
        assert getattr(v100, key) < getattr(a100, key) <= getattr(h100, key) <= getattr(h200, key)
    assert v100.device_flops.at(1e9) < a100.device_flops.at(1e9) < h100.device_flops.at(1e9)


def test_bad_profiles_and_names_are_refused():
    with pytest.raises(ValueError, match="pcie_bw must be > 0"):
        replace(toy(), pcie_bw=0.0)
    with pytest.raises(ValueError, match="host_cores must be >= 1"):
        replace(toy(), host_cores=0)
    with pytest.raises(ValueError, match="host_calls needs a fixed cost"):
        replace(toy(), host_calls={"lookup": US})
    with pytest.raises(ValueError, match="a row curve needs points"):
        RowCurve(((64, 1e6, 1e-9),))
    with pytest.raises(ValueError, match="unknown machine 'tpu'"):
        get_machine("tpu")
    with pytest.raises(ValueError, match="unknown machine 'x'"):
        parse_machines("v100-pcie3,x")
    assert parse_machines("all") == list(machine_names())


def batched(**changes) -> Hardware:
    """toy() with the table-batched C++ calls measured: 1 ns per lookup, 2 ns per lookup's
    backward, 3 ns per row updated, 10 us per call and 1 us per table of it; the device is the host's CPU."""
    curve = lambda s: RowCurve(((64, 1e6, 1, s),))
    calls = {c: US for c in CALL_OPS} | {f"tbe_{k}": 10 * US for k in ("forward", "backward", "sgd")}
    calls |= {f"tbe_{k}_table": US for k in ("forward", "backward", "sgd")}
    return toy(
        **dict(
            host_calls=calls,
            device_calls=calls,
            device_is_host=True,
            host_tbe_lookup=curve(1e-9),
            host_tbe_backward=curve(2e-9),
            host_tbe_update=curve(3e-9),
        )
        | changes
    )


def tables(count: int) -> StepWork:
    return replace(one_table(), tables=one_table().tables * count)


@pytest.mark.parametrize("trainer", ["gpu-only", "hybrid", "lru"])
def test_on_a_cpu_with_the_cpp_loops_each_embedding_stage_is_one_call_per_step(trainer):
    """The trainers call table_batched.py once per stage for all tables: the count must not grow
    with the tables (optim.py's per-table ops did), and the stage is priced by the batched rates."""
    machine = batched()
    for count in (1, 8):
        stages = stage_work(trainer, tables(count), machine)
        side = (lambda s: s.host_calls) if trainer == "hybrid" else (lambda s: s.device_calls)
        assert side(stages["embedding_forward"]) == (("tbe_forward", 1), ("tbe_forward_table", count))
        assert side(stages["embedding_backward"]) == (("tbe_backward", 1), ("tbe_backward_table", count))
        assert ("tbe_sgd", 1) in side(stages["update"])
        # by hand: 10 us + 1 us a table + each table's 500 distinct rows and 500 repeats at 1 ns,
        # less the 25 pooled rows (of 64 B at 1 GB/s) its 100 bags write fewer than 1000 lookups
        # in the curve's bags of 8 would; its 1000 lookups' backward at 2 ns
        assert stages["embedding_forward"].seconds(machine) == pytest.approx(
            (10 + count) * US + count * (1000 * 1e-9 - 25 * 64 / 1e9)
        )
        assert stages["embedding_backward"].seconds(machine) == pytest.approx((10 + count) * US + count * 1000 * 2e-9)
    # Adagrad keeps torch's per-table update after the batched backward
    adagrad = stage_work(trainer, replace(tables(8), optimizer=OptimizerKind.ADAGRAD), machine)
    side = (lambda s: s.host_calls) if trainer == "hybrid" else (lambda s: s.device_calls)
    assert ("update_adagrad", 1) in side(adagrad["update"]) and len(side(adagrad["update"])) >= 8
    assert side(adagrad["embedding_backward"]) == (("tbe_backward", 1), ("tbe_backward_table", 8))


def test_a_gpu_runs_tbe_kernels_and_an_uncalibrated_host_keeps_the_per_table_ops():
    """On a GPU Train is tbe.cu's: one launch for every table's lookups, one sort, one launch for
    the backward and update, the ids in one copy, however many tables; hybrid's host stages are
    batched only where the profile measured the C++ calls."""
    for count in (1, 8):
        on_gpu = stage_work("gpu-only", tables(count), batched(device_is_host=False))
        assert on_gpu["embedding_forward"].device_calls == (("kernel", 1),)
        assert on_gpu["embedding_backward"].device_calls == (("op", 1),)
        assert on_gpu["update"].device_calls == (("kernel", 1),)
        assert on_gpu["transfer"].pcie_copies == 1
    hybrid = stage_work("hybrid", tables(8), batched(device_is_host=False))["embedding_forward"].host_calls
    assert hybrid == (("tbe_forward", 1), ("tbe_forward_table", 8))
    plain = stage_work("hybrid", tables(8), toy())["embedding_forward"].host_calls
    assert plain.count(("lookup", 1)) == 8
    with pytest.raises(ValueError, match="host_tbe"):
        Work(host_tbe=(("backward", 10, 5, 64, 10, 640, 10),)).seconds(toy())


def test_the_backward_is_priced_by_how_often_its_ids_repeat():
    """Repeated ids sort faster and add into rows already written: the backward curve's middle axis
    is lookups per distinct id, log-interpolated between the measured ones and held past them."""
    curve = RowCurve(((64, 1.0, 1, 4e-9), (64, 8.0, 1, 1e-9)))  # distinct ids / each 8 times
    machine = batched(host_tbe_backward=curve)
    price = lambda n, u: Work(device_tbe=(("backward", n, u, 64, n / 8, n * 64, n),)).seconds(machine)  # as timed
    assert price(1000, 1000) == pytest.approx(1000 * 4e-9)
    assert price(1000, 125) == pytest.approx(1000 * 1e-9)
    assert price(1000, 1000 / math.sqrt(8)) == pytest.approx(1000 * 2e-9)  # log midpoint
    assert price(1000, 10) == pytest.approx(1000 * 1e-9)


def test_a_table_batched_calls_bags_are_priced_beyond_the_curves_bags_of_8():
    """The curves are timed in bags of 8, 8 tables a call. A table of 8,000 lookups in bags of 1
    writes 7,000 pooled rows more (at the stream bandwidth, 1 GB/s here), and its backward reads
    each lookup's gradient row from 8 tables' 8,000 bags, not 1,000 (a random row of 4 MB, not
    of 512 kB: 4 against 1 ns, as the lookup curve prices a random row there); bags of 8 cost
    the curves' price alone, and 100 bags (80 lookups each) too (a gradient smaller than the curve's is not
    priced cheaper)."""
    machine = batched(
        host_tbe_lookup=RowCurve(((64, 512_000, 1, 1e-9), (64, 4_096_000, 1, 4e-9))),
        host_tbe_backward=RowCurve(((64, 1.0, 8000, 2e-9),)),
    )  # timed at 8,000 lookups a table
    forward = lambda bags: Work(device_tbe=(("lookup", 8000, 8000, 64, 512_000, 8000, (), bags),)).seconds(machine)
    backward = lambda bags: Work(device_tbe=(("backward", 8000, 8000, 64, bags, bags * 8 * 64, 64000),)).seconds(
        machine
    )
    assert forward(1000) == pytest.approx(8000 * 1e-9)
    assert forward(8000) == pytest.approx(8000 * 1e-9 + 7000 * 64 / 1e9)
    assert backward(1000) == pytest.approx(8000 * 2e-9)
    assert backward(8000) == pytest.approx(8000 * 2e-9 + 8000 * (4e-9 - 1e-9))
    assert backward(100) == pytest.approx(backward(1000))  # a smaller gradient: not cheaper


def test_a_cache_still_filling_is_not_priced_a_victim_choice():
    """The victims' sort runs only in the steps a table's full cache evicts: the measured count of
    evicting tables (StepRecord.evicting_tables) scales it; unknown, every step."""
    w = replace(one_table(capacity=2_000), fetched_rows=100.0, written_back_rows=100.0)
    machine = toy()
    always, never = (stage_work("lru", w.with_counters(100, 100, e), machine)["fetch"] for e in (None, 0))
    half = stage_work("lru", w.with_counters(100, 100, 0.5), machine)["fetch"]
    assert always.host_sorts and never.host_sorts[-1][2] == 0
    assert never.seconds(machine) < half.seconds(machine) < always.seconds(machine)


def test_plan_stripes_are_planners_the_model_spreads_plan_over():
    """`CacheParams.plan_stripes` splits each table's plan over that many planners, each on a core
    of its own where the server has them: the model's Plan spreads over them too."""
    from scratchkit.config import CacheParams, DataConfig, TrainConfig

    config = TrainConfig(
        data=DataConfig(table_sizes=(1000,) * 4, batch_size=16, pooling=2), cache=CacheParams(capacity=500)
    )
    one, four = (StepWork.from_config(replace(config, cache=replace(config.cache, plan_stripes=s))) for s in (1, 4))
    assert one.plan_parallelism == 4 and four.plan_parallelism == 16
    machine = toy(host_cores=32)
    assert plan_cores(four, machine) == 16 and plan_cores(one, machine) == 4


def test_a_lookups_repeats_are_binned_by_how_far_back_their_row_was_looked_up():
    """reuse_bins: rows 1 2 1 3 2 1. The second 1 comes 1 distinct row after the first (bin 2:
    distances 1); the second 2 and the third 1 come 2 after theirs (bin 4: distances 2-3)."""
    from scratchkit.designs.step import reuse_bins

    assert reuse_bins(np.array([1, 2, 1, 3, 2, 1])) == {2: 1.0, 4: 2.0}
    assert reuse_bins(np.array([5, 5, 5])) == {1: 2.0} and reuse_bins(np.array([], dtype=np.int64)) == {}


def test_an_update_is_priced_by_the_share_of_its_table_it_updates():
    """SGD walks a table's updated rows in ascending order: a table updated at density 1 is nearly
    a stream (1 ns a row on this curve), at 0.1 it is a random row's price (4 ns); 0.5 lies 0.7
    of the log way between. The density is the update's rows over the table's, whatever the call."""
    machine = batched(host_tbe_update=RowCurve(((256, 2**20, 0.1, 4e-9), (256, 2**20, 1.0, 1e-9))))
    update = lambda u, call: Work(device_tbe=(("sgd", u, 256, 2**20, call),)).seconds(machine)
    assert update(4096, 4096) == pytest.approx(4096 * 1e-9)  # all 4,096 rows of 1 MiB
    assert update(410, 4096) == pytest.approx(410 * 4e-9, rel=1e-3)  # a tenth of them
    assert update(2048, 16384) == pytest.approx(2048 * 4e-9 * 0.25 ** (math.log(5) / math.log(10)))


def test_a_repeat_from_far_back_costs_what_a_row_of_that_footprint_does():
    """The same lookups, their repeats near (1 row back) or far (64k rows back, a footprint of
    16 MiB of 256 B rows): far costs more on this-cpu's curve; unknown distances are priced at
    the table's working set."""
    machine = batched(host_tbe_lookup=RowCurve(((256, 2**18, 2**16, 5e-9), (256, 2**28, 2**16, 9e-8))))
    lookup = lambda reuse, u=1000: Work(device_tbe=(("lookup", 2 * u, u, 256, 2**28, 2 * u, reuse, u / 4),)).seconds(
        machine
    )
    near, far = lookup(((1, 1000.0),)), lookup(((65536, 1000.0),))
    assert near == pytest.approx(1000 * 9e-8 + 1000 * 5e-9)
    assert far == pytest.approx(1000 * 9e-8 + 1000 * 5e-9 * 18**0.6)  # 16 MiB: 0.6 of the log way
    assert lookup(()) == pytest.approx(lookup(((1000, 1000.0),)))  # the working set: 1,000 rows
