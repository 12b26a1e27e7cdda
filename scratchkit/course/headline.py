"""The course's headline: every design's projected samples/s on one GPU server, from a recorded run
of the cost model (results/projections.json, written by `benchmarks/bench_projections.py --record`),
and each ScratchPipe's speed over the production peer (`prefetch-lru`: an LRU cache filled one batch
ahead, its misses read by the device over the link) and over the baseline at its best (`hybrid`: its
host work on every core the server gives a GPU, up to what the host's memory serves).

    headline_rows(record)        (head, rows): a row per workload, a column per design and ratio
    headline_table(record)       the same as an HTML table (notebook 05)
    headline_markdown(record)    the same as a Markdown table (the README, by scripts/render_results.py)
"""
from __future__ import annotations

from scratchkit.course.tables import Table

SERVER = "h100-pcie5"
DESIGNS = ("hybrid", "prefetch-lru", "scratchpipe", "scratchpipe-device", "gpu-only")
PIPELINE = "scratchpipe-device"   # the ratios: ScratchPipe as its authors build it, planned on the GPU
PEERS = (("prefetch-lru", "x_prefetch_lru"), ("hybrid", "x_hybrid"))


def headline_rows(record: dict, server: str = SERVER) -> tuple[list[str], list[list[str]]]:
    """A row per workload of the record: each design's thousands of samples/s and the stage that
    bounds it, then scratchpipe-device's speed over prefetch-lru's and hybrid's on the same server."""
    head = ["workload"] + list(DESIGNS) + [f"{PIPELINE} x {peer}" for peer, _ in PEERS]
    rows = []
    for workload, trainers in record["figures"].items():
        at = {d: trainers[d][server] for d in DESIGNS}
        speeds = [f"{at[d]['samples_per_s'] / 1000:,.0f}k, {at[d]['bound_stage']}" for d in DESIGNS]
        rows.append([workload] + speeds + [f"{at[PIPELINE][key]:.2f}" for _, key in PEERS])
    return head, rows


def caption(record: dict, server: str = SERVER) -> str:
    """Where the figures come from: the run that recorded them."""
    return (f"projected on {server}: thousands of samples/s and the stage that bounds each; "
            f"`{record['command']}`, commit {record['commit']}, {record['date']}")


def headline_table(record: dict, server: str = SERVER) -> Table:
    head, rows = headline_rows(record, server)
    return Table(head, rows, caption=caption(record, server))


def headline_markdown(record: dict, server: str = SERVER) -> str:
    head, rows = headline_rows(record, server)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines + ["", caption(record, server) + "."])
