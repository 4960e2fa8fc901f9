"""Shapes XLA's parser infers when the text leaves them out (`add = add(x, y)`), for the
opcodes where the rule is simple.  Returns None where hlofuse does not infer."""

from __future__ import annotations

import re
from typing import Mapping

from . import ir
from .opcodes import ELEMENTWISE


def _ints(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"-?\d+", text or ""))


def infer(opcode: str, operands: list[ir.Shape], attrs: Mapping[str, str],
          computations: Mapping[str, ir.Computation]) -> ir.Shape | None:
    if opcode in ELEMENTWISE and operands:
        first = next((s for s in operands if s.rank), operands[0])
        if not first.is_array:
            return None
        etype = first.element_type
        if opcode == "compare":
            etype = "pred"
        elif opcode == "select":
            etype = operands[1].element_type
        return ir.array_shape(etype, first.dims)
    if opcode == "tuple":
        return ir.tuple_shape(operands)
    if opcode == "get-tuple-element" and operands and operands[0].is_tuple:
        index = _ints(attrs.get("index"))
        if index and 0 <= index[0] < len(operands[0].tuple_shapes):
            return operands[0].tuple_shapes[index[0]]
        return None
    if opcode == "dot" and len(operands) >= 2:  # sparse dots carry metadata operands after these
        lhs, rhs = operands[:2]
        lc, rc = set(_ints(attrs.get("lhs_contracting_dims"))), set(_ints(attrs.get("rhs_contracting_dims")))
        lb, rb = _ints(attrs.get("lhs_batch_dims")), _ints(attrs.get("rhs_batch_dims"))
        dims = [lhs.dims[d] for d in lb]
        dims += [d for i, d in enumerate(lhs.dims) if i not in lc and i not in lb]
        dims += [d for i, d in enumerate(rhs.dims) if i not in rc and i not in rb]
        return ir.array_shape(lhs.element_type, tuple(dims))
    if opcode in ("conditional", "call"):
        for key in ("true_computation", "to_apply", "branch_computations"):
            names = ir._names_in(attrs.get(key, ""))
            if names and names[0] in computations:
                return computations[names[0]].root.shape
    return None
