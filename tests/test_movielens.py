"""The MovieLens loader: u.data and ratings.csv written here, checked against a plain reading."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scratchkit.data.movielens import MovieLensFormat, load_movielens

# (user, movie, rating, timestamp): ids from 1 like MovieLens, half stars only in ratings.csv
RATINGS = [
    (196, 242, 3, 881250949),
    (186, 302, 3, 891717742),
    (22, 377, 1, 878887116),
    (244, 51, 2, 880606923),
    (166, 346, 1, 886397596),
    (298, 474, 4, 884182806),
    (115, 265, 2, 881171488),
    (253, 465, 5, 891628467),
    (305, 451, 3, 886324817),
    (6, 86, 3, 883603013),
    (62, 257, 2, 879372434),
    (286, 1014, 5, 879781125),
]
HALF_STARS = [
    (1, 31, 2.5, 1260759144),
    (1, 1029, 3.0, 1260759179),
    (1, 1061, 3.5, 1260759182),
    (2, 10, 4.0, 835355493),
    (2, 17, 5.0, 835355681),
    (3, 60, 0.5, 1298861675),
    (7, 3, 4.5, 851866703),
    (7, 1, 3.9, 851866704),
]


def write_u_data(path, rows):
    path.write_text("".join(f"{u}\t{m}\t{r}\t{t}\n" for u, m, r, t in rows))
    return path


def write_csv(path, rows, header="userId,movieId,rating,timestamp"):
    path.write_text(header + "\n" + "".join(f"{u},{m},{r},{t}\n" for u, m, r, t in rows))
    return path


def check_against_reference(data, rows, threshold=4.0):
    """Every loaded row against a direct reading of the tuples written."""
    times = [t for *_, t in rows]
    t0, t1 = min(times), max(times)
    n = data.num_batches * data.batch_size
    batches = list(data)
    users = np.concatenate([b.ids[0] for b in batches])
    movies = np.concatenate([b.ids[1] for b in batches])
    labels = np.concatenate([b.labels for b in batches])
    dense = np.concatenate([b.dense for b in batches])
    assert users.tolist() == [u for u, *_ in rows][:n]
    assert movies.tolist() == [m for _, m, *_ in rows][:n]
    assert labels.tolist() == [1.0 if r >= threshold else 0.0 for _, _, r, _ in rows][:n]
    assert dense.shape == (n, 1) and dense.dtype == np.float32
    np.testing.assert_allclose(dense[:, 0], [(t - t0) / (t1 - t0) for t in times][:n], rtol=1e-6, atol=1e-7)
    for b in batches:
        for offsets in b.offsets:
            np.testing.assert_array_equal(offsets, np.arange(data.batch_size))


def test_u_data_reads_as_written(tmp_path):
    data = load_movielens(write_u_data(tmp_path / "u.data", RATINGS), batch_size=5)
    assert data.table_sizes == (max(u for u, *_ in RATINGS) + 1, max(m for _, m, *_ in RATINGS) + 1)
    assert data.num_dense == 1 and data.num_batches == 2
    check_against_reference(data, RATINGS)
    report = data.report
    assert report.rows_loaded == 12 and report.rows_dropped == 2 and report.rows_skipped == 0
    assert "rows dropped in the incomplete last batch: 2" in str(report)
    assert "no values missing or changed" in str(report)


def test_ratings_csv_reads_as_written_with_half_stars(tmp_path):
    data = load_movielens(write_csv(tmp_path / "ratings.csv", HALF_STARS), batch_size=4)
    check_against_reference(data, HALF_STARS)
    assert data.labels.tolist() == [0, 0, 0, 1, 1, 0, 1, 0]  # 4.0 is liked, 3.9 is not
    assert data.report.lines_read == 8  # the header is not a data line


def test_threshold_and_table_sizes_can_be_given(tmp_path):
    path = write_csv(tmp_path / "ratings.csv", HALF_STARS)
    data = load_movielens(path, batch_size=8, like_threshold=3.0, table_sizes=(10, 2000))
    check_against_reference(data, HALF_STARS, threshold=3.0)
    assert data.table_sizes == (10, 2000)
    with pytest.raises(
        ValueError,
        match=r"ratings\.csv:3: column 2 \(movieId\) '1029' does not fit "
        r"the movies table of 1029 rows",
    ):
        load_movielens(path, batch_size=8, table_sizes=(10, 1029))  # rows 0..1028: id 1029 is one too many
    skipped = load_movielens(path, batch_size=2, table_sizes=(10, 1029), errors="skip")
    assert skipped.report.skip_reasons == {"id outside table": 2}  # movies 1029 and 1061


def test_format_is_guessed_from_the_name_or_given(tmp_path):
    odd_name = write_u_data(tmp_path / "ratings.txt", RATINGS)
    with pytest.raises(ValueError, match=r"ratings\.txt: cannot tell the MovieLens format"):
        load_movielens(odd_name, batch_size=4)
    check_against_reference(load_movielens(odd_name, batch_size=4, format="u.data"), RATINGS)
    assert MovieLensFormat.guess("ml-25m/ratings.csv.gz") is MovieLensFormat.RATINGS_CSV
    with pytest.raises(ValueError, match="unknown MovieLens format 'dat'"):
        load_movielens(odd_name, format="dat")


U_DATA_ERRORS = {
    "three columns": ("1\t2\t3", "expected 4 tab-separated columns (user id, item id, rating, timestamp), found 3"),
    "commas in u.data": ("1,2,3,4", "expected 4 tab-separated columns (user id, item id, rating, timestamp), found 1"),
    "negative user": ("-1\t2\t3\t4", "column 1 (user id) '-1' is not a non-negative integer"),
    "word item": ("1\tabc\t3\t4", "column 2 (item id) 'abc' is not a non-negative integer"),
    "empty rating": ("1\t2\t\t4", "column 3 (rating) '' is not a non-negative number"),
    "rating text": ("1\t2\tfive\t4", "column 3 (rating) 'five' is not a non-negative number"),
    "float timestamp": ("1\t2\t3\t4.5", "column 4 (timestamp) '4.5' is not an integer"),
}


@pytest.mark.parametrize("kind", U_DATA_ERRORS)
def test_u_data_malformed_line_names_file_and_line(tmp_path, kind):
    line, message = U_DATA_ERRORS[kind]
    path = tmp_path / "u.data"
    rows = [f"{u}\t{m}\t{r}\t{t}" for u, m, r, t in RATINGS]
    rows[4] = line
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(ValueError) as caught:
        load_movielens(path, batch_size=2)
    assert str(caught.value) == f"{path}:5: {message}"


def test_csv_errors_count_the_header_line(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text("userId,movieId,rating,timestamp\n1,2,3.5,100\n1,2,x,100\n1,2,3\n4,5,5,200\n")
    with pytest.raises(ValueError, match=r"^.*ratings\.csv:3: column 3 \(rating\) 'x' is not a non-negative number$"):
        load_movielens(path, batch_size=1)
    data = load_movielens(path, batch_size=1, errors="skip")
    assert data.num_rows == 2 and data.report.lines_read == 4
    assert data.report.skip_reasons == {"bad rating": 1, "wrong column count": 1}
    assert data.report.first_errors == [
        f"{path}:3: column 3 (rating) 'x' is not a non-negative number",
        f"{path}:4: expected 4 comma-separated columns (userId, movieId, rating, timestamp), found 3",
    ]


def test_a_wrong_or_missing_header_always_raises(tmp_path):
    no_header = tmp_path / "ratings.csv"
    no_header.write_text("1,31,2.5,1260759144\n")
    for errors in ("raise", "skip"):
        with pytest.raises(
            ValueError,
            match=r"ratings\.csv:1: expected the header "
            r"'userId,movieId,rating,timestamp', found '1,31,2.5,1260759144'",
        ):
            load_movielens(no_header, batch_size=1, errors=errors)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"empty\.csv:1: expected the header .* found ''"):
        load_movielens(empty, batch_size=1)


def test_bad_arguments_are_refused(tmp_path):
    path = write_u_data(tmp_path / "u.data", RATINGS)
    with pytest.raises(ValueError, match="need 2 table sizes"):
        load_movielens(path, table_sizes=(400, 2000, 5))
    with pytest.raises(ValueError, match="table 1: size must be a positive integer, got 0"):
        load_movielens(path, table_sizes=(400, 0))
    with pytest.raises(ValueError, match="like_threshold must be a finite number"):
        load_movielens(path, like_threshold=float("nan"))
    with pytest.raises(ValueError, match=r"u\.data: 12 rows loaded, fewer than one batch of 128"):
        load_movielens(path)
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got -1"):
        load_movielens(path, batch_size=-1)


def test_max_samples_and_equal_timestamps(tmp_path):
    same_time = [(u, m, r, 5) for u, m, r, _ in RATINGS]
    data = load_movielens(write_u_data(tmp_path / "u.data", same_time), batch_size=3, max_samples=6)
    assert data.num_rows == 6 and data.report.stopped_at_max_samples
    assert (data.dense == 0).all()  # no spread in time: the feature is 0, not a division by zero


def test_time_feature_spans_zero_to_one(tmp_path):
    rows = [(1, 1, 5, 10), (2, 2, 1, 40), (3, 3, 4, 20), (4, 4, 2, 30)]
    data = load_movielens(write_u_data(tmp_path / "u.data", rows), batch_size=4)
    np.testing.assert_allclose(data.batch(0).dense[:, 0], [0, 1, 1 / 3, 2 / 3], rtol=1e-7)


SAMPLES = Path(__file__).resolve().parents[1] / "datasets" / "samples"


@pytest.mark.parametrize(
    "name, separator, header", [("movielens-synthetic-u.data", "\t", 0), ("movielens-synthetic-ratings.csv", ",", 1)]
)
def test_synthetic_samples_load_as_written(name, separator, header):
    lines = (SAMPLES / name).read_text().splitlines()[header:]
    rows = [(int(u), int(m), float(r), int(t)) for u, m, r, t in (line.split(separator) for line in lines)]
    data = load_movielens(SAMPLES / name, batch_size=8)
    assert data.report.rows_loaded == len(rows) and data.report.rows_skipped == 0
    check_against_reference(data, rows)
