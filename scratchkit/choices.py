"""Closed choices named by strings (enums): the one way to read a name and refuse a wrong one."""
from __future__ import annotations

from enum import Enum
from typing import TypeVar

E = TypeVar("E", bound=Enum)


def parse_choice(cls: type[E], name: E | str, what: str, *, choose: str = "choose from",
                 quote: bool = False) -> E:
    """`cls(name)`, or a ValueError that names the bad value and lists the valid ones:
    "unknown {what}{name!r}; {choose} a, b, c" (`quote`: the values in quotes)."""
    try:
        return cls(name)
    except ValueError:
        values = ", ".join(repr(k.value) if quote else str(k.value) for k in cls)
        raise ValueError(f"unknown {what}{name!r}; {choose} {values}") from None
