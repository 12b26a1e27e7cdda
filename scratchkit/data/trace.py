"""Access traces for the cache simulators: 1-D int64 `.npy` of ids in access order.

Order: rows (samples) in order, and within a row the tables in order, each bag's ids in bag order,
as a real dataset is read line by line. Each table's ids are offset by the sizes of the tables
before it, so one trace covers all tables without collisions.

A trace written from batches (`stream_trace`, `scratchkit trace`) knows where each batch ends: its
`TraceLayout` goes beside it as `NAME.layout.json` (batches, samples, tables, lookups a batch), so
a simulator that cuts the trace into batches (look-ahead, `--capacity min`) reads the cut from
there instead of asking for it: a batch of `small` is 256 samples x 8 tables x 8 ids a bag.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from scratchkit.sim.checks import check_file_ids


def table_offsets(table_sizes) -> np.ndarray:
    """Start of each table in the global id space: [0, n0, n0+n1, ...] (one entry per table)."""
    return np.concatenate([[0], np.cumsum(table_sizes, dtype=np.int64)[:-1]]).astype(np.int64)


def batch_trace(batch, offsets: np.ndarray) -> np.ndarray:
    """The global ids one batch touches, in access order (sample-major): [lookups]."""
    ids, sample, table = [], [], []
    for t, (t_ids, t_offsets) in enumerate(zip(batch.ids, batch.offsets)):
        bag_sizes = np.diff(np.append(t_offsets, len(t_ids)))  # [B]
        ids.append(t_ids + offsets[t])
        sample.append(np.repeat(np.arange(batch.batch_size), bag_sizes))
        table.append(np.full(len(t_ids), t))
    ids, sample, table = (np.concatenate(a) for a in (ids, sample, table))
    order = np.lexsort((table, sample))  # stable: keeps each bag's ids in bag order
    return ids[order]


def make_trace(source, num_batches: int, start: int = 0) -> np.ndarray:
    """The trace of batches `start .. start+num_batches-1` of a batch source."""
    if num_batches <= 0:
        raise ValueError(f"number of batches must be positive, got {num_batches}")
    offsets = table_offsets(source.table_sizes)
    return np.concatenate([batch_trace(source.batch(i), offsets) for i in range(start, start + num_batches)])


def stream_trace(source, num_batches: int, path: str | Path, start: int = 0, on_batch=None) -> tuple[Path, int]:
    """Write the trace of batches `start .. start+num_batches-1` to a `.npy` a batch at a time
    (memory: one batch, whatever the length), and its `TraceLayout` beside it; returns (the
    path written, accesses)."""
    from scratchkit.data.npy_files import NpyAppender

    if num_batches <= 0:
        raise ValueError(f"number of batches must be positive, got {num_batches}")
    path = Path(path)
    path = path if path.suffix == ".npy" else path.with_name(path.name + ".npy")
    offsets = table_offsets(source.table_sizes)
    fewest, most = np.iinfo(np.int64).max, 0  # the accesses of a batch
    with NpyAppender(path, np.int64) as out:
        for i in range(start, start + num_batches):
            before = out.rows
            out.append(batch_trace(source.batch(i), offsets))
            fewest, most = min(fewest, out.rows - before), max(most, out.rows - before)
            if on_batch is not None:
                on_batch(1)
    layout = TraceLayout(num_batches, int(source.batch_size), len(source.table_sizes), fewest, most)
    layout.write(path)
    return path, out.rows


@dataclass(frozen=True)
class TraceLayout:
    """How a trace written from batches divides: `batches` batches of `samples` samples, each
    looking up every one of `tables` tables; a batch's lookups range over `fewest` .. `most`
    (equal where every bag of a table has one size, as in the profiles and Criteo)."""

    batches: int
    samples: int
    tables: int
    fewest: int
    most: int

    @staticmethod
    def path_of(trace: str | Path) -> Path:
        """Where a trace's layout lives: `ids.npy` -> `ids.layout.json`."""
        return Path(trace).with_suffix(".layout.json")

    @property
    def batch_lookups(self) -> int | None:
        """Lookups in every batch, or None where batches differ (no one cut fits them all)."""
        return self.fewest if self.fewest == self.most else None

    def describe(self) -> str:
        """'16,384 lookups a batch (256 samples x 8 tables x 8 ids a bag)'."""
        if self.batch_lookups is None:
            return f"{self.fewest:,} to {self.most:,} lookups a batch ({self.samples} samples x {self.tables} tables)"
        bag, rest = divmod(self.fewest, self.samples * self.tables)
        per_bag = f" x {bag} ids a bag" if not rest else f", {self.fewest / self.samples / self.tables:.2f} ids a bag"
        return f"{self.fewest:,} lookups a batch ({self.samples} samples x {self.tables} tables{per_bag})"

    def write(self, trace: str | Path) -> Path:
        path = self.path_of(trace)
        path.write_text(json.dumps({"written_by": "scratchkit trace", **asdict(self)}, indent=1) + "\n")
        return path

    @classmethod
    def read(cls, trace: str | Path, accesses: int | None = None) -> "TraceLayout | None":
        """The layout beside `trace`, or None where there is none. `accesses`: the trace's length,
        which a layout of another trace (left beside a file written since) would not match."""
        path = cls.path_of(trace)
        if not path.exists():
            return None
        try:
            fields = json.loads(path.read_text())
            layout = cls(**{k: int(fields[k]) for k in ("batches", "samples", "tables", "fewest", "most")})
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: not a trace layout ({error}); delete it, or write the trace again") from None
        if accesses is not None and not layout.batches * layout.fewest <= accesses <= layout.batches * layout.most:
            raise ValueError(
                f"{path} describes {layout.batches} batches of {layout.describe()}, but {Path(trace).name} holds "
                f"{accesses:,} lookups: the layout is another trace's; delete it, or write the trace again"
            )
        return layout


def write_trace(trace: np.ndarray, path: str | Path) -> Path:
    path = Path(path)
    np.save(path, np.ascontiguousarray(trace, dtype=np.int64))
    return path if path.suffix == ".npy" else path.with_name(path.name + ".npy")


WHAT_A_TRACE_IS = "a trace is a .npy file of a 1-D int64 array of ids (`scratchkit trace` writes one)"


def check_trace_file(path: str | Path, hint: str = "") -> Path:
    """Refuse, in one line naming it, a path that cannot hold a trace: missing, a folder, an
    `.npz`, a text or TSV file (`hint` is added to that line). Reads the first bytes only."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"trace file {path} does not exist")
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not a trace file: {WHAT_A_TRACE_IS}{hint}")
    with open(path, "rb") as file:
        magic = file.read(6)
    if magic.startswith(b"PK"):  # a zip: np.savez's archive of arrays
        raise ValueError(f"{path} is an .npz archive, not a single array: {WHAT_A_TRACE_IS}{hint}")
    if magic != b"\x93NUMPY":  # text, a TSV, a pickle, anything else
        raise ValueError(f"{path} is not a .npy file ({_looks_like(path)}): {WHAT_A_TRACE_IS}{hint}")
    return path


def read_trace(path: str | Path) -> np.ndarray:
    """Load and check a trace file: a `.npy` holding a 1-D, non-empty, non-negative int64 array.
    Anything else (a folder, an `.npz`, a text or TSV file) is refused in one line naming it."""
    path = check_trace_file(path)
    try:
        trace = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:  # Python objects inside, a truncated file
        reason = "it holds Python objects" if "pickle" in str(error) else str(error).split(". ")[0]
        raise ValueError(f"{path} is not a trace ({reason}): {WHAT_A_TRACE_IS}") from None
    check_file_ids(trace, path)
    if trace.size == 0:
        raise ValueError(f"{path}: the trace is empty: there are no accesses to simulate")
    if trace.min() < 0:
        raise ValueError(f"{path}: ids must be >= 0; position {int(np.argmin(trace))} holds {int(trace.min())}")
    return trace


def _looks_like(path: Path) -> str:
    """A few words on what a non-.npy file seems to be, for the error message."""
    with open(path, "rb") as file:
        head = file.read(200)
    if not head:
        return "it is empty"
    try:
        line = head.decode("utf-8").splitlines()[0]
    except (UnicodeDecodeError, IndexError):
        return "binary data"
    return f"it is text, starting {line[:30]!r}"
