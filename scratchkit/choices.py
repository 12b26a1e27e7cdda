"""Closed choices named by strings: enums for the fixed ones, registries for the ones code outside
the kit may extend (trainers, simulator policies, GPU servers, workloads). The one way to read a
name and refuse a wrong one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from typing import TypeVar

E = TypeVar("E", bound=Enum)


def parse_choice(cls: type[E], name: E | str, what: str, *, choose: str = "choose from", quote: bool = False) -> E:
    """`cls(name)`, or a ValueError that names the bad value and lists the valid ones:
    "unknown {what}{name!r}; {choose} a, b, c" (`quote`: the values in quotes)."""
    try:
        return cls(name)
    except ValueError:
        values = ", ".join(repr(k.value) if quote else str(k.value) for k in cls)
        raise ValueError(f"unknown {what}{name!r}; {choose} {values}") from None


T = TypeVar("T")


class UnknownName(ValueError, KeyError):
    """A name no registry entry has: a ValueError for the callers that check input, a KeyError
    for `Mapping`'s own `in` and `.get`."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T]):
    """A closed choice that code outside the kit may extend: entries by name, in the order they
    were registered (the order the CLI lists them). The kit's own entries are registered where
    the choice is defined; `register` adds one (a new trainer, a new GPU server), and
    `registered` adds one for the length of a `with` block (a test's made-up entry).

    `registry[name]`: the entry, or UnknownName "unknown {what}{name!r}; choose from a, b, c"."""

    def __init__(self, what: str, entries: dict[str, T] | None = None):
        self.what = what
        self._entries: dict[str, T] = {}
        for name, entry in (entries or {}).items():
            self.register(name, entry)

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownName(f"unknown {self.what}{name!r}; choose from {', '.join(self._entries)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def register(self, name: str, entry: T) -> T:
        """Add `entry` as `name`; a name already taken is refused (unregister it first)."""
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise ValueError(f"a {self.what}name must be a non-empty string without outer spaces, got {name!r}")
        if name in self._entries:
            raise ValueError(f"{self.what}{name!r} is registered already")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> T:
        """Remove `name` and return its entry (UnknownName when it is not there)."""
        entry = self[name]
        del self._entries[name]
        return entry

    @contextmanager
    def registered(self, name: str, entry: T) -> Iterator[T]:
        """`name` registered inside the block, removed on the way out (even on an error)."""
        self.register(name, entry)
        try:
            yield entry
        finally:
            self._entries.pop(name, None)
