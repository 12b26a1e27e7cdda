"""The course's headline: every design's projected samples/s on one GPU server, from a recorded run
of the cost model (results/projections.json, written by `benchmarks/bench_projections.py --record`),
and ScratchPipe's speed over each of its peers (scratchkit/designs' PEERS): the baseline at its best
(`hybrid`: its host work on every core of one GPU's share of the server, up to what the host's
memory serves, and again on a whole socket), the backward-looking cache the paper measured against
(`lru-device`: filled on demand inside the step, bookkept on the device) and the production peer
(`prefetch-lru-device`: an LRU cache filled one batch ahead, looked up, chosen and filled by the
device, as FBGEMM and TorchRec run it).

    headline_rows(record)        (head, rows): a column per workload, a row per design and ratio
    takeaway(record)             the ranges those ratios span, in a sentence, from the record
    peer_rows(record)            (head, rows): ScratchPipe over the production peer on every server
    headline_table(record)       the first as HTML tables, designs and ratios, with the takeaway (notebook 05;
                                 peer_table the third)
    headline_markdown(record)    the first and the takeaway in Markdown (the README, by scripts/render_results.py)
    recorded()                   the record itself, read from the repository's results/
"""

from __future__ import annotations

import json
from pathlib import Path

from scratchkit.measure.report import Table, Tables
from scratchkit.designs import BASELINE, DESIGNS, PEERS, PRODUCTION_PEER, UPPER_BOUND, Compared, versus
from scratchkit.designs.scratchpipe import SCRATCHPIPE
from scratchkit.designs.scratchpipe_device import SCRATCHPIPE_DEVICE
from scratchkit.projection.project import SOCKET_SHARE

RECORD = Path(__file__).resolve().parents[2] / "results" / "projections.json"
SERVER = "h100-pcie5"
PIPELINE = SCRATCHPIPE_DEVICE.name  # the ratios: ScratchPipe as its authors build it, on the GPU
SHARES = {"": "one GPU's share", SOCKET_SHARE: "a whole socket"}  # the baseline's host, as the record keys it


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


def shares(figures: dict, server: str = SERVER) -> list[str]:
    """The baseline's host shares one workload's `figures` hold ("": one GPU's; SOCKET_SHARE)."""
    return [share for share in SHARES if not share or share in figures[BASELINE][server]]


def labelled(design: str, share: str = "") -> str:
    """A design's name in the headline: the baseline's with the host share it is priced on."""
    return f"{design}, {SHARES[share]}" if design == BASELINE else design


def compared(figures: dict, server: str = SERVER) -> list[tuple[str, str]]:
    """(label, key) of each speed the pipeline is compared by in one workload's `figures`: over
    each peer the record holds, the baseline at each of its host shares."""
    pairs = [
        (labelled(peer, share), versus(peer, share or None))
        for peer in PEERS
        for share in (shares(figures, server) if peer == BASELINE else [""])
    ]
    return [(label, key) for label, key in pairs if key in figures[PIPELINE][server]]


def design_rows(record: dict, server: str = SERVER) -> list[list[str]]:
    """A row per design (the baseline at each host share), a cell per workload of the record: its
    thousands of samples/s and the stage that bounds it."""
    workloads = record["figures"]
    first = next(iter(workloads.values()))
    cell = lambda p: f"{p['samples_per_s'] / 1000:,.0f}k, {p['bound_stage']}"
    at = lambda w, d, share: w[d][server][share] if share else w[d][server]  # a design at a host share
    return [
        [labelled(d, share)] + [cell(at(w, d, share)) for w in workloads.values()]
        for d in shown_designs(record)
        for share in (shares(first, server) if d == BASELINE else [""])
    ]


def ratio_rows(record: dict, server: str = SERVER) -> list[list[str]]:
    """A row per peer the pipeline is compared with (`compared`): its speed over that peer's, per workload."""
    workloads = record["figures"]
    return [
        [label] + [f"{w[PIPELINE][server][key]:.2f}" for w in workloads.values()]
        for label, key in compared(next(iter(workloads.values())), server)
    ]


def headline_rows(record: dict, server: str = SERVER) -> tuple[list[str], list[list[str]]]:
    """A column per workload of the record; the design rows, then scratchpipe-device's speed over
    each of its peers, labelled "scratchpipe-device x <peer>"."""
    head = ["design"] + list(record["figures"])
    ratios = [[f"{PIPELINE} x {row[0]}"] + row[1:] for row in ratio_rows(record, server)]
    return head, design_rows(record, server) + ratios


def takeaway(record: dict, server: str = SERVER) -> str:
    """The range of each of the pipeline's speed-ups over the record's workloads, in one sentence:
    the figures a learner should leave with, and which workload sits at each end."""
    workloads = record["figures"]
    parts = []
    for label, key in compared(next(iter(workloads.values())), server):
        by = {name: w[PIPELINE][server][key] for name, w in workloads.items()}
        low, high = min(by, key=by.get), max(by, key=by.get)
        same = f"{by[low]:.2f}" == f"{by[high]:.2f}"
        span = f"{by[low]:.2f}x" if same else f"{by[low]:.2f}x ({low}) to {by[high]:.2f}x ({high})"
        parts.append(f"{span} {label.replace(', ', ' on ')}")
    listed = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    return f"On {server}, across the workloads above, {PIPELINE} is projected at {listed}."


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


def headline_table(record: dict, server: str = SERVER) -> Tables:
    """The headline as a notebook shows it: the designs, then the ratios apart, each table as wide
    as its own cells (as one table, the longest ratio label beside the widest cells is wider than
    1,000 px)."""
    workloads = list(record["figures"])
    designs = Table(["design"] + workloads, design_rows(record, server), caption=caption(record, server))
    ratios = Table([f"{PIPELINE} over"] + workloads, ratio_rows(record, server), notes=[takeaway(record, server)])
    return Tables([designs, ratios])


def peer_table(record: dict) -> Table:
    head, rows = peer_rows(record)
    return Table(head, rows, caption=PEER_CAPTION)


def markdown(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def headline_markdown(record: dict, server: str = SERVER) -> str:
    return "\n".join(
        markdown(*headline_rows(record, server))
        + ["", caption(record, server, dated=False) + ".", "", takeaway(record, server)]
    )
