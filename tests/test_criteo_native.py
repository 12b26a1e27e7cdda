"""The C++ Criteo decoder (criteo_loop.cpp) against the line parser, its twin: on every block, it
gives the line parser's Chunk or declines (and then only where the line parser raises, or for
the two things it leaves to the line parser: a count of more than 18 digits, a lone "\\r").
The pyarrow path (the fallback without a compiler) is held to the same Chunk where it accepts.
A loop with one deliberate slip in it (a mutant) must fail the same comparison."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from scratchkit.data.blocks import Block, count_lines
from scratchkit.data.criteo import CriteoFormat, load_criteo
from scratchkit.data.criteo_native import LOOP, decode_block, native_loader_available
from scratchkit.data.lines import MalformedLineError, parse_lines
from scratchkit.data.report import LoadReport
from scratchkit.native import CLibrary
from test_criteo import MALFORMED

pytestmark = pytest.mark.skipif(not native_loader_available(), reason="no C++ compiler here")
COUNTS = ["3", "", "-2", "0", "65535", "65536", "123456789", "-0", "007", "", "1", "-70000", "99"]
HEXES = [f"{t * 2654435761 % 2**32:08x}" for t in range(26)]
HEXES[1], HEXES[5], HEXES[7] = "", "DEADBEEF", "f"


def line(label="1", counts=COUNTS, hexes=HEXES, at=None, put=None) -> str:
    fields = [label, *counts, *hexes]
    if at is not None:
        fields[at] = put
    return "\t".join(fields)


GOOD = [line(), line("0", [""] * 13, [""] * 26), line(counts=["1"] * 13, hexes=["00000000"] * 26)]
EDGES = {  # name: the block's text; each is checked as is, with \r\n endings, and unterminated
    "good": GOOD,
    "18-digit count": GOOD + [line(at=3, put="999999999999999999")],
    "19-digit count": GOOD + [line(at=3, put="1234567890123456789")],
    "25-digit count": GOOD + [line(at=9, put="9" * 25)],
    "large counts": [line(at=j, put=v) for j, v in [(1, "1000000000000"), (2, "-123456789012"), (13, "4294967296")]],
    "9-digit hex": GOOD + [line(at=20, put="123456789")],
    "16-digit hex": GOOD + [line(at=39, put="fFfFfFfFfFfFfFfF")],
    "17-digit hex": GOOD + [line(at=39, put="1" * 17)],
    "blank line": GOOD[:1] + [""] + GOOD[1:],
    "only a label": GOOD + ["1"],
    "label 01": GOOD + [line("01")],
    "trailing tab": GOOD + [line() + "\t"],
    "space after count": GOOD + [line(at=4, put="3 ")],
    "exponent": GOOD + [line(at=4, put="1e5")],
    "minus in the middle": GOOD + [line(at=4, put="3-4")],
    "non-ascii": GOOD + [line(at=30, put="\xe9")],
    "nul": GOOD + [line(at=30, put="\0")],
}
for _kind, (_breaker, _) in MALFORMED.items():
    EDGES[_kind] = GOOD + ["\t".join(_breaker(line().split("\t")))]


def blocks_of(lines: list[str]) -> list[bytes]:
    text = "\n".join(lines)
    return [(text + "\n").encode(), (text + "\r\n").replace("\n", "\r\n").encode(), text.encode()]


def twin(data: bytes) -> tuple[list[list[str]] | None, object]:
    """(the rows, the Chunk) as the line parser reads the block; (None, None) if a line is bad."""
    fmt = CriteoFormat("t.tsv", native=False)
    try:
        rows = parse_lines(Block(data, 1, count_lines(data)).text_lines(), fmt.parse_line, LoadReport(source="t.tsv"))
    except MalformedLineError:
        return None, None
    return rows, fmt.rows_to_chunk(rows)


def same_chunk(a, b) -> bool:
    return (
        len(a) == len(b)
        and all(np.array_equal(getattr(a, n), getattr(b, n)) for n in ("labels", "dense", "sparse"))
        and a.marks.keys() == b.marks.keys()
        and all(np.array_equal(a.marks[k], b.marks[k]) for k in a.marks)
    )


def disagreement(data: bytes, loop: CLibrary = LOOP) -> str | None:
    """What is wrong with the C loop's (and pyarrow's) reading of `data`, or None."""
    rows, expected = twin(data)
    block = Block(data, 1, count_lines(data))
    got = decode_block(data, block.lines, loop)
    if got is None:
        long_count = rows is not None and any(len(x.lstrip("-")) > 18 for r in rows for x in r[1:14])
        if rows is not None and not long_count and not block.lone_cr:
            return "declined a block the line parser reads"
    elif expected is None:
        return "accepted a block the line parser refuses"
    elif not same_chunk(got, expected):
        return "read the block differently from the line parser"
    elif got.sparse.dtype != (np.uint64 if any(len(h) > 8 for r in rows for h in r[14:]) else np.uint32):
        return f"sparse values as {got.sparse.dtype}"
    arrow = CriteoFormat("t.tsv", native=False).fast(block)
    if arrow is not None and (expected is None or not same_chunk(arrow, expected)):
        return "pyarrow's path read the block differently from the line parser"
    return None


@pytest.mark.parametrize("name", EDGES)
def test_every_edge_case_block_reads_as_the_line_parser_reads_it(name):
    for data in blocks_of(EDGES[name]):
        assert disagreement(data) is None, (name, data[-80:])


def test_the_loop_declines_exactly_what_the_line_parser_refuses():
    """Not vacuous: the corpus has blocks of each answer."""
    declined = {
        name
        for name in EDGES
        if decode_block(blocks_of(EDGES[name])[0], count_lines(blocks_of(EDGES[name])[0])) is None
    }
    refused = {name for name in EDGES if twin(blocks_of(EDGES[name])[0])[0] is None}
    assert refused <= declined and declined - refused == {"19-digit count", "25-digit count"}
    assert "good" not in declined and "9-digit hex" not in declined and len(refused) > 15


def test_lone_carriage_returns_are_left_to_the_line_parser():
    data = (GOOD[0] + "\r" + GOOD[1] + "\n").encode()
    assert decode_block(data, count_lines(data)) is None
    assert decode_block(data[:-1] + b"\r", 2) is None
    assert twin(data)[0] is not None


def test_large_counts_and_wide_hashes_take_their_own_paths():
    data = "\n".join([line(at=1, put="1000000000000"), line(at=20, put="123456789abcdef0")]).encode()
    chunk = decode_block(data, 2)
    assert chunk.sparse.dtype == np.uint64 and int(chunk.sparse[1, 6]) == 0x123456789ABCDEF0
    assert chunk.dense[0, 0] == np.float32(np.log1p(1e12))
    assert chunk.dense[0, 4] == np.float32(np.log1p(65535.0))
    negative = [x not in ("-0", "") and x[0] == "-" for x in COUNTS]
    assert chunk.marks["dense_negative"][0].tolist() == negative


def test_a_block_with_more_lines_than_counted_is_declined():
    data = ("\n".join(GOOD) + "\n").encode()
    assert decode_block(data, 3) is not None and decode_block(data, 2) is None


short = st.text("0123456789", min_size=1, max_size=5)
count = st.one_of(st.just(""), st.integers(-5, 70000).map(str), short, short.map("-".__add__))
hexes = st.one_of(
    st.just(""),
    st.integers(0, 2**32 - 1).map(lambda v: f"{v:08x}"),
    st.text("0123456789abcdefABCDEF", min_size=1, max_size=16),
)
odd = st.one_of(
    st.text("0123456789", min_size=16, max_size=21),  # int64's edge
    st.text("0123456789", min_size=16, max_size=21).map("-".__add__),
    st.text("0123456789abcdef", min_size=17, max_size=18),
    st.sampled_from(["-", "+3", " 3", "1.5", "0x1f", "2", "-0", "00"]),
)


def with_odd(fields: list[str], odd_field) -> list[str]:
    if odd_field is not None:
        fields[odd_field[0]] = odd_field[1]
    return fields


row = st.builds(
    lambda label, c, h, o: with_odd([label, *c, *h], o),
    st.sampled_from(["0", "1"]),
    st.lists(count, min_size=13, max_size=13),
    st.lists(hexes, min_size=26, max_size=26),
    st.one_of(st.none(), st.none(), st.tuples(st.integers(0, 39), odd)),
)
slip = st.tuples(
    st.floats(0, 1), st.sampled_from(["replace", "insert", "delete"]), st.sampled_from(list(b"\t\n\r -+.x0aG9\xff\x00"))
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(row, min_size=1, max_size=6),
    ending=st.sampled_from(["\n", "\r\n", ""]),
    slips=st.one_of(st.just([]), st.lists(slip, min_size=1, max_size=2)),
)
def test_random_and_corrupted_blocks_read_as_the_line_parser_reads_them(rows, ending, slips):
    data = bytearray(("\n".join("\t".join(r) for r in rows) + ending).replace("\n", ending or "\n").encode())
    for where, how, byte in slips:
        at = min(int(where * len(data)), len(data) - 1)
        if how == "replace":
            data[at] = byte
        elif how == "insert":
            data.insert(at, byte)
        elif len(data) > 1:
            del data[at]
    assert disagreement(bytes(data)) is None


def test_a_whole_file_loads_the_same_with_and_without_the_loop(tmp_path, monkeypatch):
    rows = [line(), line("0", [""] * 13, [""] * 26), line(at=3, put="99999999999")] * 40
    path = tmp_path / "a.tsv"
    path.write_text("\n".join(rows) + "\n")
    native = load_criteo(path, batch_size=8)
    monkeypatch.setenv("SCRATCHKIT_NATIVE", "0")  # pyarrow and NumPy (fields.py)
    assert CriteoFormat(str(path)).native is False
    fallback = load_criteo(path, batch_size=8)
    np.testing.assert_array_equal(native.ids, fallback.ids)
    np.testing.assert_array_equal(native.dense, fallback.dense)
    assert native.report.to_dict() == fallback.report.to_dict()


# One slip each in the loop's source; the comparison above must catch every one.
MUTANTS = {
    "hex letters off by one": (
        "value['a' + d] = value['A' + d] = (uint8_t)(10 + d)",
        "value['a' + d] = value['A' + d] = (uint8_t)(9 + d)",
    ),
    "-0 counted as negative": ("negative && x > 0;", "negative;"),
    "a lone minus accepted": ("(negative && n == 0)", "(false)"),
    "any digit as a label": ("(*p != '0' && *p != '1')", "(*p < '0' || *p > '9')"),
    "9 hex digits kept in 32 bits": ("sizeof(Out) < 8 && n > 8", "sizeof(Out) < 8 && n > 9"),
    "missing counts not marked": ("o.dense_missing[at] = n == 0;", "o.dense_missing[at] = 0;"),
}


@pytest.mark.slow
@pytest.mark.parametrize("mutant", MUTANTS)
def test_a_loop_with_a_slip_in_it_is_caught(tmp_path, monkeypatch, mutant):
    original, slipped = MUTANTS[mutant]
    source = (LOOP.folder / "criteo_loop.cpp").read_text()
    assert source.count(original) == 1, f"the loop no longer holds {original!r}: update MUTANTS"
    (tmp_path / "criteo_loop.cpp").write_text(source.replace(original, slipped))
    monkeypatch.setenv("SCRATCHKIT_CACHE_DIR", str(tmp_path / "cache"))
    loop = CLibrary("criteo-mutant", tmp_path, ("criteo_loop.cpp",), LOOP.signatures)
    found = [name for name in EDGES for data in blocks_of(EDGES[name]) if disagreement(data, loop)]
    assert found, f"no block shows the slip '{mutant}'"
