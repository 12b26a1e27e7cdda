"""Your own data: the streaming loaders (fast path vs the line parser, blocks, derived table
sizes, the converted folder), TorchRec's .npy layout, and `scratchkit.data.open`."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import scratchkit
import scratchkit.data.loading as loading
from scratchkit.data.blocks import read_blocks
from scratchkit.data.convert import convert
from scratchkit.data.criteo import CriteoFormat, load_criteo
from scratchkit.data.criteo_native import native_loader_available
from scratchkit.data.criteo_npy import load_criteo_npy
from scratchkit.data.lines import parse_lines
from scratchkit.data.movielens import MovieLensFormat, RatingsFormat
from scratchkit.data.report import LoadReport


def criteo_rows(n: int, seed: int = 0, hashes: int = 50) -> list[list[str]]:
    """Raw rows: missing and negative counts, missing categories, few distinct hashes per
    column (so dictionaries are small and repeat)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        dense = ["" if rng.random() < 0.2 else str(rng.integers(-3, 70_000)) for _ in range(13)]
        cats = ["" if rng.random() < 0.15 else f"{rng.integers(0, hashes) * 2654435761 % 2**32:08x}" for _ in range(26)]
        rows.append([str(rng.integers(0, 2)), *dense, *cats])
    return rows


def write(path, rows, newline="\n"):
    path.write_text("".join("\t".join(r) + newline for r in rows))
    return path


FAST_READERS = [
    pytest.param(
        True, id="c++", marks=pytest.mark.skipif(not native_loader_available(), reason="no C++ compiler here")
    ),
    pytest.param(False, id="pyarrow"),
]


@pytest.mark.parametrize("native", FAST_READERS)
def test_the_fast_reader_and_the_line_parser_give_the_same_chunk(tmp_path, native):
    """The C++ loop, and pyarrow + NumPy, against the regular expressions and Python's int():
    every array equal."""
    path = write(tmp_path / "a.tsv", criteo_rows(500) + [["1", "0", *[""] * 12, "f", "ABC", *[""] * 24]])
    fmt, report = CriteoFormat(str(path), native=native), LoadReport(source=str(path))
    (block,) = read_blocks(path)
    fast = fmt.fast(block)
    twin = fmt.rows_to_chunk(parse_lines(block.text_lines(), fmt.parse_line, report))
    assert fast is not None and len(fast) == len(twin) == 501
    for name in ("labels", "dense", "sparse"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(twin, name))
    for name in twin.marks:
        np.testing.assert_array_equal(fast.marks[name], twin.marks[name])


@pytest.mark.parametrize(
    "odd",
    [
        "1\t 3" + "\t" * 38,
        "1\t0x10" + "\t" * 38,
        "1\t+3" + "\t" * 38,
        "1" + "\t" * 13 + "\tab cd12" + "\t" * 25,
        "",
        "1\t2",
    ],
)
@pytest.mark.parametrize("native", FAST_READERS)
def test_the_fast_reader_declines_a_block_with_an_odd_line(tmp_path, odd, native):
    """What pyarrow alone would accept (" 3", "0x10") or mis-split must go to the line parser."""
    rows = ["\t".join(r) for r in criteo_rows(5)]
    path = tmp_path / "odd.tsv"
    path.write_text("\n".join(rows[:2] + [odd] + rows[2:]) + "\n")
    (block,) = read_blocks(path)
    assert CriteoFormat(str(path), native=native).fast(block) is None
    with pytest.raises(ValueError, match=r"odd\.tsv:3: "):
        load_criteo(path, 7, batch_size=1)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of ~2 KB, so a small file streams through many of them."""
    monkeypatch.setattr(loading, "convert", functools.partial(convert, block_bytes=2048))


def test_many_blocks_load_as_one_and_number_lines_across_them(tmp_path, small_blocks):
    rows = criteo_rows(300, seed=1)
    whole = load_criteo(write(tmp_path / "a.tsv", rows), 1000, batch_size=8)
    assert len(list(read_blocks(tmp_path / "a.tsv", 2048))) > 20
    rows[250][5] = "1.5"  # line 251, in a late block
    path = write(tmp_path / "b.tsv", rows, newline="\r\n")
    with pytest.raises(ValueError, match=r"b\.tsv:251: column 6 \(I5\) '1\.5' is not an integer"):
        load_criteo(path, 1000, batch_size=8)
    skipped = load_criteo(path, 1000, batch_size=8, errors="skip")
    assert skipped.report.rows_skipped == 1 and skipped.report.lines_read == 300
    kept = list(range(250)) + list(range(251, 300))
    np.testing.assert_array_equal(skipped.ids, whole.ids[:, kept])
    np.testing.assert_array_equal(skipped.dense, whole.dense[kept])
    assert str(skipped.report).count("\n") == str(whole.report).count("\n") + 2


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 1 << 20])
def test_blocks_hold_whole_lines_and_number_them_as_text_mode_does(tmp_path, block_bytes):
    """Reference: Python's text mode (universal newlines) reading the whole file."""
    data = b"a\tb\r\nlonger line than seven bytes\n\nc\rd\r\n" + b"x" * 100 + b"\nlast"
    path = tmp_path / "t.tsv"
    path.write_bytes(data)
    blocks = list(read_blocks(path, block_bytes))
    assert b"".join(b.data for b in blocks) == data
    assert all(b.data.endswith(b"\n") for b in blocks[:-1])
    lines = open(path, encoding="utf-8").read().splitlines()  # noqa: SIM115
    assert [b.first_line for b in blocks] == [1 + sum(b.lines for b in blocks[:i]) for i in range(len(blocks))]
    assert sum(b.lines for b in blocks) == len(lines) == 7
    assert [line for b in blocks for line in b.text_lines().read().splitlines()] == lines


def test_max_samples_stops_inside_a_later_block(tmp_path, small_blocks):
    path = write(tmp_path / "a.tsv", criteo_rows(200, seed=2))
    data = load_criteo(path, 100, batch_size=10, max_samples=123)
    assert data.num_rows == 123 and data.report.stopped_at_max_samples
    assert data.report.lines_read == 123


def test_table_sizes_from_the_data_are_each_features_distinct_values(tmp_path):
    """Reference: Python sets and sorted lists, column by column."""
    rows = criteo_rows(400, seed=3, hashes=40)
    data = load_criteo(write(tmp_path / "a.tsv", rows), batch_size=16)
    columns = [[int(r[14 + t], 16) if r[14 + t] else 0 for r in rows] for t in range(26)]
    assert data.table_sizes == tuple(len(set(c)) for c in columns)
    for t, column in enumerate(columns):
        order = sorted(set(column))
        assert data.ids[t].tolist() == [order.index(v) for v in column]
    assert (data.ids[:, [i for i, r in enumerate(rows) if r[14] == ""]][0] == 0).all()  # missing: row 0


def test_max_rows_hashes_only_the_features_with_more_values(tmp_path):
    rows = criteo_rows(400, seed=4, hashes=40)
    for i, r in enumerate(rows):
        r[14] = f"{i:08x}"  # C1: 400 distinct values
    data = load_criteo(write(tmp_path / "a.tsv", rows), batch_size=16, max_rows=64)
    derived = load_criteo(tmp_path / "a.tsv", batch_size=16)
    assert data.table_sizes[0] == 64 and derived.table_sizes[0] == 400
    assert data.ids[0].tolist() == [i % 64 for i in range(400)]
    assert data.table_sizes[1:] == derived.table_sizes[1:] and max(data.table_sizes[1:]) <= 41
    np.testing.assert_array_equal(data.ids[1:], derived.ids[1:])
    with pytest.raises(ValueError, match="table_sizes .* or max_rows"):
        load_criteo(tmp_path / "a.tsv", 100, max_rows=64)


def test_the_temporary_folder_goes_with_the_source_and_a_cache_dir_is_reused(tmp_path, monkeypatch):
    path = write(tmp_path / "a.tsv", criteo_rows(64, seed=5))
    data = load_criteo(path, batch_size=8)
    folder = data._labels.path.parent  # noqa: SLF001
    assert folder.exists()
    data.close()
    assert not folder.exists()
    kept = load_criteo(path, batch_size=8, cache_dir=tmp_path / "cache")
    monkeypatch.setattr(loading, "convert", lambda *a, **k: pytest.fail("converted again"))
    again = load_criteo(path, batch_size=16, cache_dir=tmp_path / "cache")
    np.testing.assert_array_equal(again.ids, kept.ids)
    assert again.report.rows_loaded == 64 and again.batch_size == 16
    kept.close()
    assert (tmp_path / "cache").exists() and any((tmp_path / "cache").iterdir())


def test_movielens_fast_reader_matches_its_line_parser(tmp_path):
    lines = [
        f"{u},{m},{r},{t}"
        for u, m, r, t in [(1, 31, 2.5, 1260759144), (7, 3, 4.5, 851866703), (12, 1, 3.0, 5), (3, 60, 0.5, 9)] * 30
    ]
    path = tmp_path / "ratings.csv"
    path.write_text("\n".join(lines) + "\n")
    fmt = RatingsFormat(str(path), MovieLensFormat.RATINGS_CSV, None, 4.0)
    (block,) = read_blocks(path)
    fast = fmt.fast(block)
    twin = fmt.rows_to_chunk(parse_lines(block.text_lines(), fmt.parse_line, LoadReport(source="x")))
    for name in ("labels", "dense", "sparse"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(twin, name))


def write_torchrec_days(folder, days=2, rows=50, seed=0):
    """TorchRec's layout: day_N_{dense,sparse,labels}.npy, float32 [N,13], int32 [N,26],
    int32 [N,1]; sparse values as int32 casts of 32-bit hashes, negatives included."""
    rng = np.random.default_rng(seed)
    written = []
    for d in range(days):
        dense = np.log(rng.integers(0, 100, (rows, 13)) + 3, dtype=np.float32)
        sparse = rng.integers(-(2**31), 2**31, (rows, 26)).astype(np.int32)
        sparse[:, 3] = rng.integers(0, 5, rows)  # a small feature
        labels = rng.integers(0, 2, (rows, 1)).astype(np.int32)
        for name, array in (("dense", dense), ("sparse", sparse), ("labels", labels)):
            np.save(folder / f"day_{d}_{name}.npy", array)
        written.append((dense, sparse, labels))
    return [np.concatenate(parts) for parts in zip(*written)]


def test_torchrec_npy_days_read_as_one_dataset_with_its_hashes(tmp_path):
    dense, sparse, labels = write_torchrec_days(tmp_path)
    data = load_criteo_npy(tmp_path, batch_size=32, table_sizes=1000)
    assert (data.num_rows, data.num_batches, data.table_sizes) == (100, 3, (1000,) * 26)
    batch = data.batch(1)  # rows 32..63: spans both days
    np.testing.assert_array_equal(batch.dense, dense[32:64])
    np.testing.assert_array_equal(batch.labels, labels[32:64, 0].astype(np.float32))
    for t in range(26):  # TorchRec: sparse % hashes
        np.testing.assert_array_equal(batch.ids[t], sparse[32:64, t] % 1000)
    derived = load_criteo_npy(tmp_path, batch_size=32)
    assert derived.table_sizes[3] == len(np.unique(sparse[:, 3]))


def test_torchrec_npy_refusals_name_what_is_expected(tmp_path):
    with pytest.raises(ValueError, match="day_N_dense.npy, .* npy_preproc_criteo.py"):
        load_criteo_npy(tmp_path)
    write_torchrec_days(tmp_path, days=1)
    (tmp_path / "day_0_labels.npy").unlink()
    with pytest.raises(ValueError, match="day_0_labels.npy is missing"):
        load_criteo_npy(tmp_path)


def test_open_returns_a_source_and_a_config_that_train_as_they_are(tmp_path):
    path = write(tmp_path / "train.tsv", criteo_rows(96, seed=6))
    source, config = scratchkit.data.open("criteo", path, batch_size=8, max_rows=30)
    assert config.data.table_sizes == source.table_sizes and config.data.batch_size == 8
    assert config.data.num_dense == 13 and config.data.pooling == 1 and len(source) == 12
    assert config.cache.capacity == 3 * 8 * 1  # (D+1) x B x L, D = 2
    need = scratchkit.minimum_capacities(source, depth=2, stop=12)
    assert max(need) <= config.cache.capacity
    trainer = scratchkit.make_trainer("scratchpipe", config, source=source)
    records = list(trainer.train(12))
    trainer.close()
    assert all(r.hits == r.lookups for r in records) and all(math.isfinite(r.loss) for r in records)
    same, _ = scratchkit.data.open(f"criteo:{path}", batch_size=8, max_rows=30)
    np.testing.assert_array_equal(same.ids, source.ids)


def test_a_config_not_made_from_the_source_says_how_to_make_one(tmp_path):
    source, _ = scratchkit.data.open("criteo", write(tmp_path / "t.tsv", criteo_rows(40)), batch_size=8)
    with pytest.raises(ValueError, match=r"scratchkit\.data\.config_for\(source\)"):
        scratchkit.make_trainer("hybrid", scratchkit.get_profile("tiny"), source=source)
    with pytest.raises(ValueError, match="unknown data kind 'parquet'"):
        scratchkit.data.open("parquet:x.parquet")


def test_memory_does_not_grow_with_the_file(tmp_path, monkeypatch):
    """Peak traced memory while loading a file 4x longer stays about the same: one block at a
    time goes through, the columns go to disk (hashed tables: no dictionary to grow)."""
    import tracemalloc

    monkeypatch.setattr(loading, "convert", functools.partial(convert, block_bytes=16_384))
    load_criteo(write(tmp_path / "warm.tsv", criteo_rows(100)), 1000, batch_size=8)  # imports
    peaks = []
    for n in (500, 4000):
        path = write(tmp_path / f"{n}.tsv", criteo_rows(n, seed=n))
        tracemalloc.start()
        data = load_criteo(path, 1000, batch_size=8, progress=False)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert data.num_rows == n
    assert peaks[1] < 1.5 * peaks[0], peaks  # the whole file in memory: ~8x
