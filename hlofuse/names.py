"""Unique names the way XLA's NameUniquer hands them out (separator '.', numeric suffixes):
the names passes give new instructions and computations decide what dumps and explanations
show, so they follow XLA's rules exactly."""

from __future__ import annotations

import re


class _Root:
    """The numbers of one name root: those in use, and where XLA's counter for it stands."""

    __slots__ = ("name", "used", "next")

    def __init__(self, name: str) -> None:
        self.name = name
        self.used: set[int] = set()
        #: XLA's SequentialIdGenerator: starts at 0 and only moves forward.
        self.next = 0


class NameUniquer:
    """Hands out unique names the way XLA's NameUniquer does: `root` or `root.N` is kept when
    free, otherwise the next unused number of that root is appended."""

    def __init__(self) -> None:
        self._roots: dict[str, _Root] = {}
        #: requested name → (its root, wanted number, the name if that number is free): a
        #: replay asks for the names of the instructions it clones again and again (600k
        #: requests at 100k instructions), so each request text is sanitized and split once.
        self._parts: dict[str, tuple[_Root, int, str]] = {}

    @staticmethod
    def _split(name: str) -> tuple[str, int | None]:
        """`root.N` → (root, N); anything else → (name, None)."""
        root, dot, digits = name.rpartition(".")
        if dot and digits.isdecimal():
            return root, int(digits)
        return name, None

    def _root(self, name: str) -> _Root:
        found = self._roots.get(name)
        if found is None:
            found = self._roots[name] = _Root(name)
        return found

    def reserve(self, name: str) -> "tuple[_Root, int, str] | None":
        """Mark `name` as used.  Returns what a request for `name` splits into (take's
        `known`: a clone of a node read from the input asks for its name), or None where that
        is not `name` itself (a name to sanitize, or a number written with leading zeros)."""
        text, n = self._split(name)
        root = self._root(text)
        number = n if n is not None else 0
        root.used.add(number)
        if n is not None and name[len(text) + 1] == "0" and len(name) > len(text) + 2:
            return None  # (`add.07` is asked for as `add.7`)
        if not _CLEAN_NAME(name):
            return None
        return (root, number, name)

    def _parts_of(self, requested: str) -> tuple[_Root, int, str]:
        name, n = self._split(_sanitize(requested))
        root = self._root(name)
        parts = self._parts[requested] = (root, 0, name) if n is None else (root, n, f"{name}.{n}")
        return parts

    def get(self, requested: str) -> str:
        return self.take(requested, None)[2]

    def take(self, requested: str, known: "tuple[_Root, int, str] | None") -> "tuple[_Root, int, str]":
        """get(requested), answered as (root, number, name) of the name handed out: what a
        request for that name splits into.  `known`, when it is such an answer for the text
        requested (a clone asks for its original's name), spares looking the text up among
        every name ever requested (a table of hundreds of thousands at 100k instructions)."""
        if known is not None and known[2] == requested:
            parts = known
        else:
            found = self._parts.get(requested)
            parts = found if found is not None else self._parts_of(requested)
        root, want, free = parts
        used = root.used
        if want not in used:
            used.add(want)
            return parts  # (`free` splits into this root and number)
        # XLA's SequentialIdGenerator: the counter starts at 0 and only moves forward
        # (a clone of `add.15` becomes `add.0` while 0 is free).
        k = root.next
        while k in used:
            k += 1
        used.add(k)
        root.next = k + 1
        return (root, k, f"{root.name}.{k}")


_CLEAN_NAME = re.compile(r"[A-Za-z0-9_.\-]+").fullmatch


def _sanitize(name: str) -> str:
    if _CLEAN_NAME(name):  # (almost always: the names of instructions being cloned)
        return name
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name) or "_"
