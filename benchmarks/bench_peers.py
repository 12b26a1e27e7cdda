"""The kit's gpu-only and hybrid trainers beside plain PyTorch and FBGEMM's CPU table-batched
embedding, on the same batches, in one run.

    .venv/bin/python benchmarks/bench_peers.py [--profiles small,criteo-like,embedding-bound@0.25]
                                               [--threads 1,2] [--steps 100[,100,10]] [--rounds 5] [--json]
                                               [--embeddings] [--generated] [--record PATH]

The peers, each training the same DLRM (same initial weights, same batches, SGD):
    gpu-only   the kit's `gpu-only` trainer (on a CPU-only machine its tables live on the CPU),
               bit for bit plain PyTorch
    gpu-only-by-id   the same with `summation_order="by-id"`: each id's gradients summed in
               lookup order (a stable radix sort, as FBGEMM sorts), PyTorch's result to rounding
    hybrid     the kit's `hybrid` trainer: its embedding work in the table-batched C++ loops, the
               backward then the update (not fused), every table cut into runs where there are
               more threads than tables; bit for bit plain PyTorch
    pytorch    `scratchkit.measure.reference`: nn.EmbeddingBag(mode="sum", sparse=True) per table and
               torch.optim.SGD, the loop anyone would write
    fbgemm     FBGEMM's SplitTableBatchedEmbeddingBagsCodegen (EmbeddingLocation.HOST,
               ComputeDevice.CPU, OptimType.EXACT_SGD, PoolingMode.SUM): every table in one lookup,
               the SGD update fused into its backward; the reference's dense model around it.
               Optional: `make peers` installs it (the `peers` extra); skipped with a message where
               fbgemm_gpu is not importable.
A profile may carry a scale, `name@scale` (the scalable profiles: `embedding-bound@0.25`).
`--embeddings` times the embedding work alone (gpu-only's table-batched loops with SGD's backward
and update fused, hybrid's the same unfused, the per-table torch ops they replaced, FBGEMM's TBE
forward + fused backward), on batches made beforehand. In the
full step the batches are made once before the rounds and every peer reads the same ones, as an
input pipeline hands batches over (the kit's synthetic generator takes 40-60% of a `small` step
and is not what is compared; the cost model leaves it out too); `--generated` makes each peer
generate its batches inside the timed loop instead. Thread counts go through the config
(`TrainConfig.cpu_threads`, which every peer's constructor applies with torch.set_num_threads, and
`TrainConfig.threads`, the kit's C++ loops), so all three run on the same number of threads. Rounds alternate the peers (ABCABC...) so a noisy
machine slows them alike; the median round's samples/s is reported, and each peer's ratio to plain
PyTorch is the median of its rounds' ratios (a round's peers ran back to back, under one load), shown with
the lowest and highest round ratio to FBGEMM (the spread). `--record PATH` keeps the run as JSON
(scratchkit/measure/record.py: command, commit, date, machine, the rows).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace

import numpy as np
import torch
import torch.nn.functional as F

from scratchkit.config import OptimizerKind
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.measure.record import RunRecord
from scratchkit.measure.reference import ReferenceRun
from scratchkit.profiles import get_profile
from scratchkit.trainers import make_trainer

WARMUP = 3  # steps each peer trains before its clock starts


class ReadAhead:
    """The first `count` batches of a source, made once and handed to every peer (read-only)."""

    def __init__(self, source, count: int):
        self.table_sizes, self.num_dense = source.table_sizes, source.num_dense
        self._batches = [source.batch(b) for b in range(count)]

    def __len__(self) -> int:
        return len(self._batches)

    def batch(self, index: int):
        return self._batches[index]


def profile_config(name: str):
    """A profile's config from `name` or `name@scale` (e.g. embedding-bound@0.25)."""
    base, at, scale = name.partition("@")
    if not at:
        return get_profile(name)
    try:
        return get_profile(base, float(scale))
    except ValueError as e:
        raise ValueError(f"profile {name!r}: {e}") from None


def fbgemm_missing() -> str | None:
    """None where FBGEMM's CPU package imports, else why not (one line)."""
    try:
        import fbgemm_gpu.split_table_batched_embeddings_ops_training  # noqa: F401
    except Exception as e:  # ImportError, or an ABI mismatch with this torch (OSError, RuntimeError)
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


class FbgemmRun:
    """The reference DLRM with its EmbeddingBags replaced by one FBGEMM table-batched embedding."""

    @staticmethod
    def make_tbe(config):
        """Every table of `config` in one TBE in host memory, computed on the CPU, with exact SGD."""
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice,
            OptimType,
            SparseType,
            SplitTableBatchedEmbeddingBagsCodegen,
        )

        return SplitTableBatchedEmbeddingBagsCodegen(
            [(n, config.model.dim, EmbeddingLocation.HOST, ComputeDevice.CPU) for n in config.data.table_sizes],
            optimizer=OptimType.EXACT_SGD,
            learning_rate=config.optimizer.lr,
            pooling_mode=PoolingMode.SUM,
            weights_precision=SparseType.FP32,
            device=torch.device("cpu"),
        )

    def __init__(self, config, source):
        if config.optimizer.kind is not OptimizerKind.SGD:
            raise ValueError(f"FbgemmRun: optimizer {config.optimizer.kind.value}: only sgd is compared")
        reference = ReferenceRun(config, source)  # the dense model, initial weights, cpu_threads
        self.config, self.source, self.model = config, source, reference.model
        self.tbe = self.make_tbe(config)
        with torch.no_grad():
            for mine, table in zip(self.tbe.split_embedding_weights(), self.model.tables):
                mine.copy_(table.weight)
        self.model.tables = None  # the EmbeddingBags are not used
        dense = [*self.model.bottom.parameters(), *self.model.top.parameters()]
        self.dense_opt = torch.optim.SGD(dense, lr=config.optimizer.lr)
        self.steps_done = 0

    def train(self, steps: int) -> list[float]:
        losses = []
        for _ in range(steps):
            batch = self.source.batch(self.steps_done)
            indices, offsets = table_batched_inputs(batch.ids, batch.offsets)
            pooled = self.tbe(indices, offsets).view(len(batch.labels), len(batch.ids), -1)  # [B, T, dim]
            dense = torch.from_numpy(batch.dense)
            x = self.model.bottom(dense if self.source.num_dense else torch.ones(len(batch.labels), 1))
            logits = self.model.interact(x, pooled.unbind(1))
            loss = F.binary_cross_entropy_with_logits(logits, torch.from_numpy(batch.labels))
            self.dense_opt.zero_grad(set_to_none=True)
            loss.backward()  # the tables' SGD runs inside the TBE's backward
            self.dense_opt.step()
            losses.append(float(loss.detach()))
            self.steps_done += 1
        return losses


def table_batched_inputs(ids, offsets) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-table ids [n_t] and bag starts [B] -> all ids [sum n_t] and the TBE's offsets [T * B + 1]
    (table-major: table t's bag b starts at offsets[t * B + b])."""
    starts = np.cumsum([0] + [len(i) for i in ids])
    flat = np.concatenate([o + s for o, s in zip(offsets, starts[:-1])] + [starts[-1:]])
    return torch.from_numpy(np.concatenate(ids)), torch.from_numpy(flat.astype(np.int64))


def time_run(name: str, config, source, steps: int) -> float:
    """samples/s of `steps` steps of peer `name`, after WARMUP steps."""
    if name in ("gpu-only", "gpu-only-by-id", "hybrid"):
        if name == "gpu-only-by-id":
            config = replace(config, summation_order="by-id")
        with make_trainer("hybrid" if name == "hybrid" else "gpu-only", config, source=source) as trainer:
            list(trainer.train(WARMUP))
            start = time.perf_counter()
            list(trainer.train(steps))
            return steps * config.data.batch_size / (time.perf_counter() - start)
    run = ReferenceRun(config, source) if name == "pytorch" else FbgemmRun(config, source)
    run.train(WARMUP)
    start = time.perf_counter()
    run.train(steps)
    return steps * config.data.batch_size / (time.perf_counter() - start)


def embedding_steps(profile: str, threads: int, steps: int) -> dict:
    """The embedding work alone (lookup, backward, SGD of every table; no data, no MLP), on `steps`
    of the profile's batches made beforehand, with one fixed pooled gradient: a thunk per peer,
    each training its own copy of the tables. The dense step is the same code in every peer, so
    this is where they differ."""
    from scratchkit.config import OptimizerConfig
    from scratchkit.embedding import fused_sgd
    from scratchkit.embedding import table_batched as tb
    from scratchkit.embedding import tbe_native

    config = profile_config(profile)
    torch.set_num_threads(threads)
    tbe_native.set_host_threads(threads)  # the kit's loops on the same count as torch's
    source, sizes, dim = SyntheticSource(config.data), list(config.data.table_sizes), config.model.dim
    batches = [source.batch(b) for b in range(steps)]
    inputs = [([torch.from_numpy(i) for i in b.ids], [torch.from_numpy(o) for o in b.offsets]) for b in batches]
    grad = torch.randn(config.data.batch_size, len(sizes), dim, generator=torch.Generator().manual_seed(0))
    sgd, states = OptimizerConfig(OptimizerKind.SGD, lr=config.optimizer.lr), [None] * len(sizes)

    def kit(lookup, backward, update):
        weights = [torch.randn(n, dim) for n in sizes]

        def run():
            for ids, offsets in inputs:
                lookup(weights, ids, offsets)
                update(weights, states, backward(ids, offsets, grad, sizes), sgd)

        return run

    workspace = tb.BackwardWorkspace()  # as the trainers keep one: a fresh 100 MB buffer a step faults in
    backward = lambda ids, offsets, grad, sizes: tb.embedding_backward_tables(
        ids, offsets, grad, sizes, workspace=workspace
    )
    sort = lambda ids, offsets, grad, sizes: (fused_sgd.sort_lookups(ids, offsets, sizes, workspace), grad)
    fused = lambda weights, states, sorted_grad, sgd: fused_sgd.fused_sgd_update(weights, *sorted_grad, sgd.lr)
    thunks = {
        "gpu-only": kit(tb.pooled_lookup_tables, sort, fused),
        "hybrid": kit(tb.pooled_lookup_tables, backward, tb.apply_updates),  # unfused, as hybrid runs them
        "per-table": kit(tb.pooled_lookup_tables_twin, tb.embedding_backward_tables_twin, tb.apply_updates_twin),
    }
    if fbgemm_missing() is None:
        tbe = FbgemmRun.make_tbe(config)
        flat = [table_batched_inputs(b.ids, b.offsets) for b in batches]
        flat_grad = grad.view(config.data.batch_size, -1)
        thunks["fbgemm"] = lambda: [tbe(i, o).backward(flat_grad) for i, o in flat]
    return thunks


def measure_embeddings(profiles, threads, steps_each: list[int], rounds: int) -> list[dict]:
    """One row per profile, thread count and peer of the embedding work alone: median ms per step,
    and the median over rounds of the ratio of per-table torch ops' time to the peer's.
    `steps_each[p]`: the steps a round of profile p times."""
    rows = []
    for profile, steps in zip(profiles, steps_each):
        for n in threads:
            thunks = embedding_steps(profile, n, steps)
            times = {peer: [] for peer in thunks}
            for run in thunks.values():  # warm-up: the loops' first use builds and checks them
                run()
            for _ in range(rounds):
                for peer, run in thunks.items():
                    start = time.perf_counter()
                    run()
                    times[peer].append((time.perf_counter() - start) / steps)
            rows += [
                dict(
                    profile=profile,
                    threads=n,
                    peer=peer,
                    steps=steps,
                    rounds=rounds,
                    ms_per_step=1e3 * statistics.median(times[peer]),
                    speedup_over_per_table=statistics.median(p / t for p, t in zip(times["per-table"], times[peer])),
                )
                for peer in thunks
            ]
    return rows


def measure(
    profiles: list[str],
    threads: list[int],
    steps_each: list[int],
    rounds: int,
    peers: list[str],
    generated: bool = False,
) -> list[dict]:
    """One row per profile, thread count and peer: median samples/s, and the median over rounds of
    the ratio to plain PyTorch and to FBGEMM (None where FBGEMM was not run). `steps_each[p]`: the
    steps each peer's round of profile p times. `generated`: each peer makes its batches in its
    timed loop (else they are read once, beforehand)."""
    rows = []
    for profile, steps in zip(profiles, steps_each):
        base = profile_config(profile)
        source = SyntheticSource(base.data)
        if not generated:
            source = ReadAhead(source, WARMUP + steps)
        for n in threads:
            config = replace(base, cpu_threads=n, threads=n)  # torch's threads and the kit's loops'
            runs = {peer: [] for peer in peers}
            for r in range(rounds):
                for peer in peers[r % len(peers) :] + peers[: r % len(peers)]:  # who goes first rotates
                    runs[peer].append(time_run(peer, config, source, steps))
            ratios = lambda peer, to: [a / p for a, p in zip(runs[peer], runs[to])]
            fbgemm = (lambda peer: ratios(peer, "fbgemm")) if "fbgemm" in runs else (lambda peer: None)
            rows += [
                dict(
                    profile=profile,
                    threads=n,
                    peer=peer,
                    steps=steps,
                    rounds=rounds,
                    generated=generated,
                    samples_per_s=statistics.median(runs[peer]),
                    rounds_samples_per_s=runs[peer],
                    ratio_to_pytorch=statistics.median(ratios(peer, "pytorch")),
                    ratio_to_fbgemm=None if fbgemm(peer) is None else statistics.median(fbgemm(peer)),
                    rounds_ratio_to_fbgemm=fbgemm(peer),
                )
                for peer in peers
            ]
    return rows


def recorded(rows: list[dict]) -> dict:
    """The figures of a run for its record (docs/results.md renders each dict of dicts as a table):
    a row per profile, thread count and peer, each round's ratio to FBGEMM among them."""
    peers = {}
    for r in rows:
        name = f"{r['profile']}, {r['threads']} thread{'s' if r['threads'] > 1 else ''}, {r['peer']}"
        if "ms_per_step" in r:
            peers[name] = dict(
                ms_per_step=round(r["ms_per_step"], 3), x_per_table=round(r["speedup_over_per_table"], 2)
            )
            continue
        rounds = r["rounds_ratio_to_fbgemm"]
        peers[name] = dict(
            samples_per_s=round(r["samples_per_s"]),
            x_pytorch=round(r["ratio_to_pytorch"], 2),
            x_fbgemm=None if rounds is None else round(r["ratio_to_fbgemm"], 2),
            x_fbgemm_rounds=None if rounds is None else " ".join(f"{x:.2f}" for x in rounds),
        )
    steps = {r["profile"]: r["steps"] for r in rows}
    return {"peers": peers, "steps": steps, "rounds": rows[0]["rounds"]}


def print_table(rows: list[dict]) -> None:
    print(
        f"{'profile':20s} {'threads':>7s} {'peer':14s} {'samples/s':>11s} {'x pytorch':>9s} {'x fbgemm':>8s}"
        f" {'(rounds: low-high)':>18s}"
    )
    for row in rows:
        fbgemm, spread = "-", ""
        if row["ratio_to_fbgemm"] is not None:
            fbgemm = f"{row['ratio_to_fbgemm']:.2f}"
            spread = f"{min(row['rounds_ratio_to_fbgemm']):.2f}-{max(row['rounds_ratio_to_fbgemm']):.2f}"
        print(
            f"{row['profile']:20s} {row['threads']:7d} {row['peer']:14s} {row['samples_per_s']:11,.0f} "
            f"{row['ratio_to_pytorch']:9.2f} {fbgemm:>8s} {spread:>18s}"
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--profiles",
        default="small,criteo-like",
        help="comma-separated profiles, each `name` or `name@scale` (embedding-bound@0.25)",
    )
    parser.add_argument("--threads", default="1,2", help="comma-separated torch thread counts")
    parser.add_argument(
        "--steps", default="100", help="timed steps per round: one count, or one per profile (100,100,10)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (the median is shown)")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of the table")
    parser.add_argument(
        "--embeddings",
        action="store_true",
        help="time the embedding work alone (lookup, backward, SGD), beside the per-table torch ops",
    )
    parser.add_argument(
        "--generated", action="store_true", help="each peer generates its synthetic batches inside its timed steps"
    )
    parser.add_argument("--record", metavar="PATH", help="also keep the run as JSON at PATH (e.g. results/peers.json)")
    args = parser.parse_args(argv)
    record = RunRecord.of_run(__file__, argv)
    for name in args.profiles.split(","):
        try:
            profile_config(name)
        except ValueError as e:
            parser.error(f"--profiles: {e}")
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads {args.threads!r}: expected comma-separated whole numbers, e.g. 1,2")
    profiles = args.profiles.split(",")
    try:
        steps = [int(s) for s in args.steps.split(",")]
    except ValueError:
        parser.error(f"--steps {args.steps!r}: expected a whole number, or one per profile")
    if len(steps) == 1:
        steps *= len(profiles)
    if len(steps) != len(profiles):
        parser.error(f"--steps {args.steps!r}: {len(steps)} counts for {len(profiles)} profiles")
    if min(threads) < 1 or min(steps) < 1 or args.rounds < 1:
        parser.error("--threads, --steps and --rounds must be at least 1")
    if args.embeddings:
        rows = measure_embeddings(profiles, threads, steps, args.rounds)
        if args.record:
            record.write(args.record, recorded(rows))
        if args.json:
            print(json.dumps(rows, indent=1))
            return
        print(f"embedding work alone, {args.steps} steps x {args.rounds} alternating rounds (medians)")
        print(f"{'profile':20s} {'threads':>7s} {'peer':10s} {'ms/step':>8s} {'x per-table':>11s}")
        for row in rows:
            print(
                f"{row['profile']:20s} {row['threads']:7d} {row['peer']:10s} {row['ms_per_step']:8.3f} "
                f"{row['speedup_over_per_table']:11.2f}"
            )
        return
    peers = ["gpu-only", "gpu-only-by-id", "hybrid", "pytorch"]
    why = fbgemm_missing()
    if why is None:
        peers.append("fbgemm")
    else:
        print(
            f"bench_peers: FBGEMM skipped: fbgemm_gpu does not import here ({why}); `make peers` installs it",
            file=sys.stderr,
        )
    rows = measure(profiles, threads, steps, args.rounds, peers, args.generated)
    if args.record:
        record.write(args.record, recorded(rows))
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    made = "generated in each peer's steps" if args.generated else "read once beforehand, the same for every peer"
    print(
        f"{args.steps} steps x {args.rounds} alternating rounds: median samples/s, median of round ratios "
        f"(batches {made})"
    )
    print_table(rows)


if __name__ == "__main__":
    main()
