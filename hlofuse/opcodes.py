"""HLO opcode names and the categories rules talk about (mirroring XLA's own lists).

Sources: xla/hlo/ir/hlo_opcode.h (names), HloInstruction::IsElementwise / IsElementwiseImpl
(elementwise), HloOpcodeArity (fixed operand counts).  Rules should say "any elementwise op"
through these sets rather than list opcodes again.
"""

from __future__ import annotations

# ---- elementwise ----------------------------------------------------------------------------

UNARY_ELEMENTWISE = frozenset({
    "abs", "acos", "acosh", "asin", "asinh", "atanh", "cbrt", "ceil", "count-leading-zeros", "convert",
    "copy", "cosh", "cosine", "erf", "exponential", "exponential-minus-one", "floor", "imag",
    "is-finite", "log", "log-plus-one", "logistic", "negate", "not", "popcnt", "real",
    "reduce-precision", "round-nearest-afz", "round-nearest-even", "rsqrt", "sign", "sine", "sinh",
    "sqrt", "tan", "tanh", "bitcast-convert",
})

BINARY_ELEMENTWISE = frozenset({
    "add", "and", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply", "or",
    "power", "remainder", "shift-left", "shift-right-arithmetic", "shift-right-logical",
    "stochastic-convert", "subtract", "xor",
})

TERNARY_ELEMENTWISE = frozenset({"clamp", "select"})

#: Elementwise when their shapes say so (bitcast-convert only without a width change; map always).
ELEMENTWISE = UNARY_ELEMENTWISE | BINARY_ELEMENTWISE | TERNARY_ELEMENTWISE | {"map"}

#: Transcendental ops that accept `result_accuracy=`.
TRANSCENDENTAL = frozenset({
    "cbrt", "cosine", "erf", "exponential", "exponential-minus-one", "log", "log-plus-one",
    "logistic", "rsqrt", "sine", "sqrt", "tan", "tanh",
})

# ---- everything else ------------------------------------------------------------------------

CONTROL_FLOW = frozenset({"while", "conditional", "call"})

COLLECTIVES = frozenset({
    "all-gather", "all-gather-start", "all-gather-done", "all-reduce", "all-reduce-start",
    "all-reduce-done", "all-to-all", "ragged-all-to-all", "collective-broadcast",
    "collective-permute", "collective-permute-start", "collective-permute-done", "reduce-scatter",
})

ASYNC = frozenset({"async-start", "async-update", "async-done", "copy-start", "copy-done",
                   "send", "send-done", "recv", "recv-done"})

#: Every opcode XLA prints (hlo_opcode.h, 2024–2026), so unknown ones can be flagged.
KNOWN = ELEMENTWISE | CONTROL_FLOW | COLLECTIVES | ASYNC | frozenset({
    "add-dependency", "after-all", "batch-norm-grad", "batch-norm-inference",
    "batch-norm-training", "bitcast", "broadcast", "cholesky", "concatenate", "constant",
    "convolution", "custom-call", "domain", "dot", "dynamic-reshape", "dynamic-slice",
    "dynamic-update-slice", "fft", "fusion", "gather", "get-dimension-size", "get-tuple-element",
    "infeed", "iota", "opt-barrier", "outfeed", "pad", "parameter", "partition-id", "ragged-dot",
    "reduce", "reduce-window", "replica-id", "reshape", "reverse", "rng", "rng-bit-generator",
    "rng-get-and-update-state", "scatter", "select-and-scatter", "set-dimension-size", "slice",
    "sort", "topk", "transpose", "triangular-solve", "tuple", "scaled-dot", "mulhi",
    # removed from XLA but present in older dumps
    "tuple-select", "trace",
})

#: Opcodes with a fixed number of operands (HloOpcodeArity).
ARITY: dict[str, int] = {
    **{op: 1 for op in UNARY_ELEMENTWISE},
    **{op: 2 for op in BINARY_ELEMENTWISE},
    **{op: 3 for op in TERNARY_ELEMENTWISE},
    "bitcast": 1, "broadcast": 1, "reshape": 1, "transpose": 1, "reverse": 1, "slice": 1,
    "get-tuple-element": 1, "pad": 2, "convolution": 2, "iota": 0, "constant": 0,
    "parameter": 0, "replica-id": 0, "partition-id": 0,
    "fft": 1, "cholesky": 1, "triangular-solve": 2, "get-dimension-size": 1,
    "set-dimension-size": 2, "reduce-precision": 1, "copy-start": 1, "copy-done": 1,
    "rng-get-and-update-state": 0, "batch-norm-training": 3, "batch-norm-inference": 5,
    "batch-norm-grad": 5, "select-and-scatter": 3, "while": 1, "topk": 1,
}


#: Not kernels: they move no data or name a buffer (parameters, constants, tuples, views).
NON_KERNEL = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "add-dependency",
    "opt-barrier", "partition-id", "replica-id", "domain",
})


def is_elementwise(opcode: str) -> bool:
    return opcode in ELEMENTWISE
