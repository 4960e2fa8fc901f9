"""Unique names the way XLA's NameUniquer hands them out (separator '.', numeric suffixes):
the names passes give new instructions and computations decide what dumps and explanations
show, so they follow XLA's rules exactly."""

from __future__ import annotations

import re


class NameUniquer:
    """Hands out unique names the way XLA's NameUniquer does: `root` or `root.N` is kept when
    free, otherwise the next unused number of that root is appended."""

    def __init__(self) -> None:
        self._used: dict[str, set[int]] = {}
        self._next: dict[str, int] = {}
        #: requested name → (root, wanted number, the name if that number is free, the used
        #: numbers of the root): a replay asks for the names of the instructions it clones
        #: again and again (600k requests at 100k instructions), so each request text is
        #: sanitized and split once.  The set is the one in `_used` (never replaced).
        self._parts: dict[str, tuple[str, int, str, set[int]]] = {}

    @staticmethod
    def _split(name: str) -> tuple[str, int | None]:
        """`root.N` → (root, N); anything else → (name, None)."""
        root, dot, digits = name.rpartition(".")
        if dot and digits.isdecimal():
            return root, int(digits)
        return name, None

    def reserve(self, name: str) -> None:
        root, n = self._split(name)
        self._used.setdefault(root, set()).add(n if n is not None else 0)

    def _parts_of(self, requested: str) -> tuple[str, int, str, set[int]]:
        root, n = self._split(_sanitize(requested))
        used = self._used.setdefault(root, set())
        parts = self._parts[requested] = (root, 0, root, used) if n is None else (root, n, f"{root}.{n}", used)
        return parts

    def get(self, requested: str) -> str:
        parts = self._parts.get(requested)
        if parts is None:
            parts = self._parts_of(requested)
        root, want, free, used = parts
        if want not in used:
            used.add(want)
            return free
        # XLA's SequentialIdGenerator: the counter starts at 0 and only moves forward
        # (a clone of `add.15` becomes `add.0` while 0 is free).
        k = self._next.get(root, 0)
        while k in used:
            k += 1
        used.add(k)
        self._next[root] = k + 1
        return f"{root}.{k}"


_CLEAN_NAME = re.compile(r"[A-Za-z0-9_.\-]+").fullmatch


def _sanitize(name: str) -> str:
    if _CLEAN_NAME(name):  # (almost always: the names of instructions being cloned)
        return name
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name) or "_"
