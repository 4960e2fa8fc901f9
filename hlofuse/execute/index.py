"""Affine index expressions for generated kernels: Σ coef·var + const over named integer
variables whose ranges are known (loop counters, thread coordinates, clamped offsets).

Kernels compute an element at a multi-dimensional index and map it through reshapes,
bitcasts, slices and transposes to their operands' indices.  Keeping those indices affine,
and folding `(4·i + 2) / 4` to `i` and `(4·i + 2) % 4` to `2` when the ranges allow it,
gives the compiler straight-line code, lets a concatenate pick its operand at generation
time when the index is known, and lets the `loop` plan prove that a loop body reads each
batch element's state only at that element.  Anything not affine is stored in a fresh
variable (with its range) and stays affine from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping


@dataclass(frozen=True)
class Idx:
    terms: tuple[tuple[str, int], ...] = ()  # sorted by variable name, no zero coefficients
    const: int = 0

    # -- construction ---------------------------------------------------------------------
    @staticmethod
    def of(value: int | str | "Idx") -> "Idx":
        if isinstance(value, Idx):
            return value
        if isinstance(value, int):
            return Idx((), value)
        return Idx(((value, 1),), 0)

    def __add__(self, other) -> "Idx":
        other = Idx.of(other)
        terms = dict(self.terms)
        for var, coef in other.terms:
            terms[var] = terms.get(var, 0) + coef
        return Idx(_norm(terms), self.const + other.const)

    def __sub__(self, other) -> "Idx":
        return self + Idx.of(other) * -1

    def __mul__(self, k: int) -> "Idx":
        if k == 0:
            return Idx()
        return Idx(tuple((v, c * k) for v, c in self.terms), self.const * k)

    # -- facts ----------------------------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return not self.terms

    def is_var(self, name: str) -> bool:
        return self.terms == ((name, 1),) and self.const == 0

    def variables(self) -> set[str]:
        return {v for v, _ in self.terms}

    def bounds(self, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
        """Inclusive lower and upper bound given each variable's inclusive range."""
        lo = hi = self.const
        for var, coef in self.terms:
            a, b = ranges[var]
            lo += min(coef * a, coef * b)
            hi += max(coef * a, coef * b)
        return lo, hi

    def key(self) -> tuple:
        return (self.terms, self.const)

    # -- C --------------------------------------------------------------------------------
    def c(self) -> str:
        parts = []
        for var, coef in self.terms:
            parts.append(var if coef == 1 else f"{coef}*{var}" if coef > 0 else f"({coef})*{var}")
        if self.const or not parts:
            parts.append(str(self.const) if self.const >= 0 or not parts else f"({self.const})")
        return " + ".join(parts) if len(parts) > 1 else parts[0]

    def __str__(self) -> str:
        return self.c()


def _norm(terms: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((v, c) for v, c in terms.items() if c != 0))


#: Makes a new variable holding a C expression: (expression, lower, upper) → variable name.
Bind = Callable[[str, int, int], str]


def floordiv(x: Idx, d: int, ranges: Mapping[str, tuple[int, int]], bind: Bind) -> Idx:
    """⌊x / d⌋ for a non-negative x."""
    if d == 1:
        return x
    quotient, rest = _split(x, d)
    lo, hi = rest.bounds(ranges)
    if 0 <= lo and hi < d:
        return quotient
    # not provably inside one block: compute it (C's division truncates; indices are ≥ 0)
    xlo, xhi = x.bounds(ranges)
    return Idx.of(bind(f"({x.c()}) / {d}", xlo // d, xhi // d))


def mod(x: Idx, d: int, ranges: Mapping[str, tuple[int, int]], bind: Bind) -> Idx:
    """x mod d for a non-negative x."""
    if d == 1:
        return Idx()
    _, rest = _split(x, d)
    lo, hi = rest.bounds(ranges)
    if 0 <= lo and hi < d:
        return rest
    xlo, xhi = x.bounds(ranges)
    if 0 <= xlo and xhi < d:
        return x
    return Idx.of(bind(f"({x.c()}) % {d}", 0, d - 1))


def _split(x: Idx, d: int) -> tuple[Idx, Idx]:
    """x = d·quotient + rest, with every coefficient of the quotient part divisible by d."""
    q_terms, r_terms = {}, {}
    for var, coef in x.terms:
        if coef % d == 0:
            q_terms[var] = coef // d
        else:
            r_terms[var] = coef
    return Idx(_norm(q_terms), x.const // d), Idx(_norm(r_terms), x.const % d)


# ------------------------------------------------------------------------------------------
# Layouts
# ------------------------------------------------------------------------------------------


def strides(dims: tuple[int, ...], minor_to_major: tuple[int, ...]) -> list[int]:
    """Element strides of each logical dimension in a buffer of that layout."""
    out = [0] * len(dims)
    step = 1
    for d in minor_to_major:
        out[d] = step
        step *= max(dims[d], 1)
    return out


def linear(index: list[Idx], dims: tuple[int, ...], minor_to_major: tuple[int, ...]) -> Idx:
    """The element offset of `index` in a buffer of that layout."""
    total = Idx()
    for ix, stride, size in zip(index, strides(dims, minor_to_major), dims):
        if size != 1:
            total = total + ix * stride
    return total


def delinear(offset: Idx, dims: tuple[int, ...], minor_to_major: tuple[int, ...],
             ranges: Mapping[str, tuple[int, int]], bind: Bind) -> list[Idx]:
    """The index whose offset in a buffer of that layout is `offset` (0 ≤ offset < size)."""
    out: list[Idx] = [Idx()] * len(dims)
    st = strides(dims, minor_to_major)
    rest = offset
    for d in reversed(minor_to_major):  # major to minor
        if dims[d] == 1:
            continue
        out[d] = floordiv(rest, st[d], ranges, bind)
        rest = mod(rest, st[d], ranges, bind)
    return out
