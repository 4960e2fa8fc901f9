"""What an instruction computes, as a key that survives renaming and a change of jax or XLA
version: the user's source location, the last component of its op_name, and its opcode.

Instruction names are XLA's numbering (`add.42`), which changes whenever anything before it
changes; two compiles of one program agree on what the user wrote instead.  jax's op_name
paths differ between versions (`jit(f)/jit(main)/while/body/add` in jax 0.4.35,
`jit(f)/while/body/closed_call/add` in 0.10), so only the primitive at its end is kept.
An instruction without metadata (a broadcast XLA added, a copy, a bitcast) is keyed by its
opcode, element type and dimensions and the keys of its first operands, followed through a
fusion's parameters to the fusion's operands: renaming leaves it alone, and it stays
attached to the user's value it derives from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from .. import attributes, ir

#: How far a key without metadata follows operands (deeper adds little and costs time).
_DEPTH = 3


@dataclass(frozen=True, slots=True)
class Key:
    """What an instruction computes, independent of its name.  A key with a source location
    and an op name is compared without its opcode: one line of the user's code is lowered to
    other opcodes by other versions (a dot_general is a cuBLAS custom-call in jax 0.4.35 and
    a dot inside a GEMM fusion in 0.10)."""

    opcode: str = field(compare=False)
    file: str | None = None
    line: int | None = None
    op: str | None = None  # the last component of jax's op_name
    derived: tuple = ()  # without metadata: shape and the operands' keys

    @property
    def anchored(self) -> bool:
        """Whether the key names a place in the user's code (not only a shape and operands)."""
        return self.file is not None or self.line is not None

    def short(self) -> str:
        where = f"{self.file}:{self.line}" if self.file or self.line else ""
        what = self.op or self.opcode
        return f"{what} at {where}" if where else what


def op_tail(op_name: str | None) -> str | None:
    """The primitive at the end of a jax op_name path (`.../jit(_where)/select_n` → select_n)."""
    if not op_name:
        return None
    tail = op_name.rstrip("/").rsplit("/", 1)[-1]
    if tail.startswith("jit(") and tail.endswith(")"):
        tail = tail[4:-1]
    return tail or None


class ModuleKeys:
    """Keys of the instructions of one module, by name (names are unique in an HLO module),
    computed on demand and memoised."""

    def __init__(self, module: ir.Module):
        self.module = module
        self._where: dict[str, tuple[ir.Computation, ir.Instruction]] = {}
        self._caller: dict[str, tuple[ir.Computation, ir.Instruction]] = {}
        for comp in module.computations:
            for instr in comp.instructions:
                self._where.setdefault(instr.name, (comp, instr))
                if instr.opcode == "fusion" and instr.fused_computation:
                    self._caller[instr.fused_computation] = (comp, instr)
        self._memo: dict[tuple[str, int], Key] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def instruction(self, name: str) -> ir.Instruction | None:
        found = self._where.get(name)
        return found[1] if found else None

    def key(self, name: str) -> Key | None:
        """The key of the instruction `name`; None when the module has no such instruction."""
        found = self._where.get(name)
        if found is None:
            return None
        return self._key(found[0], found[1], _DEPTH)

    def _key(self, comp: ir.Computation, instr: ir.Instruction, depth: int) -> Key:
        memo = (instr.name, depth)
        if memo in self._memo:
            return self._memo[memo]
        if instr.opcode == "parameter":
            outer = self._caller.get(comp.name)
            if outer is not None and depth > 0:  # a fusion's parameter is the fusion's operand
                caller, fusion = outer
                number = instr.parameter_number
                if number < len(fusion.operands) and fusion.operands[number] in caller:
                    key = self._key(caller, caller[fusion.operands[number]], depth - 1)
                    self._memo[memo] = key
                    return key
            key = Key("parameter", derived=("parameter", instr.parameter_number, shape_key(instr.shape)))
        elif instr.opcode == "fusion" and instr.fused_computation in self.module.by_name:
            body = self.module.by_name[instr.fused_computation]  # a fusion computes its root
            key = self._key(body, body.root, depth)
        else:
            key = self._own(instr) or Key(instr.opcode, derived=(instr.opcode, shape_key(instr.shape)) + tuple(
                self._key(comp, comp[op], depth - 1) if depth > 0 and op in comp else "..."
                for op in instr.operands[:2]))  # deeper than _DEPTH: no name (it would not survive renaming)
        self._memo[memo] = key
        return key

    def _own(self, instr: ir.Instruction) -> Key | None:
        loc = attributes.source_location(self.module, instr)
        op = op_tail(attributes.metadata(instr).op_name)
        if loc is None and op is None:
            return None
        file = PurePosixPath(loc.file).name if loc is not None and loc.file else None
        line = loc.line if loc is not None else None
        if file is None and line is None and op is None:
            return None
        return Key(instr.opcode, file, line, op, () if op else (instr.opcode,))


def shape_key(shape: ir.Shape) -> tuple:
    """A shape's element types and dimensions, without its layout."""
    if shape.is_tuple:
        return tuple(shape_key(s) for s in shape.tuple_shapes)
    return (shape.element_type, shape.dims)
