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
    try:
        return _infer(opcode, operands, attrs, computations)
    except (ValueError, IndexError, KeyError, ZeroDivisionError):
        return None  # malformed attribute values: the caller reports the missing shape


def _infer(opcode: str, operands: list[ir.Shape], attrs: Mapping[str, str],
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
    if opcode == "reduce-window" and len(operands) >= 2 and len(operands) % 2 == 0:
        return _reduce_window(operands, attrs.get("window", ""))
    if opcode == "gather" and len(operands) >= 2:
        return _gather(operands[0], operands[1], attrs)
    if opcode in ("conditional", "call"):
        for key in ("true_computation", "to_apply", "branch_computations"):
            names = ir._names_in(attrs.get(key, ""))
            if names and names[0] in computations:
                return computations[names[0]].root.shape
    return None


def _reduce_window(operands: list[ir.Shape], window_text: str) -> ir.Shape | None:
    """XLA's InferReduceWindowShape: per dimension, windows that fit in the padded, dilated input."""
    from .attributes import _window

    from .parse import terminal_regex

    if not terminal_regex("WINDOW_VALUE").fullmatch(window_text):
        return None
    half = len(operands) // 2
    inputs, inits = operands[:half], operands[half:]
    window = _window(window_text)
    if not inputs[0].is_array or len(window) != inputs[0].rank:
        return None
    dims = []
    for size, w in zip(inputs[0].dims, window):
        padded = (max(size, 0) - 1) * w.lhs_dilation + 1 + w.pad_low + w.pad_high if size > 0 else 0
        reach = (w.size - 1) * w.rhs_dilation + 1
        if w.stride <= 0:
            return None
        dims.append(0 if padded < reach else (padded - reach) // w.stride + 1)
    shapes = [ir.array_shape(init.element_type, tuple(dims)) for init in inits]
    return shapes[0] if half == 1 else ir.tuple_shape(shapes)


def _gather(operand: ir.Shape, indices: ir.Shape, attrs: Mapping[str, str]) -> ir.Shape | None:
    """XLA's InferGatherShape: batch dimensions of the indices, interleaved with the slice's
    offset dimensions at the positions `offset_dims` names."""
    if not operand.is_array or not indices.is_array:
        return None
    offset_dims = set(_ints(attrs.get("offset_dims")))
    dropped = set(_ints(attrs.get("collapsed_slice_dims"))) | set(_ints(attrs.get("operand_batching_dims")))
    vector_dim = _ints(attrs.get("index_vector_dim"))
    index_vector_dim = vector_dim[0] if vector_dim else indices.rank
    slice_sizes = _ints(attrs.get("slice_sizes"))
    batch = [d for i, d in enumerate(indices.dims) if i != index_vector_dim]
    offsets = [d for i, d in enumerate(slice_sizes) if i not in dropped]
    if len(offsets) != len(offset_dims):
        return None
    batch_it, offset_it = iter(batch), iter(offsets)
    try:
        dims = [next(offset_it) if k in offset_dims else next(batch_it) for k in range(len(batch) + len(offsets))]
    except StopIteration:
        return None
    return ir.array_shape(operand.element_type, tuple(dims))
