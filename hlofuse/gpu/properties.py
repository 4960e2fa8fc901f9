"""Properties of one instruction that every fusion decision builds on (XLA's HloInstruction:
IsFusible, IsElementwise, HasSideEffect, ReusesOperandElements; InstructionFusion::IsExpensive
and GpuInstructionFusion::IsExpensive).  Functions take `hlofuse.graph.Node`s."""

from __future__ import annotations

from ..attributes import dimensions
from ..graph import Node
from ..ir import COMPLEX_TYPES, INTEGRAL_TYPES
from .shapes import bit_width

# ------------------------------------------------------------------------------------------
# Elementwise (HloInstruction::IsOpElementwise and the IsElementwiseImpl overrides)
# ------------------------------------------------------------------------------------------

#: Opcodes that are elementwise by their opcode alone (hlo_instruction.cc, both eras; ops that
#: did not exist yet in 2024 are harmless here).
ELEMENTWISE_OPCODES = frozenset({
    # unary
    "abs", "round-nearest-afz", "round-nearest-even", "ceil", "count-leading-zeros", "convert", "bitcast-convert",
    "copy", "cosine", "erf", "exponential", "exponential-minus-one", "floor", "imag", "is-finite",
    "log", "log-plus-one", "not", "negate", "popcnt", "real", "reduce-precision", "rsqrt",
    "logistic", "sign", "sine", "sqrt", "cbrt", "tan", "tanh",
    "acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh",
    # binary
    "add", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply", "power",
    "remainder", "subtract", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "stochastic-convert", "mulhi",
    # ternary
    "select", "clamp",
})


def is_elementwise(node: Node) -> bool:
    """HloInstruction::IsElementwise.  Constants and rng count as elementwise; a map only over
    all its dimensions in order; a fusion when everything inside is; a bitcast-convert only
    when it keeps the bit width; a dynamic-update-slice never (only "on operand 0")."""
    op = node.opcode
    if op in ("constant", "rng"):
        return True
    if op == "map":
        dims = dimensions(node)
        return not dims or tuple(dims) == tuple(range(node.shape.rank))
    if op == "fusion":
        return node.fused is not None and all(
            n.opcode == "parameter" or is_elementwise(n) for n in node.fused.nodes())
    if op == "bitcast-convert":
        return bool(node.operands) and \
            bit_width(node.shape.element_type) == bit_width(node.operands[0].shape.element_type)
    return op in ELEMENTWISE_OPCODES


def is_elementwise_on_operand(node: Node, index: int) -> bool:
    """HloInstruction::IsElementwiseOnOperand: a dynamic-update-slice is elementwise on its
    operand 0; everything else as `is_elementwise`."""
    if node.opcode == "dynamic-update-slice":
        return index == 0
    return is_elementwise(node)


# ------------------------------------------------------------------------------------------
# Side effects and fusibility
# ------------------------------------------------------------------------------------------

_ALWAYS_SIDE_EFFECTING = frozenset({
    "send", "send-done", "recv", "recv-done", "rng", "rng-get-and-update-state", "infeed",
    "outfeed", "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-broadcast", "collective-permute-start", "collective-permute-done",
})


def _is_spmd(node: Node) -> bool:
    """Whether the module was SPMD-partitioned (the text shows it as num_partitions > 1)."""
    program = node.graph.program if node.graph is not None else None
    source = getattr(program, "source", None)
    return source is not None and (source.attr("num_partitions") or "1") != "1"


def has_side_effect_no_recurse(node: Node) -> bool:
    """HloInstruction::HasSideEffectNoRecurse."""
    op = node.opcode
    if op in _ALWAYS_SIDE_EFFECTING:
        return True
    if op in ("all-to-all", "all-gather", "all-reduce", "reduce-scatter", "collective-permute"):
        if op != "collective-permute" and (node.attr("constrain_layout") or "").lower() == "true":
            return True
        return node.attr("channel_id") is not None and not _is_spmd(node)
    if op == "custom-call":
        return (node.attr("custom_call_has_side_effect") or "").lower() == "true"
    return False


def has_side_effect(node: Node) -> bool:
    """HloInstruction::HasSideEffect: this instruction, or anything in a computation it calls."""
    if has_side_effect_no_recurse(node):
        return True
    program = node.graph.program if node.graph is not None else None
    called = []
    if node.fused is not None:
        called.append(node.fused)
    if program is not None:
        called.extend(program.graphs[c] for c in node.called if c in program.graphs)
    return any(has_side_effect(n) for g in called for n in g.nodes())


def is_fusible(node: Node) -> bool:
    """HloInstruction::IsFusible: never domain, parameter, while, conditional, call; always
    fusion, map, reduce, reduce-window; rng only with at most one user; otherwise whatever
    has no side effect."""
    op = node.opcode
    if op in ("domain", "parameter", "while", "conditional", "call"):
        return False
    if op in ("fusion", "map", "reduce", "reduce-window"):
        return True
    if op == "rng":
        return len(node.users) <= 1
    return not has_side_effect(node)


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

    def visit(root: Node) -> None:
        if root.opcode == "get-tuple-element" and root.operands[0].opcode == "tuple":
            visit(root.operands[0].operands[int(root.attr("index") or 0)])
        elif root.opcode == "get-tuple-element":
            out.append(root.operands[0])
        elif root.opcode == "tuple":
            for op in root.operands:
                visit(op)
        else:
            out.append(root)

    visit(graph.root)
    return out


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
# Operand reuse (HloInstruction::ReusesOperandElements)
# ------------------------------------------------------------------------------------------

REUSE, USE, NO_USE = 0, 1, 2


def operand_element_use(node: Node, index: int) -> int:
    """How an instruction uses the elements of operand `index`: REUSE (several times), USE."""
    op = node.opcode
    if op in ("bitcast", "concatenate", "reshape", "reverse", "slice", "transpose", "gather"):
        return USE
    if op == "pad":
        return REUSE if index > 0 else USE
    if op == "reduce":
        return REUSE if index >= len(node.operands) // 2 else USE
    if op == "fusion":
        return _fusion_param_use(index, node.fused.root, {})
    if op == "dot":
        if node.shape.rank <= 1:
            other = node.operands[1 - index] if len(node.operands) == 2 and index in (0, 1) else None
            if other is not None and other.shape.rank <= 1:
                return USE
        return REUSE
    if op == "dynamic-update-slice":
        return USE if index in (0, 1) else REUSE
    return USE if is_elementwise(node) else REUSE


def _fusion_param_use(param_number: int, node: Node, cache: dict) -> int:
    """FusionReusesParamElements: the meet (REUSE < USE < NO_USE) over all paths from the
    fused root down to parameter `param_number`."""
    if node.opcode == "parameter" and node.parameter_number == param_number:
        return USE
    key = node.uid
    if key in cache:
        return cache[key]
    cache[key] = NO_USE
    value = NO_USE
    for i, operand in enumerate(node.operands):
        use = operand_element_use(node, i)
        if use == NO_USE:
            continue
        below = _fusion_param_use(param_number, operand, cache)
        if below == NO_USE:
            continue
        value = min(value, use, below)
        cache[key] = value
        if value == REUSE:
            break
    return cache[key]


def reuses_operand_elements(node: Node, index: int) -> bool:
    return operand_element_use(node, index) == REUSE


def reused_operands(node: Node) -> set[Node]:
    """The operands an instruction reads more than once per output element (the set XLA's
    InstructionFusion keeps per consumer in `reused_fusion_operands_`)."""
    return {op for i, op in enumerate(node.operands) if reuses_operand_elements(node, i)}


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


def is_always_duplicable(node: Node) -> bool:
    """IsAlwaysDuplicable (instruction_fusion.cc): a widening convert, or any broadcast —
    duplicating them costs less than materialising them."""
    if node.opcode == "broadcast":
        return True
    if node.opcode == "convert" and node.operands:
        from .shapes import byte_size

        return byte_size(node.operands[0].shape) < byte_size(node.shape)
    return False
