"""The Criteo TSV loader: transforms checked against a plain-Python reading of the same lines."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scratchkit.data.criteo import load_criteo

from scratchkit.data.samples import KAGGLE_SAMPLE as SAMPLE, PLACE_IT

SIZES = [
    7,
    11,
    13,
    1000,
    2,
    3,
    5,
    17,
    19,
    23,
    29,
    31,
    37,
    41,
    43,
    47,
    53,
    59,
    61,
    67,
    71,
    73,
    79,
    83,
    89,
    1 << 20,
]  # 26 different sizes, so a mix-up of tables shows


def make_row(rng: np.random.Generator) -> list[str]:
    """One raw Criteo row as 40 strings: some dense fields empty or negative, some categories empty."""
    label = str(rng.integers(0, 2))
    dense = ["" if rng.random() < 0.2 else str(rng.integers(-3, 5000)) for _ in range(13)]
    cats = ["" if rng.random() < 0.15 else f"{rng.integers(0, 1 << 32):08x}" for _ in range(26)]
    return [label, *dense, *cats]


def write(path: Path, rows: list[list[str]], newline: str = "\n") -> Path:
    path.write_text("".join("\t".join(row) + newline for row in rows))
    return path


def reference(rows: list[list[str]], sizes: list[int]):
    """Plain Python, field by field: the DLRM transforms, the documented missing-value conventions."""
    labels = [float(row[0]) for row in rows]
    dense = [[np.float32(math.log1p(max(int(x), 0))) if x else np.float32(0.0) for x in row[1:14]] for row in rows]
    ids = [[int(h, 16) % sizes[t] if h else 0 for t, h in enumerate(row[14:])] for row in rows]
    return np.array(labels, np.float32), np.array(dense, np.float32), np.array(ids, np.int64)


@pytest.fixture
def rows() -> list[list[str]]:
    rng = np.random.default_rng(7)
    return [make_row(rng) for _ in range(30)]


def test_batches_match_a_field_by_field_reading(tmp_path, rows):
    data = load_criteo(write(tmp_path / "train.tsv", rows), SIZES, batch_size=8)
    labels, dense, ids = reference(rows, SIZES)
    assert data.table_sizes == tuple(SIZES) and data.num_dense == 13
    assert data.num_batches == 3  # 30 rows: 3 batches of 8, 6 rows left over
    for i, batch in enumerate(data):
        rows_i = slice(8 * i, 8 * (i + 1))
        assert batch.dense.dtype == np.float32 and batch.dense.shape == (8, 13)
        np.testing.assert_allclose(batch.dense, dense[rows_i], rtol=1e-6, atol=0)
        np.testing.assert_array_equal(batch.labels, labels[rows_i])
        assert len(batch.ids) == len(batch.offsets) == 26
        for t in range(26):
            assert batch.ids[t].dtype == np.int64 and batch.offsets[t].dtype == np.int64
            np.testing.assert_array_equal(batch.ids[t], ids[rows_i, t])
            np.testing.assert_array_equal(batch.offsets[t], np.arange(8))


def test_report_counts_what_was_filled_in_and_dropped(tmp_path, rows):
    data = load_criteo(write(tmp_path / "train.tsv", rows), SIZES, batch_size=8)
    report = data.report
    assert report.rows_loaded == report.lines_read == 30 and report.rows_skipped == 0
    assert report.dense_defaulted == sum(x == "" for row in rows for x in row[1:14])
    assert report.dense_clipped == sum(x.startswith("-") for row in rows for x in row[1:14])
    assert report.categorical_missing == sum(h == "" for row in rows for h in row[14:])
    assert report.missing_by_column.get("C26", 0) == sum(row[39] == "" for row in rows)
    assert report.rows_dropped == 6
    text = str(report)
    assert text.startswith(f"{report.source}: 30 of 30 lines loaded as rows, 0 skipped\n")
    assert "rows dropped in the incomplete last batch: 6" in text
    assert f"dense values missing, set to 0: {report.dense_defaulted} of 390" in text


def test_hand_written_line_gives_the_values_worked_out_by_hand(tmp_path):
    dense = ["", "0", "-2", "1", "2", "", "", "", "", "", "", "", "1000000"]
    cats = ["0000000f", "", "FFFFFFFF"] + [""] * 23
    data = load_criteo(write(tmp_path / "one.tsv", [["1", *dense, *cats]]), 10, batch_size=1)
    batch = data.batch(0)
    expected = np.zeros(13, np.float32)
    expected[[3, 4, 12]] = [math.log(2), math.log(3), math.log(1000001)]
    np.testing.assert_allclose(batch.dense[0], expected, rtol=1e-6)
    assert [int(batch.ids[t][0]) for t in range(3)] == [15 % 10, 0, 0xFFFFFFFF % 10]
    assert batch.labels.tolist() == [1.0]


def test_one_size_for_all_tables_equals_26_equal_sizes(tmp_path, rows):
    path = write(tmp_path / "train.tsv", rows)
    one, many = load_criteo(path, 97, batch_size=10), load_criteo(path, [97] * 26, batch_size=10)
    np.testing.assert_array_equal(one.ids, many.ids)
    assert one.table_sizes == (97,) * 26


def test_windows_line_endings_and_gzip_read_the_same(tmp_path, rows):
    plain = load_criteo(write(tmp_path / "a.tsv", rows), SIZES, batch_size=10)
    crlf = load_criteo(write(tmp_path / "b.tsv", rows, newline="\r\n"), SIZES, batch_size=10)
    gz_path = tmp_path / "c.tsv.gz"
    with gzip.open(gz_path, "wt") as f:
        f.write("".join("\t".join(row) + "\n" for row in rows))
    gz = load_criteo(gz_path, SIZES, batch_size=10)
    for other in (crlf, gz):
        np.testing.assert_array_equal(other.dense, plain.dense)
        np.testing.assert_array_equal(other.ids, plain.ids)
        np.testing.assert_array_equal(other.labels, plain.labels)


def test_batches_are_deterministic_and_bounded(tmp_path, rows):
    data = load_criteo(write(tmp_path / "train.tsv", rows), SIZES, batch_size=8)
    first, again = data.batch(1), data.batch(1)
    first.dense[:] = -1  # a caller scribbling on its batch must not change the dataset
    np.testing.assert_array_equal(again.dense, data.batch(1).dense)
    assert len(list(data)) == len(data) == 3
    with pytest.raises(IndexError, match="batch 3 out of range"):
        data.batch(3)
    with pytest.raises(IndexError):
        data.batch(-1)


def test_max_samples_stops_early_and_says_so(tmp_path, rows):
    data = load_criteo(write(tmp_path / "train.tsv", rows), SIZES, batch_size=4, max_samples=12)
    assert data.num_rows == 12 and data.report.stopped_at_max_samples
    _, dense, _ = reference(rows[:12], SIZES)
    np.testing.assert_allclose(data.dense, dense, rtol=1e-6)
    exact = load_criteo(tmp_path / "train.tsv", SIZES, batch_size=4, max_samples=30)
    assert not exact.report.stopped_at_max_samples
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="max_samples"):
            load_criteo(tmp_path / "train.tsv", SIZES, max_samples=bad)


# Each malformed kind: how to break a good row, and the message expected for line 3.
COUNT = "expected 40 tab-separated columns (label, I1-I13, C1-C26), found {}"
MALFORMED = {
    "too few columns": (lambda row: row[:-1], COUNT.format(39)),
    "too many columns": (lambda row: row + ["ab"], COUNT.format(41)),
    "non-hex category": (lambda row: row[:19] + ["zz12"] + row[20:], "column 20 (C6) 'zz12' is not hex"),
    "0x-prefixed category": (lambda row: row[:14] + ["0x1f"] + row[15:], "column 15 (C1) '0x1f' is not hex"),
    "non-integer dense": (lambda row: row[:4] + ["1.5"] + row[5:], "column 5 (I4) '1.5' is not an integer"),
    "dense with a plus": (lambda row: row[:1] + ["+3"] + row[2:], "column 2 (I1) '+3' is not an integer"),
    "lone minus": (lambda row: row[:13] + ["-"] + row[14:], "column 14 (I13) '-' is not an integer"),
    "label 2": (lambda row: ["2"] + row[1:], "column 1 (label) '2' is not 0 or 1"),
    "empty label": (lambda row: [""] + row[1:], "column 1 (label) '' is not 0 or 1"),
    "spaces not tabs": (lambda row: [" ".join(row)], COUNT.format(1)),
}


@pytest.mark.parametrize("kind", MALFORMED)
def test_malformed_line_names_file_line_and_problem(tmp_path, rows, kind):
    breaker, message = MALFORMED[kind]
    rows[2] = breaker(rows[2])
    path = write(tmp_path / "bad.tsv", rows)
    with pytest.raises(ValueError) as caught:
        load_criteo(path, SIZES, batch_size=4)
    assert str(caught.value) == f"{path}:3: {message}"


def test_a_blank_line_is_malformed_too(tmp_path, rows):
    path = tmp_path / "blank.tsv"
    path.write_text("\t".join(rows[0]) + "\n\n" + "\t".join(rows[1]) + "\n")
    with pytest.raises(ValueError, match=r"blank\.tsv:2: expected 40 .* found 1"):
        load_criteo(path, SIZES, batch_size=1)


def test_skip_leaves_bad_lines_out_and_counts_them(tmp_path, rows):
    broken = {3: "non-hex category", 7: "label 2", 8: "non-integer dense", 20: "too few columns"}
    for line_number, kind in broken.items():
        rows[line_number - 1] = MALFORMED[kind][0](rows[line_number - 1])
    path = write(tmp_path / "mixed.tsv", rows)
    data = load_criteo(path, SIZES, batch_size=2, errors="skip")
    good = [row for i, row in enumerate(rows, start=1) if i not in broken]
    labels, dense, ids = reference(good, SIZES)
    np.testing.assert_array_equal(data.labels, labels)
    np.testing.assert_allclose(data.dense, dense, rtol=1e-6)
    np.testing.assert_array_equal(data.ids, ids.T)
    report = data.report
    assert report.lines_read == 30 and report.rows_loaded == 26 and report.rows_skipped == 4
    assert dict(report.skip_reasons) == {
        "non-hex category": 1,
        "bad label": 1,
        "non-integer dense value": 1,
        "wrong column count": 1,
    }
    assert [m.split(": ")[0] for m in report.first_errors] == [f"{path}:{n}" for n in broken]
    assert "26 of 30 lines loaded as rows, 4 skipped" in str(report)
    assert f"{path}:7: column 1 (label)" in str(report)
    with pytest.raises(ValueError, match=r"mixed\.tsv:3: column 20 \(C6\)"):
        load_criteo(path, SIZES, batch_size=2)  # the default is to raise


def test_skip_keeps_only_the_first_five_messages(tmp_path, rows):
    for i in range(0, 14, 2):
        rows[i] = ["x"] + rows[i][1:]
    data = load_criteo(write(tmp_path / "t.tsv", rows), SIZES, batch_size=2, errors="skip")
    assert data.report.rows_skipped == 7 and len(data.report.first_errors) == 5


def test_bad_arguments_are_refused(tmp_path, rows):
    path = write(tmp_path / "train.tsv", rows)
    with pytest.raises(ValueError, match="unknown errors='ignore'"):
        load_criteo(path, SIZES, errors="ignore")
    with pytest.raises(ValueError, match="need 26 table sizes"):
        load_criteo(path, SIZES[:25])
    with pytest.raises(ValueError, match="table 3: size must be a positive integer, got 0"):
        load_criteo(path, SIZES[:3] + [0] + SIZES[4:])
    with pytest.raises(ValueError, match="table 0: size must be a positive integer, got -5"):
        load_criteo(path, -5)
    with pytest.raises(ValueError, match=r"table 0: size must be a positive integer, got 10\.5"):
        load_criteo(path, 10.5)
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        load_criteo(path, SIZES, batch_size=0)
    with pytest.raises(ValueError, match=r"train\.tsv: 30 rows loaded, fewer than one batch of 64"):
        load_criteo(path, SIZES, batch_size=64)


hex_or_missing = st.one_of(
    st.just(""),
    st.integers(0, (1 << 32) - 1).map(lambda v: f"{v:08x}"),
    st.integers(0, (1 << 32) - 1).map(lambda v: f"{v:X}"),
)
int_or_missing = st.one_of(st.just(""), st.integers(-(10**6), 10**12).map(str))
row_strategy = st.tuples(
    st.sampled_from("01"),
    st.lists(int_or_missing, min_size=13, max_size=13),
    st.lists(hex_or_missing, min_size=26, max_size=26),
)


@settings(max_examples=25, deadline=None)
@given(raw=st.lists(row_strategy, min_size=1, max_size=6), size=st.integers(1, 10**6))
def test_any_well_formed_rows_load_as_the_reference_reads_them(tmp_path_factory, raw, size):
    rows = [[label, *dense, *cats] for label, dense, cats in raw]
    path = write(tmp_path_factory.mktemp("h") / "h.tsv", rows)
    data = load_criteo(path, size, batch_size=1)
    labels, dense, ids = reference(rows, [size] * 26)
    np.testing.assert_array_equal(data.labels, labels)
    np.testing.assert_allclose(data.dense, dense, rtol=1e-6)
    np.testing.assert_array_equal(data.ids, ids.T)


@pytest.mark.skipif(not SAMPLE.exists(), reason=f"no Criteo Kaggle sample: {PLACE_IT}")
def test_real_kaggle_sample():
    lines = SAMPLE.read_text().splitlines()
    data = load_criteo(SAMPLE, 100_000, batch_size=128)
    assert data.num_rows == len(lines) == 7200 and len(data.table_sizes) == 26
    assert data.num_batches == 7200 // 128 and data.report.rows_dropped == 7200 % 128
    assert data.report.rows_skipped == 0
    assert 0.1 < float(data.labels.mean()) < 0.4  # Criteo Kaggle's click rate is about 1 in 4
    assert data.ids.min() >= 0 and (data.ids.max(axis=1) < 100_000).all()
    fields = [line.split("\t") for line in lines]
    assert data.report.dense_defaulted == sum(x == "" for f in fields for x in f[1:14])
    assert data.report.categorical_missing == sum(h == "" for f in fields for h in f[14:])
    labels, dense, ids = reference(fields[:200], [100_000] * 26)
    np.testing.assert_allclose(data.dense[:200], dense, rtol=1e-6)
    np.testing.assert_array_equal(data.ids[:, :200], ids.T)
    batch = data.batch(55)
    assert batch.lookups() == 128 * 26


REPO = Path(__file__).resolve().parents[1]


def load_make_samples():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_samples", REPO / "datasets" / "make_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_samples_match_their_generator():
    make_samples = load_make_samples()
    for name, text in make_samples.render().items():
        assert (REPO / "datasets" / "samples" / name).read_text() == text, f"{name}: rerun make_samples.py"


def test_synthetic_criteo_sample_loads_as_the_reference_reads_it():
    path = REPO / "datasets" / "samples" / "criteo-synthetic.tsv"
    rows = [line.split("\t") for line in path.read_text().splitlines()]
    data = load_criteo(path, SIZES, batch_size=16)
    labels, dense, ids = reference(rows, SIZES)
    assert data.num_batches == 3 and data.report.rows_skipped == 0
    assert data.report.dense_defaulted > 0 and data.report.dense_clipped > 0  # it shows both
    np.testing.assert_array_equal(data.labels, labels)
    np.testing.assert_allclose(data.dense, dense, rtol=1e-6)
    np.testing.assert_array_equal(data.ids, ids.T)
