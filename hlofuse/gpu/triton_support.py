"""Which instructions Triton's emitter can generate: IsTritonSupportedInstruction
(xla/backends/gpu/codegen/triton/support.cc at XLA 5a9e73cb, for NVIDIA GPUs).

PriorityFusion asks it for every instruction on both sides of a pair that would become a
generic Triton fusion (CanFuseTriton's IsTritonSupported); the first refusal is XLA's reason,
word for word (every string below is in jaxlib 0.10.2's CUDA plugin).  At this commit a
concatenate is supported anywhere (it used to be only inside nested GEMM fusions), so a Triton
normalisation fusion can grow into a concatenate that reads it; pads are accepted here but
SymbolicTileAnalysis then refuses to tile them outside GEMM fusions (hlofuse/cost/tiling.py).

The element-type tables follow support.cc's TritonSupported{Unary,Binary,Ternary}ElementwiseOps;
the type of an elementwise op is that of its last operand (so `compare` and `select`, whose
result or first operand is `pred`, are judged by the values they compare or pick).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import attributes
from ..ir import FLOAT_TYPES, INTEGRAL_TYPES
from .properties import is_elementwise

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node

#: IsTritonSupportedDataType on CUDA.
DATA_TYPES = frozenset({"pred", "s4", "s8", "s16", "s32", "s64", "f16", "f32", "f64", "bf16",
                        "f8e5m2", "f8e4m3fn"})
#: internal::IsTritonUnsupportedOpcode.
UNSUPPORTED_OPCODES = frozenset({"dynamic-reshape", "dynamic-update-slice", "gather", "ragged-dot",
                                 "reduce-window", "scatter", "select-and-scatter", "set-dimension-size"})
_F8 = frozenset({"f8e5m2", "f8e4m3fn"})
_FLOAT_UNARY = frozenset({
    "acos", "acosh", "asin", "asinh", "atanh", "cbrt", "ceil", "cosine", "cosh", "erf", "exponential",
    "exponential-minus-one", "floor", "log", "log-plus-one", "round-nearest-even", "rsqrt", "sine", "sinh",
    "sqrt", "tan", "tanh",
})


def _unary_ops(element_type: str) -> frozenset[str]:
    if element_type == "pred":
        return frozenset({"not", "copy"})
    if element_type == "s4":
        return frozenset()
    ops = {"abs", "copy"}
    if element_type not in _F8:
        ops.add("negate")
    if element_type in INTEGRAL_TYPES:
        ops.add("not")
    if element_type in ("bf16", "f16", "f32", "f64"):
        ops |= _FLOAT_UNARY
    if element_type in FLOAT_TYPES:
        ops.add("reduce-precision")
    return frozenset(ops)


def _binary_ops(element_type: str) -> frozenset[str]:
    if element_type == "s4" or element_type in _F8:
        return frozenset()
    ops = {"add", "compare", "maximum", "minimum", "multiply"}
    if element_type == "pred":
        return frozenset(ops | {"and", "or", "xor"})
    ops.add("subtract")
    if element_type in INTEGRAL_TYPES:
        ops |= {"divide", "and", "or", "xor", "remainder"}
    if element_type in ("f32", "f64", "bf16", "f16"):
        ops |= {"atan2", "divide", "remainder", "power"}
    return frozenset(ops)


def _ternary_ops(element_type: str) -> frozenset[str]:
    if element_type == "s4":
        return frozenset()
    if element_type in _F8:
        return frozenset({"select"})
    return frozenset({"select", "clamp"})


def supported_elementwise(opcode: str, element_type: str) -> bool:
    """IsTritonSupportedElementwise."""
    return (opcode in _unary_ops(element_type) or opcode in _binary_ops(element_type)
            or opcode in _ternary_ops(element_type))


def _data_type(element_type: str) -> str | None:
    """IsTritonSupportedDataType's refusal, or None."""
    if element_type in DATA_TYPES:
        return None
    return f"Unsupported data type: {element_type}"


def _conversion(output: str, source: str, hopper: bool) -> str | None:
    """IsTritonSupportedConversion's refusal, or None."""
    def refuse(why: str) -> str:
        return f"Unsupported conversion in Triton: {source} to {output} with message:\n{why}"

    either = {source, output}
    if source != output and "f8e4m3fn" in either and not hopper:
        return refuse("F8E4M3FN is not supported before Hopper.")
    f8_in, f8_out = source in _F8, output in _F8
    if source != output and (f8_in or f8_out) and not (f8_in and f8_out) and not either & {"f16", "bf16", "f32"}:
        return refuse("Unsupported F8 conversion.")
    if source == "s4" and output not in ("s8", "f16", "bf16", "f32", "f64"):
        return refuse("Unsupported S4 conversion.")
    if output == "s4":
        return refuse("Unsupported S4 output type.")
    if _data_type(source) is not None:
        return f"Unsupported input type for conversion: {source}"
    if _data_type(output) is not None:
        return f"Unsupported output type for conversion: {output}"
    return None


def _reduce(node: "Node", hopper: bool) -> str | None:
    """CanTritonHandleReduce."""
    if node.shape.is_array and node.shape.element_type in _F8:
        return "F8E4M3FN and F8E5M2 are not supported for reductions."
    reducer = node.attr("to_apply")
    graph = node.graph.program.graphs.get(reducer.strip().lstrip("%")) if reducer and node.graph else None
    if graph is not None and any(instruction_support(n, hopper) is not None for n in graph.nodes()):
        return "Unsupported reduction computation by Triton."
    if len(attributes.dimensions(node)) == 1 and len(node.operands) == 2:
        return None
    return "Reduction is not a row-reduction of a single operand."


def instruction_support(node: "Node", hopper: bool = True) -> str | None:
    """IsTritonSupportedInstruction: None when Triton can emit `node`, else XLA's reason.
    `hopper`: the GPU is Hopper or newer (some float8 conversions need it)."""
    op = node.opcode
    if op in UNSUPPORTED_OPCODES:
        return f"Unsupported opcode {op}"
    if op == "convert":
        return _conversion(node.shape.element_type, node.operands[0].shape.element_type, hopper)
    shape = node.shape
    if shape.is_array:
        why = _data_type(shape.element_type)
        if why is not None:
            return f"Unsupported output data type: {why}"
    for operand in node.operands:
        if operand.shape.is_array:
            why = _data_type(operand.shape.element_type)
            if why is not None:
                return f"Unsupported input data type: {why}"
    element = shape.element_type if shape.is_array else ""
    if op == "concatenate":
        return "S4 is not supported." if element == "s4" else None
    if op == "pad":
        padding = attributes.padding(node)
        if any(low != 0 or interior != 0 for low, _, interior in padding):
            return "Only high padding is supported."
        if all(high == 0 for _, high, _ in padding):
            return "No-op pad ops are not allowed."
        return "S4 is not supported." if element == "s4" else None
    if op == "constant":
        if element == "s4":
            return "S4 is not supported."
        return None if shape.is_effective_scalar else "Only scalar constants are supported in Triton."
    if op == "iota":
        return "F8E4M3FN, F8E5M2 and S4 are not supported for iota." if element in _F8 | {"s4"} else None
    if op == "reduce":
        return _reduce(node, hopper)
    if op == "parameter":
        return None
    if op == "dynamic-slice":
        return "dynamic slice is supported but not enabled yet"
    if op == "bitcast":
        operand = node.operands[0].shape
        if operand.is_array and shape.is_array and operand.elements != shape.elements:
            return "only bitcasts with the same number of elements are supported"
        if operand.element_type != element and "pred" in (operand.element_type, element):
            return "bitcasts with different element types are not supported if PRED is involved"
        return "S4 is not supported." if element == "s4" else None
    if op in ("broadcast", "reshape", "slice", "transpose"):
        return "S4 is not supported." if element == "s4" else None
    if op == "dot":
        return "Dot operation is only supported in nested GEMM fusions."
    if is_elementwise(node) and op != "constant":
        last = node.operands[-1].shape.element_type if node.operands else element
        return None if supported_elementwise(op, last) else "Unsupported elementwise operation."
    return f"Unsupported instruction opcode {op}"


def triton_support(node: "Node", generic_triton: bool, hopper: bool = True) -> str | None:
    """PriorityFusionQueue::IsTritonSupported: a generic Triton fusion is (`generic_triton`),
    another fusion is when every instruction in it is, any other instruction by itself."""
    if generic_triton:
        return None
    if node.opcode == "fusion" and node.fused is not None:
        for inner in node.fused.nodes():
            reason = instruction_support(inner, hopper)
            if reason is not None:
                return reason
        return None
    return instruction_support(node, hopper)
