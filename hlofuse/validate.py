"""Checks XLA's parser makes on each instruction while it reads (opcodes, operand counts,
attributes, literals), run after the module is assembled.  Each failure is an HloSyntaxError
at the instruction's line and column."""

from __future__ import annotations

import dataclasses

from . import ir
from .errors import HloSyntaxError
from .opcodes import ARITY, KNOWN


def check_module(module: ir.Module, text: str, *, strict: bool = False) -> ir.Module:
    warnings = list(module.warnings)
    lines = None

    def error(message, instr):
        nonlocal lines
        if lines is None:
            lines = text.splitlines()
        span = instr.span
        src = lines[span.line - 1] if span and 0 < span.line <= len(lines) else None
        return HloSyntaxError(message, line=span.line if span else None, column=span.column if span else None,
                              source_line=src)

    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode not in KNOWN:
                where = f"{instr.span.line}:{instr.span.column}" if instr.span else "?"
                if strict:
                    raise error(f"unknown opcode: {instr.opcode}", instr)
                warnings.append(f"{where}: unknown opcode {instr.opcode!r} kept as an opaque instruction")
                continue
            arity = ARITY.get(instr.opcode)
            if arity is not None and len(instr.operands) != arity:
                raise error(f"{instr.opcode} expects {arity} operand(s), but has {len(instr.operands)}", instr)
    if warnings != list(module.warnings):
        module = dataclasses.replace(module, warnings=tuple(warnings))
    return module
