"""Checking and decoding a column of text fields at once, from the bytes of an Arrow column.

pyarrow's CSV reader splits a block of lines into columns (in C++, on every core) and hands each
column back as one buffer of bytes plus the offset of each field in it. These functions check
every field of a column against the kit's grammar (the same one as the line parsers' regular
expressions: `scratchkit/data/criteo.py`, `movielens.py`) and decode it with NumPy, column at a
time. Each returns None when any field falls outside the grammar or outside what the fast path
decodes (a count of more than 18 digits, a hash of more than 16 hex digits): the caller then reads
the block again line by line, which names the line or decodes the rare field exactly.

Why not let Arrow convert the numbers: it is more lenient than the kit's formats (it reads
"0x10", " 3" and "3 " as integers, where a Criteo count is `-?[0-9]+`), so a line the kit
refuses would load silently.
"""

from __future__ import annotations

import binascii

import numpy as np

ZERO, MINUS, DOT = ord("0"), ord("-"), ord(".")
MAX_INT_DIGITS = 18  # 10**18 - 1 < 2**63: decoded in int64 without overflow
MAX_HEX_DIGITS = 16  # 64 bits
_POWERS = 10 ** np.arange(MAX_INT_DIGITS - 1, -1, -1, dtype=np.int64)  # [18]


def byte_table(chars: str) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[np.frombuffer(chars.encode(), np.uint8)] = True
    return table


DIGIT = byte_table("0123456789")
SIGNED = byte_table("0123456789-")
HEX = byte_table("0123456789abcdefABCDEF")
DECIMAL = byte_table("0123456789.")


class Fields:
    """One column of n text fields: `data` (uint8 bytes), `starts` and `lengths` ([n] int64)."""

    def __init__(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, arrow=None):
        self.data, self.starts, self.lengths = data, starts, lengths
        self.arrow = arrow  # the Arrow array the bytes came from, if any
        end = int(starts[-1] + lengths[-1]) if starts.size else 0
        self.used = data[int(starts[0]) if starts.size else 0 : end]  # every field's bytes, nothing else

    @classmethod
    def from_arrow(cls, array) -> "Fields":
        """From a pyarrow BinaryArray (one chunk of a column read with binary type)."""
        _, offsets, data = array.buffers()
        n = len(array)
        offsets = np.frombuffer(offsets, np.int32, n + 1, array.offset * 4).astype(np.int64)
        data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        return cls(data, offsets[:-1], np.diff(offsets), arrow=array)

    def __len__(self) -> int:
        return self.starts.size

    def only(self, allowed: np.ndarray) -> bool:
        """Every byte of every field is in `allowed` (a 256-entry table)."""
        return bool(allowed[self.used].all())

    def first_bytes(self) -> np.ndarray:
        """[n] each field's first byte (0 for an empty field)."""
        first = np.zeros(len(self), np.uint8)
        some = self.lengths > 0
        first[some] = self.data[self.starts[some]]
        return first

    def right_aligned(self, width: int, skip: np.ndarray | None = None) -> np.ndarray:
        """[n, width] uint8: each field's bytes (after `skip` [n] leading bytes) right-aligned
        over ASCII '0's, so that the digits of every field line up by place value."""
        skip = np.zeros(len(self), np.int64) if skip is None else skip
        length = self.lengths - skip
        out = np.full((len(self), width), ZERO, np.uint8)
        total = int(length.sum())
        if total:
            row = np.repeat(np.arange(len(self)), length)
            j = np.arange(total) - np.repeat(np.cumsum(length) - length, length)  # place in field
            source = np.repeat(self.starts + skip, length) + j
            out.reshape(-1)[row * width + width - np.repeat(length, length) + j] = self.data[source]
        return out


def decode_labels(fields: Fields) -> np.ndarray | None:
    """`0` or `1`, exactly one byte: uint8 [n]; None otherwise."""
    if not (fields.lengths == 1).all():
        return None
    values = fields.data[fields.starts] - ZERO
    return values if (values <= 1).all() else None


def decode_ints(fields: Fields, signed: bool = True) -> tuple[np.ndarray, np.ndarray] | None:
    """`-?[0-9]+` (or `[0-9]+`) or empty: (int64 values [n], missing [n] bool); None if any
    field is malformed or has more than MAX_INT_DIGITS digits.

    The grammar is checked here, byte by byte; the digits are then turned into numbers by
    pyarrow's cast where there is an Arrow array (C++, ~5 ns a field), else by NumPy."""
    if not fields.only(SIGNED if signed else DIGIT):
        return None
    negative = fields.first_bytes() == MINUS
    digits = fields.lengths - negative
    if int((fields.used == MINUS).sum()) != int(negative.sum()):  # a '-' not in first place
        return None
    if (negative & (digits < 1)).any() or (digits.max(initial=0) > MAX_INT_DIGITS):
        return None
    missing = fields.lengths == 0
    if fields.arrow is not None:
        import pyarrow as pa
        import pyarrow.compute as pc

        text = pc.if_else(pa.array(missing), pa.scalar(None, pa.binary()), fields.arrow)
        values = pc.cast(text.cast(pa.string()), pa.int64()).fill_null(0)
        return values.to_numpy(zero_copy_only=False), missing
    padded = fields.right_aligned(MAX_INT_DIGITS, skip=negative.astype(np.int64))
    values = (padded - ZERO).astype(np.int64) @ _POWERS  # [n]
    return np.where(negative, -values, values), missing


def decode_hex(fields: Fields) -> tuple[np.ndarray, np.ndarray] | None:
    """`[0-9A-Fa-f]*` of at most 16 digits: (values [n], missing [n] bool), an empty field reading
    0 (as `int("0", 16)` in the DLRM reference); None otherwise. Values are uint32 when every
    field has at most 8 digits (Criteo's hashes: half the bytes to move), else uint64."""
    missing = fields.lengths == 0
    if ((fields.lengths == 8) | missing).all():  # Criteo's hashes: 8 digits, or none
        try:  # a2b_hex refuses any non-hex byte
            hashes = np.frombuffer(binascii.a2b_hex(fields.used), ">u4")
        except (binascii.Error, ValueError):
            return None
        if not missing.any():
            return hashes.astype(np.uint32), missing
        values = np.zeros(len(fields), np.uint32)
        values[~missing] = hashes
        return values, missing
    if not fields.only(HEX) or fields.lengths.max(initial=0) > MAX_HEX_DIGITS:
        return None
    values = np.frombuffer(binascii.a2b_hex(fields.right_aligned(MAX_HEX_DIGITS)), ">u8")
    return values.astype(np.uint64), missing


def decode_decimals(fields: Fields) -> np.ndarray | None:
    """`[0-9]+(\\.[0-9]+)?` of at most 15 digits as float64 [n]; None otherwise.

    The digits without the dot, as an integer, divided by 10**(digits after the dot): both exact
    in float64 below 2**53, so the one rounding of the division gives the correctly rounded value,
    as `float(text)` does."""
    if not fields.only(DECIMAL) or (fields.lengths == 0).any():
        return None
    dots = np.flatnonzero(fields.used == DOT) + (int(fields.starts[0]) if len(fields) else 0)
    field = np.searchsorted(fields.starts, dots, side="right") - 1  # [dots]
    place = dots - fields.starts[field]
    if (
        np.unique(field).size != field.size or ((place == 0) | (place == fields.lengths[field] - 1)).any()
    ):  # '4.5.1', '.5', '4.'
        return None
    has_dot = np.zeros(len(fields), np.int64)
    has_dot[field] = 1
    kept = fields.used[fields.used != DOT]
    lengths = fields.lengths - has_dot
    if lengths.max(initial=0) > 15:
        return None
    whole = decode_ints(Fields(kept, np.cumsum(lengths) - lengths, lengths), signed=False)
    if whole is None:
        return None
    decimals = np.zeros(len(fields), np.int64)
    decimals[field] = fields.lengths[field] - 1 - place
    return whole[0].astype(np.float64) / 10.0**decimals
