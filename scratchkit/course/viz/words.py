"""Text a figure draws, on lines short enough for a narrow page.

plotly never wraps a title or an annotation: a line wider than the figure is cut at its edge. The
course's figures follow the width of the cell's output, which is 424 px on a 540 px window, so
their titles and notes are broken into lines of at most `LINE` characters (about 380 px at a
title's 17 px) wherever they are made, and a figure makes room for the lines it draws.
"""

from __future__ import annotations

import textwrap

LINE = 42  # characters a line of a title: about 380 px at plotly's 17 px title font


def wrapped(text: str, width: int = LINE) -> str:
    """`text` with `<br>` between words so that no line is longer than `width` characters (the
    line breaks it has already are kept)."""
    return "<br>".join(
        "<br>".join(textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False)) or line
        for line in text.split("<br>")
    )


def lines(text: str) -> int:
    """How many lines `text` is drawn on."""
    return text.count("<br>") + 1
