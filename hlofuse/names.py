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
        #: requested name → (root, suffix) of its sanitized form (a replay asks for the names
        #: of the instructions it clones again and again: 600k requests at 100k instructions)
        self._parts: dict[str, tuple[str, int | None]] = {}

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

    def get(self, requested: str) -> str:
        parts = self._parts.get(requested)
        if parts is None:
            parts = self._parts[requested] = self._split(_sanitize(requested))
        root, n = parts
        used = self._used.get(root)
        if used is None:
            used = self._used[root] = set()
        want = n if n is not None else 0
        if want not in used:
            used.add(want)
            return root if (n is None and want == 0) else f"{root}.{want}"
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
