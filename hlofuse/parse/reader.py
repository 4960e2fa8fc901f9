"""The fast path: a computation of common instructions read in one go, instruction by
instruction, with patterns composed from the grammar's terminals (the grammar's COMPUTATION
and INSTRUCTION).  The lexer hands it the COMPUTATION terminal (`READERS`); the callbacks use
`raw_instruction` for INSTRUCTION tokens met on the token-by-token path."""

from __future__ import annotations

import functools
import re
import sys

from .. import ir
from .grammar import pattern, terminal_regex
from .records import (LITERAL_OPCODES, REWRITTEN_ATTRS, LocatedError, RawComputation, RawInstr, is_name,
                      strip_percent)
from .shapes import parse_shape


@functools.lru_cache(maxsize=1)
def head_regex() -> re.Pattern:
    """Splits the head of an INSTRUCTION token (the grammar's INSTR_HEAD): root, name, shape,
    opcode, operand list; the attributes follow it."""
    return re.compile(r"(ROOT\s+)?(" + pattern("NAME") + r")\s*=\s*(" + pattern("SHAPE") + r")\s+("
                      + pattern("OPCODE") + r")\s*(" + pattern("OPERAND_LIST") + ")")


@functools.lru_cache(maxsize=1)
def _attr_regex() -> re.Pattern:
    """One `, name=value` (the grammar's ATTR), with the name and the value as groups."""
    return re.compile(r"\s*,\s*(" + pattern("ATTR_NAME") + r")\s*=\s*(" + pattern("ATTR_VALUE") + ")")


@functools.lru_cache(maxsize=1)
def _computation_head_regex() -> re.Pattern:
    """Splits a COMPUTATION_HEAD token: ENTRY, name, parameter text, result shape."""
    return re.compile(r"(ENTRY\s+)?(" + pattern("NAME") + r")\s*(?:\(([\s\S]*)\)\s*->\s*("
                      + pattern("SHAPE") + r"))?\s*\{\Z")


@functools.lru_cache(maxsize=1)
def _param_regex() -> re.Pattern:
    return re.compile(r"\s*(" + pattern("NAME") + r")\s*:\s*(" + pattern("SHAPE") + r")\s*(?:,|\Z)")


@functools.lru_cache(maxsize=1)
def _names_regex() -> re.Pattern:
    """A comma-separated list of operand names (the common operand list, after index marks)."""
    name = pattern("NAME")
    return re.compile(r"\s*" + name + r"\s*(?:,\s*" + name + r"\s*)*")


@functools.lru_cache(maxsize=1)
def _operand_item_regex() -> re.Pattern:
    name = terminal_regex("NAME").pattern
    shape = terminal_regex("SHAPE").pattern
    return re.compile(r"\s*(?:(" + shape + r")\s+)?(" + name + r")\s*(?:,|\Z)")


_INDEX_COMMENT_RE = re.compile(r"/\*index=[0-9]+\*/")


def raw_instruction(text: str, root, name: str, shape_text: str, opcode: str, operand_list: str,
                    attrs_start: int, attrs_end: int, line: int, column: int) -> RawInstr:
    """The record of one instruction in the common form, from the pieces of its text: the
    head's groups, and text[attrs_start:attrs_end] holding its `, name=value` attributes."""
    fast = _FAST or _bind_fast()
    intern = sys.intern
    attrs = []
    rewritten = False
    if attrs_start < attrs_end:
        for a in fast.attrs(text, attrs_start, attrs_end):
            key, value = a.group(1, 2)
            # Short values (dimensions={1}, kind=kLoop, index=0, calls=...) repeat: share them.
            attrs.append((intern(key), intern(value) if len(value) < 48 else value))
            rewritten = rewritten or key in REWRITTEN_ATTRS
    opcode = intern(opcode)
    operand_text = operand_list[1:-1]
    literal = None
    operands: list = []
    operand_shapes = None
    if opcode in LITERAL_OPCODES:
        literal = operand_text.strip()
    elif operand_text and not operand_text.isspace():
        if "/*" in operand_text:
            operand_text = _INDEX_COMMENT_RE.sub("", operand_text)
        if "[" not in operand_text and "(" not in operand_text and "{" not in operand_text and \
                fast.names(operand_text):
            operands = list(map(intern, _BARE_NAME_RE.findall(operand_text)))
        else:
            operand_shapes = []
            pos = 0
            item_re = _operand_item_regex()
            while pos < len(operand_text):
                m_item = item_re.match(operand_text, pos)
                if m_item is None or m_item.end() == pos:
                    raise LocatedError(
                        "expects an operand name (an operand that is a literal is only valid in constant(...))",
                        line, column)
                operand_shapes.append(m_item.group(1))
                operands.append(strip_percent(m_item.group(2)))
                pos = m_item.end()
            if all(s is None for s in operand_shapes):
                operand_shapes = None
            if any(not is_name(o) for o in operands):
                raise LocatedError("expects an operand name (a literal is only valid in constant(...))",
                                   line, column)
    name = intern(name[1:] if name[0] == "%" else name)
    shape = parse_shape(shape_text)
    built = None
    if not rewritten and operand_shapes is None:  # nothing for assembly to resolve: make it now
        built = fast.instruction(name, opcode, shape, tuple(operands), tuple(attrs), literal, (),
                                 fast.span(line, column))
    return RawInstr(name, opcode, shape, operands, attrs, literal, root is not None, line, column,
                    operand_shapes, True, built)


class _Fast:
    """The compiled patterns and constructors raw_instruction uses, bound once."""

    __slots__ = ("attrs", "names", "instruction", "span")


_FAST: _Fast | None = None


def _bind_fast() -> _Fast:
    global _FAST
    fast = _Fast()
    fast.attrs = _attr_regex().finditer
    fast.names = _names_regex().fullmatch
    fast.instruction, fast.span = ir.Instruction, ir.Span
    _FAST = fast
    return fast


_WS = r"[ \t\f\r\n]"
# The names of an operand list that _names_regex has matched, without their `%`.
_BARE_NAME_RE = re.compile(r"%?([^\s,%]+)")


@functools.lru_cache(maxsize=1)
def instruction_regex() -> re.Pattern:
    """The grammar's INSTRUCTION (INSTR_HEAD (_WS0 ATTR)*, INSTR_HEAD being
    (ROOT _WS1)? NAME _WS0 "=" _WS0 SHAPE _WS1 OPCODE _WS0 OPERAND_LIST), composed from the same
    terminals, with the pieces as groups and the whitespace before it skipped.  Groups: 1 the
    instruction, 2 ROOT, 3 name, 4 shape, 5 opcode, 6 operand list, 7 attributes.
    tests/test_parse_lexer.py checks it matches what the grammar's INSTRUCTION matches."""
    ws = _WS
    return re.compile(
        f"{ws}*((?:(ROOT){ws}+)?({pattern('NAME')}){ws}*={ws}*({pattern('SHAPE')}){ws}+({pattern('OPCODE')})"
        f"{ws}*({pattern('OPERAND_LIST')})((?:{ws}*{pattern('ATTR')})*))")


_CLOSE_RE = re.compile(_WS + r"*\}")


def _read_computation(text: str, pos: int, end: int, line: int, line_start: int):
    """The COMPUTATION terminal (COMPUTATION_HEAD (_WS0 INSTRUCTION)* _WS0 "}"), read one
    instruction at a time: (raw computation, end offset), or None when the computation holds
    anything else, so that the parser reads it token by token."""
    head = terminal_regex("COMPUTATION_HEAD").match(text, pos, end)
    if head is None:
        return None
    instrs = []
    match = instruction_regex().match
    count, rfind = text.count, text.rfind
    head_line, head_column = line, pos - line_start + 1
    p = head.end()
    while True:
        m = match(text, p, end)
        if m is None:
            break
        start = m.start(1)
        n = count("\n", p, start)
        if n:
            line += n
            line_start = rfind("\n", p, start) + 1
        root, name, shape, opcode, operands = m.group(2, 3, 4, 5, 6)
        attrs_start, attrs_end = m.span(7)
        instrs.append(raw_instruction(text, root, name, shape, opcode, operands, attrs_start, attrs_end,
                                      line, start - line_start + 1))
        p = m.end()
        n = count("\n", start, p)
        if n:
            line += n
            line_start = rfind("\n", start, p) + 1
    close = _CLOSE_RE.match(text, p, end)
    if close is None:
        return None
    raw = computation_from_head(text[pos:head.end()], instrs, [], head_line, head_column)
    return raw, close.end()


def computation_from_head(head_text: str, instrs: list, attrs: list, line: int, column: int) -> RawComputation:
    m = _computation_head_regex().match(head_text)
    entry, name, param_text, result = m.groups()
    params = None
    if param_text is not None:
        params = []
        param_match = _param_regex().match
        pos = 0
        while True:
            p = param_match(param_text, pos)
            if p is None:
                break
            params.append((strip_percent(p.group(1)), p.group(2), line, column))
            pos = p.end()
    return RawComputation(strip_percent(name), entry is not None, params, result, attrs, instrs, line, column)


#: Terminals hlofuse's lexer reads with a function instead of one regular expression.
READERS = {"COMPUTATION": _read_computation}
