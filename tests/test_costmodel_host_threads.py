"""Hybrid's host embedding work on many threads (designs/host_threads.py): one core's seconds
spread over the host's threads, capped by the rate the host's memory serves random lines."""

from dataclasses import replace

import pytest

from scratchkit.config import OptimizerKind
from scratchkit.costmodel.servers import SERVERS, memory_line_rate
from scratchkit.designs.host_threads import HOST_MEMORY, busy_threads, memory_lines, pieces
from scratchkit.designs.step import StepWork, TableWork
from scratchkit.projection.project import project, stage_work
from scratchkit.projection.machines import get_machine
from scratchkit.profiles import get_profile

HOST_STAGES = ("embedding_forward", "embedding_backward", "update")


def wide(tables=8, batch=2048, unique=50_000.0, dim=64, state_width=0) -> StepWork:
    """An embedding-bound step: 8 tables of a million rows, 80k lookups and 50k distinct a table."""
    return StepWork(
        batch_size=batch,
        dim=dim,
        state_width=state_width,
        optimizer=OptimizerKind.SGD,
        num_dense=13,
        tables=tuple(TableWork(1_000_000, 40.0 * batch, unique, 100_000) for _ in range(tables)),
        bottom=(13, dim),
        top=(dim + 36, 1),
    )


def one_core_seconds(work, machine, stage):
    return stage_work("hybrid", work, machine)[stage].host_seconds(machine)


def fixed_costs(work, machine, stage):
    """The stage's calls, priced by hand from the profile's table of fixed costs."""
    return sum(
        count * machine.host_calls[name] for name, count in stage_work("hybrid", work, machine)[stage].host_calls
    )


def test_fourteen_cores_are_faster_than_one_unless_the_memory_binds():
    h100, work = get_machine("h100-pcie5"), wide()
    one = project("hybrid", work, replace(h100, host_cores=1))
    many = project("hybrid", work, h100)
    assert many.samples_per_s > 3 * one.samples_per_s
    assert many.bound_stage != HOST_MEMORY
    # each host stage: one core's seconds over the threads its pieces keep busy, or its lines at
    # the memory's rate where that is longer (the forward's here); the link and device as they were
    for stage in HOST_STAGES:
        threads = busy_threads(stage, work, h100)
        assert threads == 14  # 8 tables of 81,920 lookups: every stage cut into 7 runs a table
        rest = one.stage_seconds[stage] - one_core_seconds(work, h100, stage)
        calls = fixed_costs(work, h100, stage)
        host = calls + max(
            (one_core_seconds(work, h100, stage) - calls) / threads,
            memory_lines(stage, work) / h100.host_memory_line_rate,
        )
        assert many.stage_seconds[stage] == pytest.approx(rest + host)
    assert many.stage_seconds["embedding_forward"] == pytest.approx(
        one.stage_seconds["embedding_forward"]
        - one_core_seconds(work, h100, "embedding_forward")
        + fixed_costs(work, h100, "embedding_forward")
        + memory_lines("embedding_forward", work) / h100.host_memory_line_rate
    )


def test_the_calls_fixed_costs_stay_on_the_calling_thread():
    """Amdahl's serial part: however many cores, a stage takes at least its calls' fixed costs."""
    h100, work = get_machine("h100-pcie5"), wide(batch=64, unique=20.0)
    huge = project("hybrid", work, replace(h100, host_cores=10_000, host_memory_line_rate=1e15))
    for stage in HOST_STAGES:
        assert fixed_costs(work, h100, stage) > 0
        assert huge.stage_seconds[stage] >= fixed_costs(work, h100, stage)


def test_the_memory_cap_binds_and_is_named_when_the_lines_outrun_the_cores():
    h100, work = get_machine("h100-pcie5"), wide()
    lines = memory_lines("update", work)
    assert lines == 2 * 8 * 50_000 * (64 * 4 // 64)  # read and written, 4 lines a 256 B row
    starved = replace(h100, host_memory_line_rate=1e7)  # 10M lines/s: far below the cores
    capped = project("hybrid", work, starved)
    assert capped.bound_stage == HOST_MEMORY
    assert capped.resource_seconds[HOST_MEMORY] == pytest.approx(
        sum(memory_lines(s, work) / 1e7 + fixed_costs(work, starved, s) for s in HOST_STAGES)
    )
    assert capped.stage_seconds["update"] >= lines / 1e7
    more_cores = project("hybrid", work, replace(starved, host_cores=56))
    assert more_cores.samples_per_s == pytest.approx(capped.samples_per_s, rel=0.02)  # cores no longer help


def test_the_state_rows_count_as_lines_too():
    assert memory_lines("update", wide(state_width=1)) == 2 * 8 * 50_000 * (4 + 1)
    assert memory_lines("embedding_backward", wide()) == 0.0


def test_a_few_tables_still_use_every_core_through_their_bags_rows_and_sorted_lookups():
    work = wide(tables=2)
    for stage in HOST_STAGES:
        assert pieces(stage, work, 2) == 2  # no more threads than tables: a table a thread
    assert pieces("embedding_forward", work, 14) == pieces("update", work, 14) == 2 * 28  # ~4 runs a thread
    assert pieces("embedding_backward", work, 14) == 2 * int(81_920 // 8192)  # runs of 8,192 lookups at least
    assert pieces("embedding_forward", work, 1000) == 2 * 2048 // 64  # runs of 64 bags at least
    assert pieces("update", work, 1000) == 2 * int(50_000 // 256)
    short = wide(tables=2, batch=512)  # 20,480 lookups a table: introsort's order, one thread's
    assert pieces("embedding_backward", short, 14) == 2


def test_threads_take_the_pieces_in_rounds():
    """14 threads on 8 whole tables keep 8 busy; cut in ~4 runs a thread, all 14."""
    h100, work = get_machine("h100-pcie5"), wide(batch=512)  # backward: 8 tables of introsort
    assert busy_threads("embedding_backward", work, h100) == 8
    assert busy_threads("embedding_backward", wide(), h100) == 14
    assert busy_threads("embedding_backward", wide(), replace(h100, host_cores=12)) == 12  # 8 x 6 runs
    assert busy_threads("embedding_backward", wide(tables=5), replace(h100, host_cores=6)) == 5  # 25 in 5 rounds


def test_each_servers_memory_rate_is_its_channels_per_gpu_at_half_their_peak():
    assert memory_line_rate(2, 4800e6) == pytest.approx(2 * 38.4e9 * 0.5 / 64)
    for name, figures in SERVERS.items():
        channels, transfers, source = figures["memory"]
        machine = get_machine(name)
        assert machine.host_memory_line_rate == pytest.approx(memory_line_rate(channels, transfers))
        assert "channels" in source and "host_memory_line_rate" in machine.sources


def test_on_this_cpu_hybrid_is_priced_at_the_runs_threads():
    from tests.test_costmodel import toy

    cpu, work = toy(device_is_host=True, host_cores=4), wide(tables=2)
    at = lambda n: project("hybrid", replace(work, host_threads=n), cpu)
    assert at(2).samples_per_s > at(1).samples_per_s
    assert at(4).samples_per_s > at(2).samples_per_s
    assert at(16).samples_per_s == pytest.approx(at(4).samples_per_s)  # no more than its cores


def test_on_this_cpu_hybrid_gets_no_more_threads_than_the_cores_the_run_gets_at_once():
    """On a shared 2-core VM two processes got about one core at once (co_run_cores), and
    hybrid's loops on 2 threads ran no faster than gpu-only's on 1 (the validation, embedding-bound):
    its threads are priced no further than that figure."""
    from tests.test_costmodel import toy

    work = replace(wide(tables=2), host_threads=4)
    at = lambda cores: project("hybrid", work, toy(device_is_host=True, host_cores=4, co_run_cores=cores))
    assert at(1.0).step_seconds == pytest.approx(
        project("hybrid", replace(work, host_threads=1), toy(device_is_host=True, host_cores=4)).step_seconds
    )
    assert at(1.0).step_seconds > at(2.0).step_seconds > at(4.0).step_seconds


def test_hybrid_now_differs_between_the_servers_and_says_what_bounds_it():
    work = StepWork.from_config(get_profile("embedding-bound", scale=0.05), batches=1)
    projected = {name: project("hybrid", work, get_machine(name)) for name in SERVERS}
    assert len({round(p.samples_per_s) for p in projected.values()}) == len(SERVERS)
    assert all(p.bound_stage for p in projected.values())


def test_hybrid_can_be_priced_at_one_gpus_share_of_the_host_or_a_whole_socket():
    """servers.HostShare: the cores and DRAM channels one GPU gets of an 8-GPU server, or a
    socket's; each with its datasheet, and the socket faster wherever the host binds hybrid."""
    from scratchkit.costmodel.servers import HostShare, server

    work = StepWork.from_config(get_profile("embedding-bound", scale=0.05), batches=1)
    for name, figures in SERVERS.items():
        gpu, socket = server(name), server(name, HostShare.SOCKET)
        cores, channels, source = figures["socket"]
        assert (gpu.host_cores, socket.host_cores) == (figures["cores"][0], cores) and cores > gpu.host_cores
        assert socket.host_memory_line_rate == pytest.approx(memory_line_rate(channels, figures["memory"][1]))
        assert socket.name == f"{name}:socket" and source in socket.sources["host_cores"]
        assert project("hybrid", work, socket).samples_per_s > 1.5 * project("hybrid", work, gpu).samples_per_s
        assert project("gpu-only", work, socket).samples_per_s == pytest.approx(
            project("gpu-only", work, gpu).samples_per_s
        )
    with SERVERS.registered("no-socket", {k: v for k, v in SERVERS["h100-pcie5"].items() if k != "socket"}):
        with pytest.raises(ValueError, match="'no-socket' states no socket"):
            server("no-socket", HostShare.SOCKET)


def test_a_servers_socket_is_a_machine_by_name_and_the_record_divides_by_hybrid_on_it():
    """`get_machine("h100-pcie5:socket")` is `server(name, HostShare.SOCKET)`; `figures` given the
    baseline on it says every design's speed over it (`x_hybrid_socket`) and keeps it under the
    baseline's `socket`."""
    from scratchkit.costmodel.servers import HostShare, server
    from scratchkit.designs import versus
    from scratchkit.projection.project import SOCKET_SHARE, figures

    assert get_machine("h100-pcie5:socket") == server("h100-pcie5", HostShare.SOCKET)
    for wrong in ("h100-pcie5:gpu", "h100-pcie5:rack", "nowhere:socket"):
        with pytest.raises(ValueError, match="unknown machine"):
            get_machine(wrong)
    work = StepWork.from_config(get_profile("embedding-bound", scale=0.05), batches=1)
    row = [project(name, work, get_machine("h100-pcie5")) for name in ("hybrid", "gpu-only")]
    socket = project("hybrid", work, get_machine("h100-pcie5:socket"))
    shown = figures(row, socket)
    key = versus("hybrid", SOCKET_SHARE)
    assert key == "x_hybrid_socket" and shown["gpu-only"][key] == row[1].samples_per_s / socket.samples_per_s
    assert shown["hybrid"][SOCKET_SHARE]["host_threads"] == 56 and shown["hybrid"][key] < 1.0
    assert key not in figures(row)["gpu-only"]  # a run that priced no socket says nothing of it
