"""`scratchkit trace`: write the access trace of a profile's or a data file's batches as a
`.npy` of int64 ids, a batch at a time (memory: one batch, whatever the length), and where its
batches end beside it (`ids.layout.json`), which `scratchkit simulate` reads:

    wrote 1,638,400 accesses (79,817 distinct ids) of 100 batches to ids.npy
    16,384 lookups a batch (256 samples x 8 tables x 8 ids a bag), in ids.layout.json"""

from __future__ import annotations

from pathlib import Path

from scratchkit.commands.common import add_data_args, open_source, progress_counter
from scratchkit.commands.notes import fit_steps
from scratchkit.commands.request import DataRequest


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("trace", help="write an access trace (.npy int64 ids) for the simulators")
    add_data_args(p)
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="batches to include (default: 100 of a profile, every batch of --data; "
        "at most the data's batches, said on stderr)",
    )
    p.add_argument("--out", required=True, help="output path, e.g. ids.npy")
    p.set_defaults(run=run)


def run(args) -> int:
    check_folder(args.out)
    path, accesses, batches = write_trace(DataRequest.from_args(args), args.steps, args.out)
    distinct = "?"
    if accesses < 5_000_000:
        import numpy as np

        distinct = f"{np.unique(np.load(path)).size:,}"
    from scratchkit.data.trace import TraceLayout

    print(f"wrote {accesses:,} accesses ({distinct} distinct ids) of {batches} batches to {path}")
    print(f"{TraceLayout.read(path).describe()}, in {TraceLayout.path_of(path)}")
    return 0


def write_trace(data: DataRequest, steps: int | None, out) -> tuple:
    """(path, accesses, batches): the trace of `steps` batches (None: 100 of a profile, all of a
    data file) of the data `data` names, streamed to `out`."""
    from scratchkit.data.trace import stream_trace

    source, _, _ = open_source(data)
    wanted = steps if steps is not None else (100 if data.data is None else len(source))
    batches = fit_steps(source, wanted, "trace")
    with progress_counter(batches, "trace", unit="batch") as bar:
        path, accesses = stream_trace(source, batches, out, on_batch=bar.update)
    return path, accesses, batches


def check_folder(out) -> None:
    """Refuse an --out whose folder is missing before any batch is read, naming the folder."""
    folder = Path(out).parent
    if not folder.is_dir():
        raise ValueError(
            f"--out {out}: there is no folder {folder} to write it in: mkdir -p {folder} first, or give another --out"
        )
