"""Shape text → `ir.Shape` (memoised: dumps repeat the same few hundred shapes), and the
splitting of comma-separated lists that shapes and attribute values share."""

from __future__ import annotations

import functools
import re

from .. import ir

_COMMENT_RE = re.compile(r"/\*.*?\*/", re.S)
_ARRAY_RE = re.compile(r"\s*([a-z0-9]+)\[([^\]]*)\](\{.*\})?\s*$", re.S)


@functools.lru_cache(maxsize=65536)
def parse_shape(text: str) -> ir.Shape:
    """`f32[2,3]{1,0}` / `(f32[2], s32[])` → ir.Shape.  The text has already matched SHAPE."""
    if "/*" in text:
        text = _COMMENT_RE.sub("", text)
    text = text.strip()
    if text.startswith("("):
        inner = text[1:-1].strip()
        if not inner:
            return ir.Shape("tuple")
        return ir.Shape("tuple", tuple_shapes=tuple(parse_shape(p) for p in split_top_level(inner)))
    m = _ARRAY_RE.match(text)
    if m is None:
        raise ValueError(f"not a shape: {text!r}")
    etype, dims_text, layout_text = m.groups()
    if etype not in ir.ELEMENT_BITS:
        raise ValueError(f"unknown element type {etype!r}")
    dims: list[int] = []
    dynamic: list[bool] = []
    any_dynamic = False
    for part in dims_text.split(","):
        part = part.strip()
        if not part:
            continue
        if part == "?":
            dims.append(-1)
            dynamic.append(True)
            any_dynamic = True
        elif part.startswith("<="):
            dims.append(int(part[2:]))
            dynamic.append(True)
            any_dynamic = True
        else:
            dims.append(int(part))
            dynamic.append(False)
    layout = None
    if layout_text is not None:
        body = layout_text[1:-1]
        m2m_text, _, extra = body.partition(":")
        m2m = tuple(int(x) for x in m2m_text.split(",") if x.strip())
        layout = ir.Layout(m2m, extra) if (m2m or extra) else None  # a scalar's `{}` says nothing
    return ir.Shape(etype, tuple(dims), layout, (), tuple(dynamic) if any_dynamic else ())


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at separators outside (), [], {} and strings."""
    parts: list[str] = []
    depth = 0
    start = 0
    in_string = False
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]

