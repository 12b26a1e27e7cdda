"""Criteo as TorchRec's preprocessing leaves it: `.npy` files of dense, sparse and label columns.

What we followed (pytorch/torchrec, `torchrec/datasets/criteo.py: BinaryCriteoUtils.tsv_to_npys`
and `torchrec/datasets/scripts/npy_preproc_criteo.py`): one TSV becomes three files,

    {prefix}_dense.npy    float32 [N, 13]   log(x + 3) of the counts, a missing count read as 0
    {prefix}_sparse.npy   int32   [N, 26]   int(hex, 16) of each category, a missing one as 0
                                            (cast to int32: hashes >= 2**31 are negative)
    {prefix}_labels.npy   int32   [N, 1]    0 or 1

with prefix `day_0` .. `day_23` for Criteo Terabyte (`--dataset_name criteo_1tb`) and `train`
(and `test`) for Kaggle. `BinaryCriteoUtils.sparse_to_contiguous` may then renumber the sparse
values per column into `{prefix}_sparse_contig_freq.npy` (same shape; read here too when the
plain file is absent). TorchRec's `InMemoryBinaryCriteoIterDataPipe` takes `hashes` and trains
on `sparse % hashes`: that is `table_sizes=` here. Without it, the table sizes come from the
data as for the TSV (`scratchkit/data/row_maps.py`): a dictionary of each column's distinct
values, hashed into `max_rows` rows where a column has more.

The dense values are used as they are (TorchRec's log(x + 3), not the TSV loader's
log(1 + max(x, 0))). Days are read in order as one dataset; batches may span two days. Nothing
is loaded whole: batches are read a few rows at a time (`scratchkit/data/file_source.py`).
"""

from __future__ import annotations

import re
from pathlib import Path

from scratchkit.data.file_source import ConcatRows, FileSource
from scratchkit.data.in_memory import table_sizes_from
from scratchkit.data.lines import positive_int
from scratchkit.data.npy_files import NpyRows
from scratchkit.data.report import LoadReport
from scratchkit.data.row_maps import DistinctValues, Modulo, derive_row_maps

NUM_DENSE, NUM_CATEGORICAL = 13, 26
DEFAULT_BATCH_SIZE = 128
EXPECTED = (
    "day_N_dense.npy, day_N_sparse.npy and day_N_labels.npy (Criteo Terabyte) or "
    "train_dense.npy, train_sparse.npy and train_labels.npy (Kaggle), as TorchRec's "
    "npy_preproc_criteo.py writes them"
)


def prefixes(folder: Path) -> list[str]:
    """`day_0`, `day_1`, ... in day order if there are any, else `train`."""
    days = sorted(
        (int(m.group(1)), m.group(0)[: -len("_dense.npy")])
        for p in folder.iterdir()
        if (m := re.fullmatch(r"day_(\d+)_dense\.npy", p.name))
    )
    if days:
        return [prefix for _, prefix in days]
    if (folder / "train_dense.npy").exists():
        return ["train"]
    raise ValueError(f"{folder}: no Criteo .npy files here; expected {EXPECTED}")


def _column(folder: Path, prefix: str, *names: str) -> NpyRows:
    for name in names:
        if (folder / f"{prefix}_{name}.npy").exists():
            return NpyRows(folder / f"{prefix}_{name}.npy")
    raise ValueError(f"{folder}: {prefix}_{names[0]}.npy is missing; expected {EXPECTED}")


def load_criteo_npy(
    folder: str | Path,
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    table_sizes=None,
    max_rows: int | None = None,
    max_samples: int | None = None,
    progress: bool = True,
) -> FileSource:
    """A batch source over TorchRec's Criteo `.npy` files in `folder` (see the module's text).

    table_sizes: rows per table (one int or 26), sparse values taken modulo them (TorchRec's
                 `hashes`); None: derived from the data, at most `max_rows` a table.
    max_samples: use only the first this many samples.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise (FileNotFoundError if not folder.exists() else ValueError)(
            f"{folder} is not a folder of Criteo .npy files ({EXPECTED})"
        )
    if table_sizes is not None and max_rows is not None:
        raise ValueError("give table_sizes or max_rows, not both")
    sizes = None if table_sizes is None else table_sizes_from(table_sizes, NUM_CATEGORICAL)
    batch_size = positive_int("batch_size", batch_size)
    for name, value in (("max_rows", max_rows), ("max_samples", max_samples)):
        if value is not None:
            positive_int(name, value)
    days = prefixes(folder)
    labels = ConcatRows([_column(folder, p, "labels") for p in days], limit=max_samples)
    dense = ConcatRows([_column(folder, p, "dense") for p in days], limit=max_samples)
    sparse = ConcatRows([_column(folder, p, "sparse", "sparse_contig_freq") for p in days], limit=max_samples)
    _check_shapes(folder, labels, dense, sparse)
    maps = [Modulo(n) for n in sizes] if sizes else _derived_maps(sparse, max_rows, progress)
    n = len(labels)
    report = LoadReport(
        source=str(folder),
        num_dense=NUM_DENSE,
        num_tables=NUM_CATEGORICAL,
        lines_read=n,
        rows_loaded=n,
        batch_size=batch_size,
        rows_dropped=n % batch_size,
        stopped_at_max_samples=max_samples is not None and n == max_samples,
    )
    return FileSource(labels, dense, sparse, maps, batch_size, report=report, name=str(folder))


def _check_shapes(folder: Path, labels, dense, sparse) -> None:
    if dense.row_shape != (NUM_DENSE,) or sparse.row_shape != (NUM_CATEGORICAL,):
        raise ValueError(
            f"{folder}: dense rows must have {NUM_DENSE} values and sparse rows "
            f"{NUM_CATEGORICAL}, found {dense.row_shape} and {sparse.row_shape}"
        )
    if sparse.dtype.kind not in "iu" or labels.dtype.kind not in "iuf" or labels.row_shape not in ((), (1,)):
        raise ValueError(
            f"{folder}: sparse values must be integers and labels [N] or [N, 1]; "
            f"found sparse {sparse.dtype}, labels {labels.dtype} {labels.row_shape}"
        )


def _derived_maps(sparse: ConcatRows, max_rows: int | None, progress: bool) -> list:
    """One pass over the sparse column for each table's distinct values."""
    from tqdm import tqdm

    distinct = DistinctValues(NUM_CATEGORICAL, cap=max_rows)
    with tqdm(
        total=len(sparse),
        desc="distinct values",
        unit="row",
        unit_scale=True,
        delay=2.0,
        leave=False,
        disable=None if progress else True,
    ) as bar:
        for start in range(0, len(sparse), 1 << 18):
            rows = sparse.read(start, min(start + (1 << 18), len(sparse)))
            distinct.add(rows)
            bar.update(len(rows))
    return derive_row_maps(distinct.finish(), max_rows)


__all__ = ["load_criteo_npy", "prefixes"]
