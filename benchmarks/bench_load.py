"""Reading a Criteo TSV at any size: the kit's streaming loader beside pandas on the same file,
its peak memory, and what the full Criteo Kaggle file (11.1 GB, 45.8M lines) would take.

    .venv/bin/python benchmarks/bench_load.py                   # a 1 GB file in /tmp, 2 rounds
    .venv/bin/python benchmarks/bench_load.py --gigabytes 0.1 --rounds 1      # a quick look

The file is generated (not timed) under the temp folder, never in the repository: Criteo-shaped
lines (label, 13 counts with 20% missing and a few negative, 26 8-digit hashes with 10% missing,
Zipf within each feature's Kaggle cardinality), ~243 bytes a line like the real file.

Candidates, each in a fresh process that reports its own peak resident memory (VmHWM), in
alternating rounds (kit, pandas, kit, pandas, ...; medians):

    parse    the kit's parser alone: each 8 MB block checked and decoded by the C++ loop
             (scratchkit/data/criteo_loop.cpp; the next block on a thread meanwhile): what pandas
             does below, and more (every field checked, the hashes decoded)
    kit      load_criteo(path): the parser, plus the columns written to disk and table sizes
             derived from the data (a dictionary of every feature's distinct values)
    kit-cap  the same with max_rows=100_000 (the dictionaries capped: memory independent of N)
    pandas   pd.read_csv(path, sep="\\t", header=None, chunksize=262144): every chunk parsed,
             types inferred (hashes stay strings: pandas does less than the kit, which also
             checks every field and decodes the hashes). In chunks so memory stays bounded;
             the whole file at once would hold ~4M x 26 Python strings.
    arrow    the parser where no C++ compiler is found: 32 MB blocks split into columns by
             pyarrow, every field checked and decoded by NumPy (scratchkit/data/fields.py); once,
             after the rounds
    twin     the kit's line parser alone (what reads a block with a bad line), on the first
             50 MB: the fast paths' gain

After the rounds: random batch reads from the converted columns (batches/s; the dictionaries
searched in C++, and by NumPy, in alternating rounds), and the
extrapolation to the full Kaggle file: time = its bytes / the kit's MB/s; disk = converted bytes
per line x its lines; memory = the capped run's peak (it does not grow with the file), and for
derived sizes that peak plus 16 bytes (a value and its merge copy) per distinct value beyond this
file's, up to Kaggle's 33.8M.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

KAGGLE_BYTES = 11_147_184_845  # train.txt of the Display Advertising Challenge
KAGGLE_LINES = 45_840_617
KAGGLE_DISTINCT = 33_762_577  # sum of profiles.CRITEO_KAGGLE_CARDINALITIES
FILL = 0xFF  # a byte no line holds: removed after the lines are laid out


def write_criteo_tsv(path: str, target_bytes: int, seed: int = 0, chunk: int = 1 << 18) -> int:
    """Criteo-shaped lines until `target_bytes`; returns the lines written. Vectorised: each
    chunk is laid out as a byte matrix (fields at fixed places, FILL where a field is shorter),
    then the FILL bytes are dropped, which leaves the lines."""
    from scratchkit.profiles import CRITEO_KAGGLE_CARDINALITIES as sizes

    rng = np.random.default_rng(seed)
    hex_digits = np.frombuffer(b"0123456789abcdef", np.uint8)
    written = lines = 0
    with open(path, "wb") as out:
        while written < target_bytes:
            n = chunk
            cols = [(rng.random(n) < 0.25).astype(np.uint8)[:, None] + ord("0")]  # label
            for j in range(13):
                value = np.minimum(rng.zipf(1.3, n) - 1, 10**9)
                if j == 1:
                    value = value - (rng.random(n) < 0.1) * 3  # I2 goes negative
                cols += [np.full((n, 1), ord("\t"), np.uint8), _decimal(value, rng.random(n) < 0.2)]
            for size in sizes:
                h = (rng.zipf(1.1, n) % size * 2654435761 % (1 << 32)).astype(np.uint64)
                nibbles = (h[:, None] >> np.arange(28, -1, -4, dtype=np.uint64)) & np.uint64(15)
                text = hex_digits[nibbles.astype(np.int64)]
                text[rng.random(n) < 0.1] = FILL
                cols += [np.full((n, 1), ord("\t"), np.uint8), text]
            cols.append(np.full((n, 1), ord("\n"), np.uint8))
            matrix = np.concatenate(cols, axis=1)
            data = matrix[matrix != FILL].tobytes()
            out.write(data)
            written += len(data)
            lines += n
    return lines


def _decimal(value: np.ndarray, missing: np.ndarray, width: int = 11) -> np.ndarray:
    """[n, width] bytes of each integer right-aligned over FILL (FILL only where missing)."""
    negative = value < 0
    magnitude = np.abs(value)
    digits = np.stack([(magnitude // 10**k) % 10 for k in range(width - 2, -1, -1)], axis=1)
    text = (digits + ord("0")).astype(np.uint8)
    count = np.maximum(1, np.floor(np.log10(np.maximum(magnitude, 1))).astype(int) + 1)
    place = np.arange(width - 1)
    text[place[None, :] < (width - 1 - count)[:, None]] = FILL
    sign = np.where(negative, ord("-"), FILL).astype(np.uint8)[:, None]
    out = np.concatenate([sign, text], axis=1)
    out[missing] = FILL
    return out


def child(mode: str, path: str, twin_bytes: int) -> dict:
    import pandas  # noqa: F401  (imports are not timed: a few tenths of a second each)
    import pyarrow.csv  # noqa: F401

    from scratchkit.data.criteo_native import native_loader_available

    native = native_loader_available()  # built (first run) or loaded before the clock
    started, cpu_started = time.perf_counter(), time.process_time()
    extra, cpu = {}, None  # cpu: set where more follows the load
    if mode in ("parse", "arrow"):
        from scratchkit.data.blocks import read_blocks
        from scratchkit.data.convert import _split_ahead  # noqa: PLC2701
        from scratchkit.data.criteo import CriteoFormat

        fmt, rows = CriteoFormat(path, native=mode == "parse"), 0
        for block, columns in _split_ahead(read_blocks(path, fmt.block_bytes), fmt):
            chunk = fmt.fast(block, columns)
            assert chunk is not None and len(chunk) == block.lines
            rows += len(chunk)
        seconds, size = time.perf_counter() - started, os.path.getsize(path)
    elif mode in ("kit", "kit-cap"):
        from scratchkit.data.criteo import load_criteo

        extra["native"] = native
        source = load_criteo(path, max_rows=100_000 if mode == "kit-cap" else None, progress=False)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        rows = source.num_rows
        folder = Path(source._labels.path).parent  # noqa: SLF001
        extra["converted_bytes"] = sum(f.stat().st_size for f in folder.iterdir())
        extra["distinct"] = int(sum(source.table_sizes))
        extra.update(batch_reads(source))
        source.close()
        size = os.path.getsize(path)
    elif mode == "pandas":
        import pandas as pd

        rows = 0
        for frame in pd.read_csv(path, sep="\t", header=None, chunksize=1 << 18):
            rows += len(frame)
        seconds, size = time.perf_counter() - started, os.path.getsize(path)
    else:  # twin
        from scratchkit.data.blocks import read_blocks
        from scratchkit.data.criteo import CriteoFormat
        from scratchkit.data.lines import parse_lines
        from scratchkit.data.report import LoadReport

        fmt, report, rows, size = CriteoFormat(path), LoadReport(source=path), 0, 0
        for block in read_blocks(path, 1 << 20):  # 1 MB: stops near twin_bytes
            rows += len(fmt.rows_to_chunk(parse_lines(block.text_lines(), fmt.parse_line, report)))
            size += len(block.data)
            if size >= twin_bytes:
                break
        seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started if cpu is None else cpu
    return {
        "mode": mode,
        "seconds": seconds,
        "rows": rows,
        "bytes": size,
        "cpu_seconds": cpu,
        "peak_mb": peak_rss_mb(),
        **extra,
    }


def batch_reads(source, picks: int = 1000, rounds: int = 3) -> dict:
    """Random batches a second: the dictionaries searched in C++ (`RowMapper`, as loaded) and
    by NumPy's searchsorted (its twin), in alternating rounds; medians."""
    from scratchkit.data.row_maps import RowMapper

    indices = np.random.default_rng(0).integers(0, len(source), picks).tolist()
    mappers = {
        "batches_per_s": RowMapper(source.row_maps),
        "batches_per_s_numpy": RowMapper(source.row_maps, native=False),
    }
    speeds: dict[str, list[float]] = {key: [] for key in mappers}
    for _ in range(rounds):
        for key, mapper in mappers.items():
            source._rows_of = mapper  # noqa: SLF001
            t = time.perf_counter()
            for i in indices:
                source.batch(i)
            speeds[key].append(picks / (time.perf_counter() - t))
    return {key: statistics.median(v) for key, v in speeds.items()}


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM). Not ru_maxrss: that survives exec, so a
    child would report its parent's peak (the generator's) when it used less."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_child(mode: str, path: str, twin_bytes: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--path", path, "--twin-bytes", str(twin_bytes)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    from scratchkit.measure.record import add_record_option  # light: no torch for the children

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gigabytes", type=float, default=1.0, help="size of the generated file")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    parser.add_argument("--twin-mb", type=float, default=50, help="MB the line parser reads")
    parser.add_argument("--keep", action="store_true", help="keep the generated file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--twin-bytes", type=int, default=0, help=argparse.SUPPRESS)
    add_record_option(parser, "load")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.path, args.twin_bytes)))
        return
    from scratchkit.measure.record import RunRecord

    record = RunRecord.of_run(__file__, argv)
    try:
        import pandas  # noqa: F401
    except ImportError:
        sys.exit("pandas is needed for the comparison: .venv/bin/pip install -e '.[bench]'")
    path = os.path.join(tempfile.gettempdir(), f"scratchkit-criteo-{args.gigabytes:g}GB.tsv")
    if not os.path.exists(path) or os.path.getsize(path) < args.gigabytes * 1e9:
        t = time.perf_counter()
        lines = write_criteo_tsv(path, int(args.gigabytes * 1e9))
        print(
            f"generated {path}: {os.path.getsize(path) / 1e9:.2f} GB, {lines:,} lines "
            f"({time.perf_counter() - t:.0f} s, not timed)"
        )
    twin_bytes = int(args.twin_mb * 1e6)
    runs: dict[str, list[dict]] = {}
    for r in range(args.rounds):
        for mode in ("parse", "pandas", "kit", "kit-cap"):
            result = run_child(mode, path, twin_bytes)
            runs.setdefault(mode, []).append(result)
            print(
                f"round {r + 1} {mode:8s} {result['seconds']:7.1f} s  CPU {result['cpu_seconds']:6.1f} s"
                f"  peak {result['peak_mb']:7.0f} MB",
                flush=True,
            )
    runs["arrow"] = [run_child("arrow", path, twin_bytes)]
    runs["twin"] = [run_child("twin", path, twin_bytes)]
    record.keep(args.record, {"gigabytes": args.gigabytes, "rounds": args.rounds, "medians": report(runs, path)})
    if not args.keep:
        os.remove(path)


def report(runs: dict[str, list[dict]], path: str) -> dict:
    """Print the comparison. -> per mode: rows/s, MB/s, peak MB, seconds, CPU seconds (medians)."""

    def median(mode, key):
        return statistics.median(r[key] for r in runs[mode])

    print(
        f"\nfile {path}: {runs['kit'][0]['bytes'] / 1e9:.2f} GB, {runs['kit'][0]['rows']:,} lines; "
        f"medians of {len(runs['kit'])} rounds; the kit's blocks read by "
        f"{'the C++ loop' if runs['kit'][0]['native'] else 'pyarrow (no C++ compiler found)'}"
    )
    speed, figures = {}, {}
    for mode in ("parse", "pandas", "kit", "kit-cap", "arrow", "twin"):
        seconds = median(mode, "seconds")
        rows, size = runs[mode][0]["rows"], runs[mode][0]["bytes"]
        speed[mode] = size / seconds
        figures[mode] = {
            "rows/s": rows / seconds,
            "MB/s": size / seconds / 1e6,
            "peak MB": median(mode, "peak_mb"),
            "seconds": seconds,
            "CPU seconds": median(mode, "cpu_seconds"),
        }
        print(
            f"  {mode:8s} {rows / seconds:12,.0f} rows/s {size / seconds / 1e6:7.1f} MB/s  "
            f"peak {median(mode, 'peak_mb'):6.0f} MB  ({seconds:.1f} s, CPU "
            f"{median(mode, 'cpu_seconds'):.1f} s in all threads)"
        )
    for mode in ("parse", "kit"):
        ratios = [p["seconds"] / k["seconds"] for k, p in zip(runs[mode], runs["pandas"])]
        cpu = [p["cpu_seconds"] / k["cpu_seconds"] for k, p in zip(runs[mode], runs["pandas"])]
        print(
            f"  {mode} / pandas speed: {statistics.median(ratios):.2f}x wall (rounds: "
            f"{', '.join(f'{x:.2f}' for x in ratios)}), {statistics.median(cpu):.2f}x CPU time"
        )
    print(
        f"  parse / the pyarrow path: {speed['parse'] / speed['arrow']:.1f}x; "
        f"/ the line parser alone: {speed['parse'] / speed['twin']:.1f}x"
    )
    kit = runs["kit"][0]
    per_line = kit["converted_bytes"] / kit["rows"]
    print(
        f"  converted columns: {kit['converted_bytes'] / 1e9:.2f} GB ({per_line:.0f} bytes a line); "
        f"random batch reads: {median('kit', 'batches_per_s'):,.0f} batches/s of 128 "
        f"({median('kit', 'batches_per_s_numpy'):,.0f} with NumPy's searchsorted)"
    )
    hours = KAGGLE_BYTES / speed["kit"] / 60
    derived = median("kit", "peak_mb") + 16 * max(0, KAGGLE_DISTINCT - kit["distinct"]) / 2**20
    print(
        f"full Criteo Kaggle ({KAGGLE_BYTES / 1e9:.1f} GB, {KAGGLE_LINES:,} lines): about "
        f"{hours:.0f} min to convert at {speed['kit'] / 1e6:.0f} MB/s (pandas: "
        f"{KAGGLE_BYTES / speed['pandas'] / 60:.0f} min just to parse), "
        f"{per_line * KAGGLE_LINES / 1e9:.1f} GB of columns on disk, peak memory "
        f"{median('kit-cap', 'peak_mb'):.0f} MB with max_rows=100000 (flat in N) and about "
        f"{derived:,.0f} MB with every distinct value ({KAGGLE_DISTINCT:,}) in a dictionary"
    )
    return figures


if __name__ == "__main__":
    main()
