"""A text file read as blocks of whole lines, each knowing the number of its first line.

    for block in read_blocks("train.tsv.gz", on_bytes=bar.update):
        block.data          # bytes: whole lines, the last one ending in a newline (or the file)
        block.first_line    # 1-based number of its first line in the file
        block.lines         # how many lines it holds, counted as Python's text mode counts them

Memory: one block (`block_bytes`, and the rest of its last line). Lines are counted as
Python's universal newlines split them ("\\n", "\\r\\n" and a lone "\\r" each end a line), so
that a block read again line by line (`block.text_lines()`) numbers its lines as the file does.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

BLOCK_BYTES = 32 << 20  # 32 MB: ~130k Criteo lines; large enough for Arrow's threads


@dataclass(frozen=True)
class Block:
    data: bytes
    first_line: int
    lines: int  # as Python's text mode counts them (count_lines)

    @cached_property
    def lone_cr(self) -> bool:
        """Whether a "\\r" not followed by "\\n" ends a line here (Arrow and `lines` agree on
        such a line, but a fast reader counting "\\n" would not). Most blocks hold no "\\r" at
        all: `in` finds that at memory speed, where counting b"\\r\\n" took ~30 ms a block."""
        return b"\r" in self.data and self.data.count(b"\r") != self.data.count(b"\r\n")

    def text_lines(self) -> io.TextIOWrapper:
        """The block's lines as text, as `open(path, errors="replace")` reads them: undecodable
        bytes become U+FFFD, so they surface as a malformed field with its line number."""
        return io.TextIOWrapper(io.BytesIO(self.data), encoding="utf-8", errors="replace")


def count_lines(data: bytes) -> int:
    """Lines in `data` as Python's text mode splits them (a last line without newline counts)."""
    ends = data.count(b"\n")
    if b"\r" in data:  # Windows endings, or a lone "\r"
        ends += data.count(b"\r") - data.count(b"\r\n")
    return ends + (1 if data and not data.endswith((b"\n", b"\r")) else 0)


def open_binary(path: str | Path):
    """(the file's decompressed bytes, its raw file) for a plain or `.gz` file; the raw file's
    position is how far through the file on disk reading has come."""
    raw = open(path, "rb")
    if str(path).endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    return raw, raw


def read_blocks(
    path: str | Path,
    block_bytes: int = BLOCK_BYTES,
    first_line: int = 1,
    skip_bytes: int = 0,
    on_bytes: Callable[[int], object] | None = None,
) -> Iterator[Block]:
    """Blocks of whole lines of `path` (plain or `.gz`), from `skip_bytes` (decompressed) on.

    `on_bytes(n)` is told how many bytes of the file on disk each block took (progress bars).
    """
    stream, raw = open_binary(path)
    with stream, raw:
        if skip_bytes:
            stream.read(skip_bytes)
        told = raw.tell()
        while data := stream.read(block_bytes):
            if not data.endswith(b"\n"):
                data += stream.readline()  # the rest of its last line (or the file)
            block = Block(data, first_line, count_lines(data))
            first_line += block.lines
            if on_bytes is not None:
                position = raw.tell()
                on_bytes(position - told)
                told = position
            yield block


def first_line_of(path: str | Path) -> tuple[str, int]:
    """(the first line of a file as text, without its newline; the bytes it takes with it)."""
    stream, raw = open_binary(path)
    with stream, raw:
        line = stream.readline()
    return line.decode("utf-8", errors="replace").rstrip("\r\n"), len(line)


__all__ = ["Block", "BLOCK_BYTES", "read_blocks", "count_lines", "first_line_of"]
