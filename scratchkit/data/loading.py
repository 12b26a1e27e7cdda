"""What both text loaders do around the format: find or make the converted folder, show a
progress bar, write what the conversion found, and open the result as a FileSource.

A conversion is named by the file (path, size, modification time) and every option that changes
its output; with `cache_dir` the folder is kept and a second load of the same file with the same
options reads it back instead of the text (`meta.json`, written last, says it is complete).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from scratchkit.data.convert import ColumnFiles, cache_key, convert, output_folder, progress_bar, read_meta, write_meta
from scratchkit.data.file_source import FileSource
from scratchkit.data.npy_files import NpyRows
from scratchkit.data.report import LoadReport


def convert_file(
    path: str | Path,
    fmt,
    *,
    options: dict,
    errors,
    max_samples: int | None,
    cache_dir,
    progress: bool,
    on_chunk: Callable,
    finish: Callable[[Path], dict],
    first_line: int = 1,
    skip_bytes: int = 0,
) -> tuple[Path, bool, dict]:
    """(folder, whether it is temporary, meta) of `path` converted by `fmt`.

    `on_chunk(chunk)` sees each chunk kept; `finish(folder)` returns what the format needs to
    open the columns again (row maps, dense scaling), stored in the meta."""
    if not Path(path).exists():
        raise FileNotFoundError(f"data file {path} does not exist")
    if Path(path).is_dir():
        raise ValueError(f"{path} is a folder, not a {fmt.name} file")
    key = cache_key(path, fmt.name, dict(options, errors=errors.value, max_samples=max_samples))
    folder, temporary = output_folder(path, key, cache_dir)
    meta = None if temporary else read_meta(folder, key)
    if meta is not None:
        return folder, temporary, meta
    try:
        report = LoadReport(source=str(path), num_dense=fmt.num_dense, num_tables=fmt.num_tables)
        files = ColumnFiles(folder, fmt.num_dense, fmt.dense_dtype, fmt.num_tables)
        with progress_bar(path, progress) as bar:
            rows = convert(
                path,
                fmt,
                files,
                report,
                errors=errors,
                max_samples=max_samples,
                first_line=first_line,
                skip_bytes=skip_bytes,
                on_bytes=bar.update,
                on_chunk=on_chunk,
            )
        meta = {"key": key, "rows": rows, "report": report.to_dict(), **(finish(folder) if rows else {})}
        write_meta(folder, meta)
    except BaseException:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder, temporary, meta


def open_columns(
    folder: Path, temporary: bool, meta: dict, row_maps: list, batch_size: int, dense_transform=None
) -> FileSource:
    """The converted folder as a batch source of `batch_size`; fewer rows than one batch is an
    error that prints the report (it says what was skipped)."""
    report = LoadReport.from_dict(meta["report"])
    report.batch_size = batch_size
    report.rows_dropped = meta["rows"] % batch_size
    if meta["rows"] < batch_size:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
        raise ValueError(f"{report.source}: {meta['rows']} rows loaded, fewer than one batch of {batch_size}\n{report}")
    columns = [NpyRows(folder / f"{name}.npy") for name in ("labels", "dense", "sparse")]
    return FileSource(
        *columns,
        row_maps,
        batch_size,
        report=report,
        dense_transform=dense_transform,
        name=report.source,
        temporary_folder=folder if temporary else None,
    )


__all__ = ["convert_file", "open_columns"]
