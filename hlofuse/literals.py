"""Literals of `constant(...)`: read, checked against the shape as XLA's parser checks them,
and turned into values (NumPy arrays for the reference evaluator).

Syntax: a scalar (`1`, `-inf`, `1e-08`, `true`, `nan(0x7f)`, `(1, 2)` for complex), nested
braces with one level per dimension (`{ {1, 2}, {3, 4} }`), `{...}` for an elided value, or a
parenthesised tuple of literals.
"""

from __future__ import annotations

import math
import re

from . import ir

_TOKEN_RE = re.compile(r"\s*(\{|\}|\(|\)|,|[^\s{}(),]+(?:\([^()]*\))?)")

#: Largest finite value of each floating type.
FLOAT_MAX = {
    "f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38,
    "f64": 1.7976931348623157e308, "f8e5m2": 57344.0, "f8e5m2fnuz": 57344.0, "f8e4m3": 240.0,
    "f8e4m3fn": 448.0, "f8e4m3fnuz": 240.0, "f8e4m3b11fnuz": 30.0, "f8e3m4": 15.5,
    "f8e8m0fnu": 1.7014118346046923e38, "f4e2m1fn": 6.0,
}
#: Explicit mantissa bits of each floating type (to find where rounding reaches infinity).
MANTISSA_BITS = {
    "f16": 10, "bf16": 7, "f32": 23, "f64": 52, "f8e5m2": 2, "f8e5m2fnuz": 2, "f8e4m3": 3,
    "f8e4m3fn": 3, "f8e4m3fnuz": 3, "f8e4m3b11fnuz": 3, "f8e3m4": 4, "f8e8m0fnu": 0, "f4e2m1fn": 1,
}
#: Mantissa bits of the types whose NaNs carry a payload (the others have a single NaN, or none).
NAN_PAYLOAD_BITS = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52, "f8e5m2": 2, "f8e4m3": 3, "f8e3m4": 4}


class LiteralError(ValueError):
    """A literal that does not fit its shape or type; the message is XLA's wording where it has one."""


_COMMENT_RE = re.compile(r"/\*.*?\*/", re.S)


def _tokens(text: str) -> list[str]:
    if "/*" in text:
        text = _COMMENT_RE.sub(" ", text)
    out = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            if text[pos:].strip() == "":
                break
            raise LiteralError(f"unexpected character {text[pos]!r} in literal")
        out.append(m.group(1))
        pos = m.end()
    return out


class _Reader:
    def __init__(self, tokens: list[str]):
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None:
            raise LiteralError("unexpected end of literal")
        if expected is not None and tok != expected:
            raise LiteralError(f"unexpected {tok!r} token, expected {expected!r}")
        self.pos += 1
        return tok


def parse_literal(text: str, shape: ir.Shape):
    """The literal's values as nested Python lists (tuples for tuple shapes), `...` where the
    text elides them.  Raises LiteralError."""
    reader = _Reader(_tokens(text))
    value = _read(reader, shape)
    if reader.peek() is not None:
        raise LiteralError(f"unexpected {reader.peek()!r} token after the literal")
    return value


def check_literal(text: str, shape: ir.Shape) -> None:
    parse_literal(text, shape)


def _read(reader: _Reader, shape: ir.Shape):
    if shape.is_tuple:
        reader.take("(")
        items = []
        for i, sub in enumerate(shape.tuple_shapes):
            if i:
                reader.take(",")
            items.append(_read(reader, sub))
        reader.take(")")
        return tuple(items)
    if shape.element_type in ("token", "opaque"):
        return None
    if reader.peek() == "{":
        return _read_array(reader, shape, 0, ())
    # A scalar, or one value for every element of an array (XLA accepts that too).
    return _scalar(reader, shape.element_type)


def _read_array(reader: _Reader, shape: ir.Shape, level: int, index: tuple[int, ...]):
    reader.take("{")
    if reader.peek() == "...":  # elided: `{...}`
        reader.take()
        reader.take("}")
        return ...
    rank = shape.rank
    items = []
    while reader.peek() != "}":
        if items:
            reader.take(",")
            if reader.peek() == "}":
                break
        if reader.peek() == "{":
            if level + 1 >= rank:
                raise LiteralError(f"expects nested array in rank {rank}, but sees larger")
            items.append(_read_array(reader, shape, level + 1, index + (len(items),)))
        else:
            if level + 1 != rank and rank > 0:
                raise LiteralError(f"expects nested array in rank {rank}, but sees {level + 1}")
            items.append(_scalar(reader, shape.element_type))
    reader.take("}")
    if rank == 0:
        if len(items) != 1:
            raise LiteralError(f"expects one element for a scalar, sees {len(items)}")
        return items[0]
    expected = shape.dims[level]
    if expected >= 0 and len(items) != expected and not (shape.dynamic and shape.dynamic[level]):
        where = "".join(f"[{i}]" for i in index)
        if where:
            raise LiteralError(f"expects {expected} elements in the {where}th element, but sees {len(items)}")
        raise LiteralError(f"expects {expected} elements, but sees {len(items)}")
    return items


def _scalar(reader: _Reader, etype: str):
    if etype in ir.COMPLEX_TYPES:
        reader.take("(")
        re_part = _number(reader.take(), "f32" if etype == "c64" else "f64", etype)
        reader.take(",")
        im_part = _number(reader.take(), "f32" if etype == "c64" else "f64", etype)
        reader.take(")")
        return complex(re_part, im_part)
    return _number(reader.take(), etype, etype)


def _number(tok: str, etype: str, shown_type: str):
    if tok in ("{", "}", "(", ")", ","):
        raise LiteralError(f"unexpected {tok!r} token")
    if etype == "pred":
        if tok in ("true", "1"):
            return True
        if tok in ("false", "0"):
            return False
        raise LiteralError(f"expects true or false for a pred literal, sees {tok}")
    if etype in ir.INTEGRAL_TYPES:
        try:
            value = int(tok, 0) if tok.lower().startswith(("0x", "-0x")) else int(tok)
        except ValueError:
            try:
                fvalue = float(tok)
            except ValueError:
                raise LiteralError(f"expects an integer literal, sees {tok}") from None
            if not fvalue.is_integer():
                raise LiteralError(f"expects an integer literal, sees {tok}")
            value = int(fvalue)
        bits = ir.ELEMENT_BITS[etype]
        if etype in ir.SIGNED_TYPES:
            low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        elif bits == 64:  # XLA reads u64 through int64, so -1 stands for the largest u64
            low, high = -(1 << 63), (1 << 64) - 1
        else:
            low, high = 0, (1 << bits) - 1
        if not low <= value <= high:
            raise LiteralError(f"value {tok} is out of range for literal's primitive type {shown_type.upper()}")
        return value
    # floating point
    lowered = tok.lower()
    payload_match = re.fullmatch(r"([-+]?)nan\((0x[0-9a-f]+)\)", lowered)
    if payload_match:
        payload = int(payload_match.group(2), 16)
        bits = NAN_PAYLOAD_BITS.get(etype)
        if bits is None or payload == 0 or payload >= (1 << bits):
            raise LiteralError(f"tries to set NaN payload {payload_match.group(2)} for a {shown_type.upper()} literal")
        return math.nan
    try:
        value = float(tok)
    except ValueError:
        raise LiteralError(f"expects a number, sees {tok}") from None
    if math.isinf(value) and "inf" not in lowered:
        raise LiteralError(f"value {tok} is out of range for literal's primitive type {shown_type.upper()}")
    limit = FLOAT_MAX.get(etype)
    if limit is not None and etype != "f64":
        # Values round to the nearest representable one; only those that round past the
        # largest finite value (by half an ulp or more) overflow.
        ulp = 2.0 ** (math.floor(math.log2(limit)) - MANTISSA_BITS[etype])
        limit = limit + ulp / 2
    if limit is not None and math.isfinite(value) and abs(value) >= limit and etype != "f64":
        raise LiteralError(f"value {tok} is out of range for literal's primitive type {shown_type.upper()}")
    return value
