"""Properties of one instruction that every fusion decision builds on (XLA's HloInstruction:
InstructionFusion::IsExpensive and GpuInstructionFusion::IsExpensive, fusion instructions;
IsElementwise, HasSideEffect and IsFusible come from rules/instruction_facts, shared with
every backend).  Functions take `hlofuse.graph.Node`s."""

from __future__ import annotations

from ..graph import Node
from ..ir import COMPLEX_TYPES, INTEGRAL_TYPES
# Elementwise-ness, side effects and fusibility are the same questions on every backend: one
# definition each, with the rules'.
from ..rules.instruction_facts import (  # noqa: F401  (re-exported)
    ELEMENTWISE_OPCODES, has_side_effect, has_side_effect_no_recurse, is_elementwise, is_fusible)

# ------------------------------------------------------------------------------------------
# Side effects and fusibility
# ------------------------------------------------------------------------------------------

# ------------------------------------------------------------------------------------------
# Fusion instructions
# ------------------------------------------------------------------------------------------


def is_custom_fusion(node: Node) -> bool:
    return node.opcode == "fusion" and node.fusion_kind == "kCustom"


def is_loop_fusion(node: Node) -> bool:
    return node.opcode == "fusion" and node.fusion_kind == "kLoop"


def is_multi_output_fusion(node: Node) -> bool:
    return node.opcode == "fusion" and node.fused is not None and node.fused.root.opcode == "tuple"


def fused_root(node: Node) -> Node:
    return node.fused.root


def fused_instructions(node: Node) -> list[Node]:
    """The instructions of a fusion's computation in instruction-list order (parameters too)."""
    return node.fused.nodes() if node.fused is not None else []


def fusion_roots(graph) -> list[Node]:
    """GetFusionRoots: the root, or the operands of a root tuple (recursively), looking
    through get-tuple-element(tuple(...))."""
    out: list[Node] = []
    _collect_roots(graph.root, out)
    return out


def _collect_roots(root: Node, out: list[Node]) -> None:
    # a module-level helper, not a closure: a recursive closure is a reference cycle, left
    # for the cyclic collector at every call
    if root.opcode == "get-tuple-element" and root.operands[0].opcode == "tuple":
        _collect_roots(root.operands[0].operands[int(root.attr("index") or 0)], out)
    elif root.opcode == "get-tuple-element":
        out.append(root.operands[0])
    elif root.opcode == "tuple":
        for op in root.operands:
            _collect_roots(op, out)
    else:
        out.append(root)


def outputs_of_fusible(node: Node) -> list[Node]:
    """GetOutputsOfFusible: the instruction itself, or a fusion's root (root-tuple operands)."""
    if node.opcode != "fusion":
        return [node]
    root = node.fused.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def instr_count_of_fusible(node: Node) -> int:
    """GetInstrCountOfFusible: instructions in a fusion's computation (parameters included), 1 otherwise."""
    return len(node.fused) if node.opcode == "fusion" and node.fused is not None else 1


def in_fusion(node: Node) -> bool:
    return node.graph is not None and node.graph.fusion_owner is not None


# ------------------------------------------------------------------------------------------
# IsExpensive (instruction_fusion.cc, and GPU's override)
# ------------------------------------------------------------------------------------------

_CHEAP = frozenset({
    "add", "and", "bitcast", "bitcast-convert", "broadcast", "ceil", "clamp", "count-leading-zeros", "compare",
    "complex", "concatenate", "constant", "convert", "copy", "copy-done", "copy-start",
    "dynamic-slice", "dynamic-update-slice", "floor", "get-tuple-element", "imag", "infeed", "iota",
    "is-finite", "maximum", "minimum", "multiply", "negate", "not", "opt-barrier", "or", "xor",
    "outfeed", "pad", "partition-id", "popcnt", "real", "reduce-precision", "replica-id", "reshape",
    "dynamic-reshape", "reverse", "round-nearest-afz", "round-nearest-even", "select", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "slice", "stochastic-convert", "subtract",
    "transpose", "tuple",
})
_CHEAP_UNLESS_COMPLEX = frozenset({"abs", "cosine", "sign", "sine", "tan"})


def is_expensive_generic(node: Node) -> bool:
    """InstructionFusion::IsExpensive: true for ops XLA does not want to compute twice.
    Opcodes it does not list count as cheap."""
    op = node.opcode
    if op in _CHEAP:
        return False
    if op in _CHEAP_UNLESS_COMPLEX:
        return node.shape.element_type in COMPLEX_TYPES
    if op in ("divide", "remainder"):
        if node.shape.element_type in INTEGRAL_TYPES and len(node.operands) > 1:
            divisor = node.operands[1]
            if divisor.opcode == "broadcast" and divisor.operands:
                divisor = divisor.operands[0]
            if divisor.opcode == "constant" and divisor.shape.is_effective_scalar:
                return False
        return True
    return op in _EXPENSIVE


_EXPENSIVE = frozenset({
    "add-dependency", "after-all", "atan2", "async-start", "async-update", "async-done",
    "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "call", "cholesky",
    "conditional", "convolution", "all-gather", "all-gather-start", "all-gather-done",
    "all-reduce", "all-reduce-start", "all-reduce-done", "reduce-scatter", "all-to-all",
    "collective-broadcast", "collective-permute", "collective-permute-start",
    "collective-permute-done", "custom-call", "domain", "dot", "erf", "exponential",
    "exponential-minus-one", "fft", "fusion", "gather", "log", "log-plus-one", "logistic", "map",
    "parameter", "power", "recv", "recv-done", "reduce", "reduce-window", "rng",
    "rng-get-and-update-state", "rng-bit-generator", "rsqrt", "scatter", "select-and-scatter",
    "send", "send-done", "sort", "topk", "sqrt", "cbrt", "tanh", "triangular-solve", "while",
    "get-dimension-size", "set-dimension-size", "ragged-all-to-all",
    "acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh",
})


def is_expensive_gpu(node: Node) -> bool:
    """GpuInstructionFusion::IsExpensive: divide, sqrt, rsqrt and exp are cheap on f32 and f16
    (the GPU has fast instructions for them); everything else as the generic list."""
    if node.opcode in ("divide", "sqrt", "rsqrt", "exponential") and node.shape.element_type in ("f32", "f16"):
        return False
    return is_expensive_generic(node)
