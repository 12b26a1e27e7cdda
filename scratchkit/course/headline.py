"""The course's headline: every design's projected samples/s on one GPU server, from a recorded run
of the cost model (results/projections.json, written by `benchmarks/bench_projections.py --record`),
and each ScratchPipe's speed over the production peer (`prefetch-lru-device`: an LRU cache filled one batch
ahead, looked up, chosen and filled by the device, as FBGEMM and TorchRec run it) and over the
baseline at its best (`hybrid`: its host work on every core the server gives a GPU, up to what the
host's memory serves): the peers of scratchkit/designs.

    headline_rows(record)        (head, rows): a column per workload, a row per design and ratio
    peer_rows(record)            (head, rows): ScratchPipe over the production peer on every server
    headline_table(record)       the first as an HTML table (notebook 05; peer_table the second)
    headline_markdown(record)    both as Markdown tables (the README, by scripts/render_results.py)
    recorded()                   the record itself, read from the repository's results/
"""

from __future__ import annotations

import json
from pathlib import Path

from scratchkit.measure.report import Table
from scratchkit.designs import BASELINE, DESIGNS, PRODUCTION_PEER, UPPER_BOUND, Compared, versus
from scratchkit.designs.scratchpipe import SCRATCHPIPE
from scratchkit.designs.scratchpipe_device import SCRATCHPIPE_DEVICE

RECORD = Path(__file__).resolve().parents[2] / "results" / "projections.json"
SERVER = "h100-pcie5"
PIPELINE = SCRATCHPIPE_DEVICE.name  # the ratios: ScratchPipe as its authors build it, on the GPU


def shown_designs(record: dict) -> list[str]:
    """The designs of the record the headline shows (`Compared.HEADLINE`), in its order: the
    baseline, the others as registered (the production peers, then ScratchPipe, then any of your
    own), the upper bound last."""
    recorded = next(iter(record["figures"].values()))
    shown = [name for name, d in DESIGNS.items() if d.compared is Compared.HEADLINE and name in recorded]
    middle = [name for name in shown if name not in (BASELINE, UPPER_BOUND)]
    return [name for name in (BASELINE, *middle, UPPER_BOUND) if name in shown]


def recorded(path: Path = RECORD) -> dict:
    """The projection record (benchmarks/bench_projections.py --record results/projections.json)."""
    return json.loads(Path(path).read_text())


def headline_rows(record: dict, server: str = SERVER) -> tuple[list[str], list[list[str]]]:
    """A column per workload of the record; a row per design, its thousands of samples/s and the
    stage that bounds it, then scratchpipe-device's speed over the baseline's (`hybrid`)."""
    workloads = record["figures"]
    head = ["design"] + list(workloads)
    rows = [
        [d]
        + [f"{w[d][server]['samples_per_s'] / 1000:,.0f}k, {w[d][server]['bound_stage']}" for w in workloads.values()]
        for d in shown_designs(record)
    ]
    # over the baseline here; over the production peer on every server: peer_rows
    over = [f"{w[PIPELINE][server][versus(BASELINE)]:.2f}" for w in workloads.values()]
    rows.append([f"{PIPELINE} x {BASELINE}"] + over)
    return head, rows


PEER_CAPTION = (
    f"{PIPELINE}'s samples/s over {PRODUCTION_PEER}'s on each server of the same projection, not "
    f"measured (in brackets, the stage that bounds {PRODUCTION_PEER})"
)
PAPERS = (  # which row is ScratchPipe as its paper builds it
    f"{PIPELINE} is the paper's design at its best (its scratchpad planned and filled by the GPU), "
    f"{SCRATCHPIPE.name} the same pipeline bookkept on the host"
)


def peer_rows(record: dict) -> tuple[list[str], list[list[str]]]:
    """A row per workload, a column per server: scratchpipe-device's samples/s over the production
    peer's, and the stage that bounds the peer there (where the two differ, why)."""
    servers = list(next(iter(record["figures"].values()))[PIPELINE])
    head = ["workload"] + servers
    rows = [
        [workload]
        + [
            f"{trainers[PIPELINE][s][versus(PRODUCTION_PEER)]:.2f} ({trainers[PRODUCTION_PEER][s]['bound_stage']})"
            for s in servers
        ]
        for workload, trainers in record["figures"].items()
    ]
    return head, rows


def caption(record: dict, server: str = SERVER, dated: bool = True) -> str:
    """Where the figures come from: the run that recorded them (undated for a guide, whose runs'
    dates live in docs/results.md)."""
    run = (
        f"`{record['command']}`, commit {record['commit']}, {record['date']}"
        if dated
        else "results/projections.json, whose command, commit and date docs/results.md gives"
    )
    return (
        f"projected by the cost model, not measured, on {server}: thousands of samples/s and the "
        f"stage that bounds each; {PAPERS}; {run}"
    )


def headline_table(record: dict, server: str = SERVER) -> Table:
    head, rows = headline_rows(record, server)
    return Table(head, rows, caption=caption(record, server))


def peer_table(record: dict) -> Table:
    head, rows = peer_rows(record)
    return Table(head, rows, caption=PEER_CAPTION)


def markdown(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def headline_markdown(record: dict, server: str = SERVER) -> str:
    return "\n".join(
        markdown(*headline_rows(record, server))
        + ["", caption(record, server, dated=False) + ".", "", PEER_CAPTION + ":", ""]
        + markdown(*peer_rows(record))
    )
