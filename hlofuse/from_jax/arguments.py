"""Example arguments written as text, for `hlofuse compile --arg`: a shape in XLA's spelling
(`f32[2048,4]`, `bf16[]`, `pred[8]`) or NumPy's (`float32[2048,4]`), or a Python literal
(`3`, `0.5`, `True`, `"relu"`, `(1, 2)`).

At a position named by `--static-argnums` the literal is the value itself, as `jax.jit(f,
static_argnums=...)` receives it; elsewhere a number or bool stands for a scalar traced as
JAX traces a Python scalar (weakly typed).  Parsed without JAX: the command checks its
arguments before it starts a process that imports JAX.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Sequence

from ..errors import OptionError

#: XLA's element type names → NumPy's (as jax.numpy.dtype reads them).
XLA_DTYPES = {
    "pred": "bool", "s4": "int4", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "u4": "uint4", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "c64": "complex64", "c128": "complex128",
    "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "f8e4m3b11fnuz": "float8_e4m3b11fnuz",
    "f8e4m3fnuz": "float8_e4m3fnuz", "f8e5m2fnuz": "float8_e5m2fnuz",
}
NUMPY_DTYPES = frozenset(XLA_DTYPES.values())

_SHAPE = re.compile(r"\s*([A-Za-z][A-Za-z0-9_]*)\s*\[\s*([0-9,\s]*)\]\s*\Z")


@dataclass(frozen=True)
class ArraySpec:
    """An array argument: its shape and NumPy dtype name."""

    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Literal:
    """A Python value: the argument itself at a static position, else a weakly typed scalar."""

    value: object


def parse_arg(text: str, static: bool = False) -> ArraySpec | Literal:
    """One `--arg`; OptionError with what was expected when it is neither form."""
    m = _SHAPE.match(text)
    if m is not None:
        name, dims = m.group(1), m.group(2)
        dtype = XLA_DTYPES.get(name.lower(), name.lower())
        if dtype not in NUMPY_DTYPES:
            raise OptionError(f"--arg {text}: unknown element type {name!r}; use XLA's (f32, bf16, s32, pred, ...) "
                              "or NumPy's (float32, bfloat16, int32, bool, ...)")
        parts = [p.strip() for p in dims.split(",")] if dims.strip() else []
        if any(not p for p in parts):
            raise OptionError(f"--arg {text}: dimensions are numbers separated by commas, e.g. f32[2048,4]")
        return ArraySpec(tuple(int(p) for p in parts), dtype)
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise OptionError(f"--arg {text}: expected a shape such as f32[2048,4] (or float32[2048,4]), or a Python "
                          "literal") from None
    if not static and not isinstance(value, (bool, int, float, complex)):
        raise OptionError(f"--arg {text}: a {type(value).__name__} can only be a static argument (--static-argnums); "
                          "traced arguments are shapes (f32[2048,4]) or numbers")
    return Literal(value)


def parse_args(texts: Sequence[str], static_argnums: Sequence[int] = ()) -> tuple[ArraySpec | Literal, ...]:
    """Every `--arg`, in order; the positions in `static_argnums` are Python values."""
    for n in static_argnums:
        if not 0 <= n < len(texts):
            raise OptionError(f"--static-argnums {n}: there are {len(texts)} --arg values (positions 0 to "
                              f"{len(texts) - 1})")
    return tuple(parse_arg(t, i in static_argnums) for i, t in enumerate(texts))


def parse_argnums(text: str | None) -> tuple[int, ...]:
    """`--static-argnums 0,2` → (0, 2)."""
    if not text:
        return ()
    try:
        return tuple(sorted({int(p) for p in text.split(",") if p.strip()}))
    except ValueError:
        raise OptionError(f"--static-argnums {text}: positions separated by commas, e.g. 1 or 0,2") from None
