"""Notebook 05's exercises: one stage of the cost model, and the step of a pipeline.

hybrid_transfer_seconds(config, machine)     hybrid's transfer stage, checked against
                                             scratchkit.projection.project.stage_work
pipeline_step_seconds(stage_seconds, cores)  ScratchPipe's step on a GPU server: its busiest
                                             resource, in the three resources of the paper's
                                             diagram (`pipeline_resources` below)
"""

from __future__ import annotations

from dataclasses import replace

from scratchkit.course.exercises.checking import Case, Exercise, register
from scratchkit.designs import StepWork
from scratchkit.projection.project import project, stage_work
from scratchkit.projection.machines import get_machine
from scratchkit.profiles import get_profile


def model_transfer(config, machine) -> float:
    return stage_work("hybrid", StepWork.from_config(config))["transfer"].seconds(machine)


def _transfer_cases() -> list[Case]:
    small = get_profile("small")
    wide = small.replace(model=replace(small.model, dim=64, bottom_mlp=(64, 64)))
    big_batch = get_profile("small", batch_size=1024)
    v100, h100 = get_machine("v100-pcie3"), get_machine("h100-pcie5")
    return [
        Case(
            (small, v100),
            "the small profile on a V100 server",
            "bytes = 2 x batch_size x tables x dim x 4 (pooled vectors up, their gradients down)",
            shown="get_profile('small'), get_machine('v100-pcie3')",
        ),
        Case(
            (small, h100),
            "the small profile on an H100 server",
            "two copies, each paying machine.pcie_latency once, plus the bytes / machine.pcie_bw",
            shown="get_profile('small'), get_machine('h100-pcie5')",
        ),
        Case(
            (wide, v100),
            "rows of 64 numbers",
            "the pooled vector of a bag has dim numbers: config.model.dim",
            shown="small with dim 64, get_machine('v100-pcie3')",
        ),
        Case(
            (big_batch, h100),
            "batches of 1,024",
            "one pooled vector per sample and table: config.data.batch_size",
            shown="get_profile('small', batch_size=1024), get_machine('h100-pcie5')",
        ),
    ]


HOST_THREADS = ("plan", "collect", "write_back")  # a thread each, in the paper's diagram


def pipeline_resources(stages: dict[str, float], host_cores: int) -> dict[str, float]:
    """Busy seconds per resource of ScratchPipe on a GPU server, as the paper draws it: the host
    threads (Plan, Collect, Write-back, a thread each, sharing `host_cores`), the PCIe link
    (Transfer), the GPU (Insert and Train). The kit's cost model (costmodel.py) splits it finer:
    the write-back thread also runs Transfer and Insert's calls, and the victims' rows cross the
    link and the GPU too; the exercise keeps the diagram's three resources."""
    host = [stages[s] for s in HOST_THREADS]
    return {
        "host threads": max(max(host), sum(host) / host_cores),
        "pcie": stages["transfer"],
        "device": stages["insert"] + stages["train"],
    }


def model_pipeline_step(stage_seconds: dict, host_cores: int) -> float:
    return max(pipeline_resources(stage_seconds, host_cores).values())


def _step_cases() -> list[Case]:
    config = get_profile("small")
    work = StepWork.from_config(config).with_hit_rate(0.9)
    projected = project("scratchpipe", work, get_machine("h100-pcie5")).stage_seconds
    ms = lambda **s: {k: v / 1000 for k, v in s.items()}
    return [
        Case(
            (ms(plan=1, collect=2, write_back=1, transfer=0.5, insert=0.2, train=1.0), 8),
            "the host threads are busiest",
            "plan, collect and write_back each run on a thread of "
            "their own: with enough cores the host takes max(plan, collect, write_back)",
        ),
        Case(
            (ms(plan=1, collect=2, write_back=1, transfer=0.5, insert=0.2, train=1.0), 1),
            "one host core",
            "with fewer cores than host threads they share them: the host takes at "
            "least (plan + collect + write_back) / host_cores",
        ),
        Case(
            (ms(plan=0.1, collect=0.1, write_back=0.1, transfer=3.0, insert=0.2, train=1.0), 4),
            "the PCIe link is busiest",
            "transfer has a copy engine of its own: it is a resource by itself",
        ),
        Case(
            (ms(plan=0.1, collect=0.2, write_back=0.1, transfer=0.5, insert=0.7, train=1.0), 4),
            "the GPU is busiest",
            "insert and train share the GPU: add them",
        ),
        Case(
            (projected, 16),
            "the cost model's stages for the small profile on an H100 server",
            shown="project('scratchpipe', ..., h100-pcie5).stage_seconds, 16",
        ),
    ]


register(
    Exercise(
        "hybrid_transfer_seconds",
        "hybrid_transfer_seconds(config, machine)",
        _transfer_cases,
        model_transfer,
        "seconds = bytes / machine.pcie_bw + copies * machine.pcie_latency",
    ),
    Exercise(
        "pipeline_step_seconds",
        "pipeline_step_seconds(stage_seconds, host_cores)",
        _step_cases,
        model_pipeline_step,
        "the step of a pipeline is its busiest resource: the largest of host threads, PCIe and GPU",
    ),
)
