"""The cost model: profiles with sources, work counted right, monotone in bytes, pipelines bound by
their slowest resource, and the plumbing of validation on a real (tiny) run. No timing asserts."""
import json
import math
from dataclasses import fields, replace

import pytest
import torch

from scratchkit.commands.cli import main
from scratchkit.config import CacheParams, DataConfig, ModelConfig, TrainConfig
from scratchkit.measure.costmodel import (PIPELINE_HOST_STAGES, StepWork, Work, mlp_flops, project, project_all,
                                  stage_work, validate, validate_on_this_machine)
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.commands.tables import describe_hardware
from scratchkit.measure.hardware import PROFILE_NAMES, HardwareProfile, get_hardware, parse_profiles
from scratchkit.trainers import available_trainers

TRAINERS = ["gpu-only", "hybrid", "static", "lru", "lfu", "prefetch-lru", "scratchpipe"]
NUMBERS = [f.name for f in fields(HardwareProfile) if f.type in ("float", "int")]


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_every_profile_number_is_positive_and_has_a_source(name):
    assert len(NUMBERS) >= 12
    hw = get_hardware(name)
    for field_name in NUMBERS:
        value = getattr(hw, field_name)
        assert value >= 0 and not math.isnan(value), field_name
        assert hw.sources.get(field_name), f"{name}: {field_name} has no source"
    assert field_name in describe_hardware(hw)


def test_this_cpu_is_measured_once_per_process():
    assert get_hardware("this-cpu") is get_hardware("this-cpu")
    hw = get_hardware("this-cpu")
    assert hw.device_is_host and hw.pcie_bw == float("inf")
    assert hw.host_gather_bw > 0 and hw.device_flops > 0 and hw.host_op_latency > 0


def test_bad_profiles_are_refused():
    good = get_hardware("v100-pcie3")
    with pytest.raises(ValueError, match="pcie_bw must be > 0"):
        replace(good, pcie_bw=0.0)
    with pytest.raises(ValueError, match="host_cores must be >= 1"):
        replace(good, host_cores=0)
    with pytest.raises(ValueError, match="unknown hardware profile 'tpu'"):
        get_hardware("tpu")
    with pytest.raises(ValueError, match="unknown hardware profile 'x'"):
        parse_profiles("v100-pcie3,x")
    assert parse_profiles("all") == list(PROFILE_NAMES)


def test_step_work_counts_lookups_and_working_sets_of_the_data(tiny_config):
    source = SyntheticSource(tiny_config.data)
    work = StepWork.from_config(tiny_config, source, batches=3)
    assert work.lookups == 32 * 2 * 3     # batch x pooling x tables
    expected = sum(len(set(ids.tolist())) for b in range(3) for ids in source.batch(b).ids) / 3
    assert work.unique_rows == pytest.approx(expected)
    with pytest.raises(ValueError, match="hit_rate must be in"):
        work.with_hit_rate(1.5)
    assert work.with_hit_rate(1.0).fetched_rows == 0
    assert work.with_hit_rate(0.0).fetched_rows == work.unique_rows


def test_mlp_flops_match_torchs_flop_counter(tiny_config):
    from torch.utils.flop_counter import FlopCounterMode

    from scratchkit.model import init_dense_model

    model = init_dense_model(tiny_config.model, 4, 3, 0)
    dense = torch.randn(32, 4)
    pooled = torch.randn(32, 3, 8, requires_grad=True)   # as dense_step: pooled needs a gradient
    with FlopCounterMode(display=False) as counter:
        model(dense, pooled).sum().backward()
    flops, layers = mlp_flops(tiny_config, 4, 3)
    assert flops == counter.get_total_flops()
    assert layers == 4


def test_more_bytes_predict_more_time(tiny_config):
    work = StepWork.from_config(tiny_config, batches=2)
    for name in PROFILE_NAMES:
        hw = get_hardware(name)
        assert Work(host_gather=2e6).seconds(hw) > Work(host_gather=1e6).seconds(hw)
        assert Work(device_stream=2e6).seconds(hw) > Work(device_stream=1e6).seconds(hw)
        few, many = work.with_counters(10, 10), work.with_counters(1000, 1000)
        assert project("lru", many, hw).stage_seconds["fetch"] > project("lru", few, hw).stage_seconds["fetch"]
        assert project("lru", many, hw).step_seconds > project("lru", few, hw).step_seconds
        wide = replace(work, dim=4 * work.dim)
        assert project("hybrid", wide, hw).step_seconds > project("hybrid", work, hw).step_seconds


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_the_pipeline_is_bound_by_its_slowest_resource(tiny_config, name):
    hw = get_hardware(name)
    work = StepWork.from_config(tiny_config, batches=2).with_counters(40, 30)
    p = project("scratchpipe", work, hw)
    assert set(p.stage_seconds) == {"plan", "collect", "transfer", "insert", "write_back", "train"}
    assert all(s > 0 for k, s in p.stage_seconds.items() if k != "transfer" or not hw.device_is_host)
    assert p.pipelined and p.step_seconds == max(p.resource_seconds.values())
    assert max(p.stage_seconds.values()) <= p.step_seconds <= sum(p.stage_seconds.values())
    assert p.samples_per_s == pytest.approx(work.batch_size / p.step_seconds)
    if not hw.device_is_host:   # host threads, PCIe and the device overlap
        assert p.resource_seconds["device"] == p.stage_seconds["insert"] + p.stage_seconds["train"]
        group = {"host threads": PIPELINE_HOST_STAGES, "pcie": ("transfer",), "device": ("insert", "train")}
        bound = max(p.resource_seconds, key=p.resource_seconds.get)
        assert p.bound_stage == max(group[bound], key=p.stage_seconds.get)
    # a serial trainer's step is the sum of its stages
    serial = project("lru", work, hw)
    assert not serial.pipelined and serial.step_seconds == pytest.approx(sum(serial.stage_seconds.values()))
    assert serial.bound_stage == max(serial.stage_seconds, key=serial.stage_seconds.get)


def test_gpu_profiles_predict_hybrid_slower_than_gpu_only_when_embeddings_dominate():
    heavy = TrainConfig(data=DataConfig(table_sizes=(100_000,) * 8, pooling=32, batch_size=2048,
                                        num_dense=13, zipf=0.5, num_batches=2),
                        model=ModelConfig(dim=64, bottom_mlp=(64,), top_mlp=(64, 1)))
    work = StepWork.from_config(heavy, batches=1)
    for name in ("v100-pcie3", "h100-pcie5"):
        [gpu_only], [hybrid] = project_all(["gpu-only"], [work], [name]), project_all(["hybrid"], [work], [name])
        assert hybrid[name].samples_per_s < gpu_only[name].samples_per_s
        # and a cache that always hits does no better than the device itself
        lru = project("lru", work.with_counters(0, 0), get_hardware(name))
        assert lru.samples_per_s <= gpu_only[name].samples_per_s


def test_stage_work_names_each_trainers_stages(tiny_config):
    work = StepWork.from_config(tiny_config, batches=1)
    for trainer in TRAINERS:
        assert all(isinstance(w, Work) for w in stage_work(trainer, work).values())
    assert "fetch" in stage_work("lru", work) and "write_back" in stage_work("static", work)
    assert stage_work("hybrid", work)["embedding_forward"].device_gather == 0   # the host does it
    with pytest.raises(ValueError, match="no cost model for trainer 'warp'"):
        stage_work("warp", work)


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_a_prefetching_cache_overlaps_its_fetch_with_training_on_a_gpu(tiny_config, name):
    """prefetch-lru moves what lru does in the step to a side stream: on a GPU the step is the
    larger of the two, never more than lru's; on a CPU nothing overlaps and it costs what lru does."""
    hw = get_hardware(name)
    work = StepWork.from_config(tiny_config, batches=2).with_counters(40, 30)
    lru, ahead = project("lru", work, hw), project("prefetch-lru", work, hw)
    assert sum(ahead.stage_seconds.values()) == pytest.approx(sum(lru.stage_seconds.values()))
    if hw.device_is_host:
        assert ahead.step_seconds == pytest.approx(lru.step_seconds)
    else:
        assert ahead.pipelined and ahead.step_seconds == max(ahead.resource_seconds.values())
        assert ahead.step_seconds < lru.step_seconds


def test_validation_plumbing_on_a_real_run(tiny_config):
    config = tiny_config.replace(cache=CacheParams(capacity=500))
    trainers = [t for t in ["gpu-only", "hybrid", "lru", "static", "scratchpipe"] if t in available_trainers()]
    report = validate_on_this_machine(config, trainers, steps=3, warmup=1, device="cpu")
    assert list(report) == trainers
    for trainer, rows in report.items():
        by_stage = {r.stage: r for r in rows}
        assert "step" in by_stage and by_stage["step"].predicted > 0 and by_stage["step"].measured > 0
        modelled = [r for r in rows if r.predicted is not None and r.stage != "step"]
        assert modelled and all(r.predicted >= 0 for r in modelled)
        for r in modelled:
            if r.measured > 0 and r.predicted > 0:
                assert math.isfinite(r.error)
        if "data" in by_stage:
            assert by_stage["data"].predicted is None and by_stage["data"].error is None
    rows = validate({"fetch": 0.002, "data": 0.001}, project("lru", StepWork.from_config(config, batches=1),
                                                             get_hardware("v100-pcie3")), 0.01)
    step = [r for r in rows if r.stage == "step"][0]
    assert step.measured == pytest.approx(0.009)   # the unmodelled data stage is taken out


def test_bench_project_adds_projections_to_json_and_table(capsys):
    code = main(["bench", "--profile", "tiny", "--trainers", "gpu-only,lru", "--capacity", "64",
                 "--quick", "--json", "--project", "all"])
    results = json.loads(capsys.readouterr().out)
    assert code == 0
    for r in results:
        assert set(r["projected"]) == set(PROFILE_NAMES)
        for p in r["projected"].values():
            assert p["samples_per_s"] > 0 and p["bound_stage"] in p["stage_seconds"]
    assert results[0]["projected"]["v100-pcie3"]["ratio"] == 1.0
    assert results[1]["fetched_rows_per_step"] > 0
    code = main(["bench", "--profile", "tiny", "--trainers", "hybrid", "--quick", "--project", "h100-pcie5"])
    out = capsys.readouterr().out
    assert code == 0 and "h100-pcie5 (ratio)" in out and "h100-pcie5 bound by: hybrid" in out


def test_bench_project_refuses_an_unknown_profile(capsys):
    code = main(["bench", "--profile", "tiny", "--project", "tpu-v9"])
    assert code == 2 and "unknown hardware profile 'tpu-v9'" in capsys.readouterr().err
