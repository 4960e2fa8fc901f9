"""What the parser's callbacks and the computation reader make of the text: raw records, not
yet checked or resolved (assembly turns them into `ir` objects), and small helpers on tokens."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from .. import ir

#: Attributes whose values assembly rewrites (computation names lose their `%`).
REWRITTEN_ATTRS = ir.COMPUTATION_ATTRS | {"control-predecessors"}
#: Opcodes whose parenthesised text is a literal, not operands.
LITERAL_OPCODES = frozenset({"constant", "parameter"})


@dataclass(slots=True)
class RawInstr:
    name: str | None
    opcode: str
    shape: ir.Shape | None
    operands: list  # names (str) or nested RawInstr / AnonOperand
    attrs: list[tuple[str, str]]  # (name, value); the instruction's line and column locate them
    literal: str | None
    is_root: bool
    line: int
    column: int
    operand_shapes: list | None = None  # declared shape text per operand (long form), or None
    plain: bool = False  # every operand is a name (no nested instructions, no anonymous operands)
    built: object = None  # the ir.Instruction, when the reader could make it at once


@dataclass(slots=True)
class AnonOperand:
    """An operand written as a bare shape (lone-instruction syntax): becomes a parameter."""

    shape: ir.Shape
    line: int
    column: int


@dataclass(slots=True)
class RawComputation:
    name: str
    is_entry: bool
    params: list[tuple[str, str, int, int]] | None  # (name, shape text, line, col) from the signature
    result_shape: str | None
    attrs: list[tuple[str, str, int, int]]
    instrs: list  # RawInstr; from the computation reader, mostly ir.Instruction (see `roots`)
    line: int
    column: int
    #: Set by the computation reader: the positions of the instructions written with ROOT.  Its
    #: instructions are then ir.Instructions, or RawInstrs whose operands are all names.
    roots: list[int] | None = None


@dataclass(slots=True)
class RawModule:
    form: str
    name: str
    attrs: list[tuple[str, str, int, int]] = field(default_factory=list)
    sections: list[tuple[str, list]] = field(default_factory=list)
    computations: list[RawComputation] = field(default_factory=list)
    lone: RawInstr | None = None
    line: int = 1
    column: int = 1


@dataclass(slots=True)
class Literal:
    text: str
    line: int
    column: int
    is_name: bool = False


def token_type(obj) -> str | None:
    return getattr(obj, "type", None)


def strip_percent(name: str) -> str:
    return sys.intern(name[1:] if name.startswith("%") else name)


NAME_CHARS_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*(?:#[0-9]+)*\Z")  # `t#2`: an element of tuple t


def is_name(text) -> bool:
    return isinstance(text, str) and NAME_CHARS_RE.match(text) is not None


class LocatedError(Exception):
    """Raised inside callbacks; becomes an HloSyntaxError once the source text is at hand."""

    def __init__(self, message, line, column):
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def token_text(tok) -> str:
    """A token's text.  (A COMPUTATION token's value is what the lexer read; its text is the head.)"""
    value = getattr(tok, "value", None)
    return value if isinstance(value, str) else str(tok)


def token_attr(tok) -> tuple[str, str, int, int]:
    """An ATTR token `, name=value` → (name, value, line, column)."""
    text = token_text(tok)
    eq = text.index("=")
    return (sys.intern(text[1:eq].strip()), text[eq + 1 :].strip(), tok.line, tok.column)
