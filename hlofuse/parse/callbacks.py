"""Callbacks that the parser (lalr.py, or Lark's) runs at each reduction while it parses (no
parse tree is built): one method per grammar rule, each returning a raw record (`records`) or
plain values."""

from __future__ import annotations

import sys

from .reader import computation_from_head, raw_instruction
from .records import (LITERAL_OPCODES, AnonOperand, Literal, LocatedError, RawComputation, RawInstr, RawModule,
                      strip_percent, token_attr, token_text, token_type)
from .shapes import parse_shape


def _root_marker(children) -> tuple[bool, int]:
    """Whether an instruction's children start with the ROOT keyword, and where the rest starts."""
    is_root = token_type(children[0]) == "ROOT"
    return is_root, int(is_root)


class Callbacks:
    """Callbacks named after grammar rules; each returns a raw record or plain values.  (Lark
    takes any object with such methods; a rule without one becomes a lark.Tree there.)"""

    # -- instructions -------------------------------------------------------------------
    def fast_instruction(self, children):
        head = children[0]
        # ATTR tokens after the INSTRUCTION token: attributes after a comment
        return raw_instruction(token_text(head), head.line, head.column, [token_attr(t)[:2] for t in children[1:]])

    def instruction(self, children):
        is_root, i = _root_marker(children)
        name_tok = children[i]
        name = strip_percent(token_text(name_tok)[:-1].strip())
        i += 1
        shape = None
        if token_type(children[i]) == "SHAPE":
            shape = parse_shape(token_text(children[i]))
            i += 1
        call = children[i]
        attrs = [token_attr(t)[:2] for t in children[i + 1 :]]
        return self._from_call(name, shape, call, attrs, is_root, name_tok.line, name_tok.column)

    def anonymous_instruction(self, children):
        is_root, i = _root_marker(children)
        shape_tok = children[i]
        call = children[i + 1]
        attrs = [token_attr(t)[:2] for t in children[i + 2 :]]
        return self._from_call(None, parse_shape(token_text(shape_tok)), call, attrs, is_root, shape_tok.line, shape_tok.column)

    def lone_instruction(self, children):
        return children[0]

    def call(self, children):
        opcode_tok = children[0]
        opcode = sys.intern(token_text(opcode_tok)[:-1].strip())
        return (opcode, children[1:], opcode_tok.line, opcode_tok.column)

    def _from_call(self, name, shape, call, attrs, is_root, line, column):
        opcode, operands, _, _ = call
        literal = None
        operand_shapes: list | None = []
        names: list = []
        if opcode in LITERAL_OPCODES:
            if len(operands) != 1 or not isinstance(operands[0], Literal):
                if opcode == "parameter" or operands:
                    raise LocatedError(f"expects a literal in {opcode}(...)", line, column)
            literal = operands[0].text if operands else ""
            operand_shapes = None
        else:
            for op in operands:
                if isinstance(op, Literal):
                    if op.is_name:  # `true`, `inf`: lexed as literals, meant as names
                        names.append(op.text)
                        operand_shapes.append(None)
                        continue
                    raise LocatedError(
                        "expects an operand name (a literal is only valid in constant(...))", op.line, op.column
                    )
                if isinstance(op, tuple):  # named operand: (shape text | None, name)
                    operand_shapes.append(op[0])
                    names.append(op[1])
                else:  # nested instruction or anonymous operand
                    operand_shapes.append(None)
                    names.append(op)
            if all(s is None for s in operand_shapes):
                operand_shapes = None
        return RawInstr(name, opcode, shape, names, attrs, literal, is_root, line, column, operand_shapes)

    # -- operands -----------------------------------------------------------------------
    def named_operand(self, children):
        if len(children) == 2:
            return (token_text(children[0]), strip_percent(token_text(children[1])))
        return (None, strip_percent(token_text(children[0])))

    def anonymous_operand(self, children):
        tok = children[0]
        return AnonOperand(parse_shape(token_text(tok)), tok.line, tok.column)

    def nested_instruction(self, children):
        shape = None
        i = 0
        if token_type(children[0]) == "SHAPE":
            shape = parse_shape(token_text(children[0]))
            i = 1
        call = children[i]
        attrs = [token_attr(t)[:2] for t in children[i + 1 :]]
        return self._from_call(None, shape, call, attrs, False, call[2], call[3])

    def literal_operand(self, children):
        return children[0]

    def literal(self, children):
        tok = children[0]
        text = token_text(tok)
        return Literal(text, tok.line, tok.column, is_name=text in ("true", "false", "inf", "nan"))

    def literal_tuple(self, children):
        first = children[0]
        return Literal("(" + ", ".join(c.text for c in children) + ")", first.line, first.column)

    # -- computations -------------------------------------------------------------------
    def param(self, children):
        name_tok, shape_tok = children
        return (strip_percent(token_text(name_tok)[:-1].strip()), token_text(shape_tok), name_tok.line, name_tok.column)

    def signature(self, children):
        return ("signature", children[:-1], token_text(children[-1]))

    def computation(self, children):
        if children[0].type == "COMPUTATION_HEAD":
            return self.head_computation(children)
        i = 0
        is_entry = False
        if token_type(children[0]) == "ENTRY":
            is_entry = True
            i = 1
        name_tok = children[i]
        i += 1
        params = result = None
        if i < len(children) and isinstance(children[i], tuple) and children[i][0] == "signature":
            _, params, result = children[i]
            i += 1
        attrs = [token_attr(c) for c in children[i:] if token_type(c) == "ATTR"]
        instrs = [c for c in children[i:] if isinstance(c, RawInstr)]
        first = children[0]
        return RawComputation(
            strip_percent(token_text(name_tok)), is_entry, params, result, attrs, instrs, first.line, first.column,
        )

    def fast_computation(self, children):
        """`computation: COMPUTATION ATTR*`: the lexer has read the computation already, and
        those right after it (a list of them; attributes after them are the last one's)."""
        raws = children[0].value
        raws[-1].attrs.extend(token_attr(t) for t in children[1:])
        return raws

    def head_computation(self, children):
        """`computation: COMPUTATION_HEAD instruction* "}" ATTR*`."""
        head = children[0]
        instrs, attrs = [], []
        for child in children[1:]:
            if isinstance(child, RawInstr):
                instrs.append(child)
            else:
                attrs.append(token_attr(child))
        return computation_from_head(token_text(head), instrs, attrs, head.line, head.column)

    def computation_body(self, children):
        return list(children)

    # -- module -------------------------------------------------------------------------
    def header_section(self, children):
        entries = []
        for tok in children[1:]:  # one token: the lexer reads a table's entries in one go
            entries.extend(tok.value)
        return (token_type(children[0]), entries)

    def hlo_module(self, children):
        name = token_text(children[0]).rstrip(":")
        mod = RawModule("module", name)
        for child in children[1:]:
            if isinstance(child, RawComputation):
                mod.computations.append(child)
            elif isinstance(child, list):  # computations the lexer read one after another
                mod.computations.extend(child)
            elif isinstance(child, tuple):
                mod.sections.append(child)
            else:
                mod.attrs.append(token_attr(child))
        return mod

    def bare_computations(self, children):
        computations = []
        for child in children:
            if isinstance(child, list):  # computations the lexer read one after another
                computations.extend(child)
            else:
                computations.append(child)
        return RawModule("computations", "module", computations=computations)

    def start(self, children):
        child = children[0]
        if isinstance(child, RawInstr):
            return RawModule("instruction", "", lone=child, line=child.line, column=child.column)
        return child

