"""XLA:CPU's fusion rules: CpuInstructionFusion::ShouldFuse, its IsExpensive and ChooseKind
(xla/service/cpu/cpu_instruction_fusion.cc at the XLA of jaxlib 0.10.2).

`CPU_SHOULD_FUSE_*` list the rules in XLA's evaluation order (docs/xla/cpu-fusion.md §3.2):

    C0  consumer inside a custom (library) fusion or custom-call body     CPU-CUSTOM-FUSION-CONSUMER
    C1  non-scalar constant producer                                      CPU-NON-SCALAR-CONSTANT
    C2  matrix-vector dot into an add: ALLOW as kOutput                   (can_be_output_fused)
    C3  the producer is an add a dot could be output-fused into           CPU-OUTPUT-FUSIBLE-ADD
    C4  producer not loop-fusible                                         CPU-NOT-LOOP-FUSIBLE
    C5  concatenate with > 8 operands or along a large minor dimension    CPU-CONCATENATE
    C6  expensive producer whose elements the consumer reuses             CPU-EXPENSIVE-REUSE
    C7  InstructionFusion::ShouldFuse (root, duplication, in place)       rules/instruction_fusion.py
    C8  a reduce into a fusion that already holds more than 5 reduces     CPU-TOO-MANY-REDUCTIONS
    C9  a constant into an unfused consumer                               CPU-CONSTANT-ALONE
    C10 a fusion producer                                                 CPU-FUSION-PRODUCER
    C11 code duplication too high                                         CPU-CODE-DUPLICATION
    C12–C14 small matrix-vector dot / kLoop fusion / loop-fusible consumer: ALLOW
    C15 none of these                                                     CPU-NO-FUSIBLE-CASE

Rules read the pass state from a `FusionCandidate` (see rules/instruction_fusion.py);
`run.skipped` holds the uids of the instructions C0 protects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import attributes
from . import XLA_COMMITS, Candidate, XlaRef, objection, rule
from . import instruction_fusion as rif
from .instruction_facts import updates_in_place

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node

_FILE = "xla/service/cpu/cpu_instruction_fusion.cc"
_FN = "CpuInstructionFusion::ShouldFuse"
_COMMIT = XLA_COMMITS["cpu"]
_CPU = ("cpu",)

#: kMaxConcatenateArguments, the minor-dimension size from which a concatenate is "large",
#: kMaxReductionsInFusion and kFusionThresholdBytes of cpu_instruction_fusion.cc.
MAX_CONCATENATE_ARGUMENTS = 8
MINOR_CONCATENATE_SIZE = 128
MAX_REDUCTIONS_IN_FUSION = 5
FUSION_THRESHOLD_BYTES = 16 * 1024

#: Besides elementwise ops, what the CPU loop emitter generates element by element (CanBeLoopFused).
LOOP_FUSIBLE_OPCODES = frozenset({
    "bitcast", "broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice", "gather", "iota",
    "pad", "reduce", "reshape", "reverse", "slice", "transpose",
})

#: The `fusion_config.kind` of library fusions made before `fusion` (LibraryRewriter).
LIBRARY_FUSION_KINDS = {"__ynn_fusion": "YNNPACK", "__onednn_fusion": "oneDNN", "__xnn_fusion": "XNNPACK"}

# ------------------------------------------------------------------------------------------
# Predicates of cpu_instruction_fusion.cc
# ------------------------------------------------------------------------------------------


def can_be_loop_fused(node: "Node") -> bool:
    """CanBeLoopFused: the elemental emitter can compute it one output element at a time."""
    return rif.is_elementwise(node) or node.opcode in LOOP_FUSIBLE_OPCODES


def is_matrix_vector_dot(node: "Node") -> bool:
    """IsNonComplexNonBatchedMatrixVectorDot (result rank at most 1, no batch dimensions)."""
    return (node.opcode == "dot" and node.shape.element_type not in ("c64", "c128")
            and node.shape.rank <= 1 and not attributes.int_list(node.attr("lhs_batch_dims")))


def has_exactly_one_use(node: "Node") -> bool:
    return len(node.users) == 1 and sum(1 for op in node.users[0].operands if op is node) == 1


def can_be_output_fused(producer: "Node", consumer: "Node") -> bool:
    """C2: a matrix-vector dot used once, by an add (XLA:CPU's only kOutput fusion)."""
    return consumer.opcode == "add" and is_matrix_vector_dot(producer) and has_exactly_one_use(producer)


def can_be_output_fused_into_some_operand(node: "Node") -> bool:
    return node.opcode == "add" and len(node.operands) == 2 and (
        can_be_output_fused(node.operands[0], node) or can_be_output_fused(node.operands[1], node))


def concatenate_dimension(node: "Node") -> int:
    dims = attributes.int_list(node.attr("dimensions"))
    return dims[0] if dims else 0


def is_minor_dim_concatenate(node: "Node") -> bool:
    """A concatenate along the layout's minor-most dimension of at least 128 elements."""
    shape = node.shape
    if shape.rank <= 1:
        return False
    dim = concatenate_dimension(node)
    return dim == shape.minor_to_major[0] and shape.dims[dim] >= MINOR_CONCATENATE_SIZE


def library_fusion_kind(node: "Node") -> str | None:
    """`__ynn_fusion` etc. for a library fusion (a kCustom fusion with a fusion_config kind)."""
    if node.opcode != "fusion" or node.fusion_kind != "kCustom":
        return None
    config = attributes.backend_config(node).get("fusion_config") or {}
    kind = config.get("kind") if isinstance(config, dict) else None
    return kind or "kCustom"


def describe_library_fusion(node: "Node") -> str:
    """"a YNNPACK library fusion (dot)" — what a kCustom fusion is, in words."""
    kind = library_fusion_kind(node) or ""
    library = LIBRARY_FUSION_KINDS.get(kind, kind or "custom")
    heroes = sorted({n.opcode for n in node.fused.nodes() if n.opcode in
                     ("dot", "convolution", "reduce", "reduce-window")}) if node.fused is not None else []
    what = f" ({', '.join(heroes)})" if heroes else ""
    return f"a {library} library fusion{what}"


_CHEAP = frozenset({
    "add", "and", "bitcast", "bitcast-convert", "broadcast", "ceil", "clamp", "count-leading-zeros", "compare",
    "complex", "concatenate", "constant", "copy", "copy-done", "copy-start", "dynamic-reshape", "dynamic-slice",
    "dynamic-update-slice", "floor", "get-tuple-element", "imag", "infeed", "iota", "is-finite", "maximum",
    "minimum", "multiply", "mulhi", "negate", "not", "opt-barrier", "or", "outfeed", "pad", "partition-id",
    "popcnt", "real", "reduce-precision", "replica-id", "reshape", "reverse", "round-nearest-afz",
    "round-nearest-even", "select", "shift-left", "shift-right-arithmetic", "shift-right-logical", "slice",
    "stochastic-convert", "subtract", "transpose", "tuple", "xor",
})
_COMPLEX_ONLY = frozenset({"abs", "sign", "cosine", "sine", "tan"})


def is_expensive(node: "Node") -> bool:
    """CpuInstructionFusion::IsExpensive: cheap ops are listed, everything else costs real work
    (transcendentals, divides, reductions, gathers, library calls, control flow...)."""
    op = node.opcode
    if op in _CHEAP:
        return False
    if op in _COMPLEX_ONLY:
        return node.shape.element_type in ("c64", "c128")
    if op == "convert":
        # f32 -> bf16 rounds and checks for NaN; the other direction is a shift.
        return node.shape.element_type == "bf16" and bool(node.operands) and node.operands[0].shape.element_type == "f32"
    if op in ("divide", "remainder"):
        integral = node.shape.element_type[:1] in ("s", "u")
        # As written in XLA:CPU, the constant is looked for in operand 0 (the generic pass uses 1).
        from ..passes.instruction_fusion import is_scalar_constant_or_broadcast_of_one

        return not (integral and node.operands and is_scalar_constant_or_broadcast_of_one(node.operands[0]))
    return True


def choose_kind(producer: "Node", consumer: "Node") -> str:
    """CpuInstructionFusion::ChooseKind: kOutput for a dot output-fused into an add, else kLoop."""
    return "kOutput" if can_be_output_fused(producer, consumer) else "kLoop"


def _skip(c: Candidate) -> set[int]:
    return c.run.skipped


def _loop_fusible_why(node: "Node") -> str:
    lib = library_fusion_kind(node)
    if lib is not None:
        return f"it is {describe_library_fusion(node)}, a call into the library"
    if node.opcode == "fusion":
        return f"it is a {node.fusion_kind} fusion that is not purely elementwise"
    if node.opcode == "custom-call":
        target = attributes.unquote(node.attr("custom_call_target") or "")
        return f"it is a custom call to {target}, opaque to the loop emitter"
    if node.opcode in ("dot", "convolution"):
        return f"a {node.opcode} is emitted as a library call (Eigen/YNNPACK), not elementwise"
    if node.opcode in ("tuple", "get-tuple-element"):
        return f"a {node.opcode} only groups buffers"
    return f"the CPU loop emitter does not generate {node.opcode} element by element"


# ------------------------------------------------------------------------------------------
# Rules, in XLA's order
# ------------------------------------------------------------------------------------------


@rule(id="CPU-CUSTOM-FUSION-CONSUMER", name="cpu-library-fusion-consumer", passes=("fusion",), pipelines=_CPU,
      tags={"library", "custom-call", "dot"}, relaxable=False,
      xla=XlaRef(_FILE, _FN, "Don't fuse instructions from custom fusions/calls", _COMMIT),
      message="{consumer} is {what}; XLA:CPU never fuses anything into it")
def custom_fusion_consumer(c: Candidate):
    """The consumer is a library (custom) fusion, or inside a custom call's computation.

    What it checks: the consumer is a `kCustom` fusion (the YNNPACK library fusions XLA:CPU
    builds around dots, convolutions and large reductions before `fusion` runs), or an
    instruction of a computation called by a `custom-call`.
    Why XLA does this: a library fusion is handed whole to the library (YNNPACK); its contents
    are chosen by the library rewriter, and XLA's own loop emitter cannot add to it.
    Example:
        e = f32[64,128] exponential(x)
        ROOT d = f32[64,32] fusion(e, w), kind=kCustom, calls=dot_body,
            backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
    Relaxing: not possible; the library call has a fixed interface.
    """
    if c.consumer.uid not in _skip(c):
        return None
    if library_fusion_kind(c.consumer) is not None:
        what = describe_library_fusion(c.consumer)
    else:
        what = "inside a computation called by a custom call"
    return objection(consumer=c.consumer.name, what=what)


@rule(id="CPU-NON-SCALAR-CONSTANT", name="cpu-non-scalar-constant", passes=("fusion",), pipelines=_CPU,
      tags={"constant"}, relaxable=True,
      xla=XlaRef(_FILE, _FN, "Don't fuse non-scalar constants.", _COMMIT),
      message="{producer} is a constant array ({shape}); XLA:CPU keeps array constants as buffers")
def non_scalar_constant(c: Candidate):
    """A constant with more than one element is never fused.

    What it checks: the producer is a `constant` whose shape has a dimension other than 1.
    Why XLA does this: fused constants are emitted into the kernel's code; large ones bloat it
    and slow compilation, while reading them from a buffer costs little (XLA:CPU changed this
    from a 10000-byte threshold to "scalars only" in 2025).
    Example:
        c = f32[10,10] constant({...})
        ROOT a = f32[10,10] add(x, c)     # c stays outside the fusion
    Relaxing: a compile-time trade: the constant's values are compiled into the kernel.
    """
    p = c.producer
    if p.opcode == "constant" and not p.shape.is_effective_scalar:
        return objection(producer=p.name, shape=str(p.shape))
    return None


@rule(id="CPU-OUTPUT-FUSIBLE-ADD", name="cpu-output-fusible-add", passes=("fusion",), pipelines=_CPU,
      tags={"dot"}, relaxable=True,
      xla=XlaRef(_FILE, _FN, "Bailing because producer can be output-fused into some operand.", _COMMIT),
      message="{producer} is an add that a matrix-vector dot can be output-fused into; XLA:CPU keeps it for that")
def output_fusible_add(c: Candidate):
    """An add that a matrix-vector dot will be output-fused into is kept for that fusion.

    What it checks: the producer is an `add` with a matrix-vector `dot` operand (result rank at
    most 1, used once) — the one case XLA:CPU makes a kOutput fusion for.
    Why XLA does this: fusing the add elsewhere would take away the output fusion that lets the
    dot accumulate into the add's buffer.
    Example:
        d = f32[8] dot(m, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        a = f32[8] add(d, b)
        ROOT n = f32[8] negate(a)         # a is not fused into n
    Relaxing: a performance trade: the add joins its consumer and the dot stays alone.
    """
    if can_be_output_fused_into_some_operand(c.producer):
        return objection(producer=c.producer.name)
    return None


@rule(id="CPU-NOT-LOOP-FUSIBLE", name="cpu-producer-not-loop-fusible", passes=("fusion",), pipelines=_CPU,
      tags={"library", "dot", "custom-call", "tuple", "structure"}, relaxable=False,
      xla=XlaRef(_FILE, _FN, "Producer is not loop-fusible.", _COMMIT),
      message="{producer} cannot be computed inside a loop fusion: {why}")
def not_loop_fusible(c: Candidate):
    """The producer is not something the CPU loop emitter can inline.

    What it checks: the producer is neither elementwise nor one of bitcast, broadcast,
    concatenate, dynamic-slice, dynamic-update-slice, gather, iota, pad, reduce, reshape,
    reverse, slice, transpose.  So dots, convolutions, custom calls, library fusions, tuples,
    get-tuple-elements, reduce-windows, scatters and sorts never enter a CPU loop fusion.
    Why XLA does this: XLA:CPU fuses through its elemental emitter, which computes one output
    element at a time; the excluded ops either call libraries (Eigen, YNNPACK) or need whole
    buffers.
    Example:
        d = f32[64,32] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        ROOT t = f32[64,32] tanh(d)       # d stays a separate kernel
    Relaxing: not possible; the emitter cannot generate such a kernel.
    """
    if can_be_loop_fused(c.producer):
        return None
    return objection(producer=c.producer.name, why=_loop_fusible_why(c.producer))


@rule(id="CPU-CONCATENATE", name="cpu-concatenate", passes=("fusion",), pipelines=_CPU,
      tags={"concat"}, relaxable=True,
      xla=XlaRef(_FILE, _FN, "Concatenate fusion is inefficient.", _COMMIT),
      message="{which} {name} {what}; XLA:CPU runs such a concatenate as its own copy loop")
def concatenate(c: Candidate):
    """A concatenate of many operands, or along a large minor dimension, is not fused.

    What it checks: the producer or the consumer is a `concatenate` with more than 8 operands,
    or of rank at least 2 along its layout's minor-most dimension with at least 128 elements
    there.
    Why XLA does this: a fused concatenate selects its source with a tree of branches per
    element (log2 of the operand count deep); along the minor dimension those branches sit in
    the innermost, vectorisable loop.  A separate copy loop is faster.
    Example:
        a = f32[16,100] add(x, one)
        ROOT c = f32[16,200] concatenate(a, b), dimensions={1}   # not fused
    Relaxing: a performance trade: branches per element instead of a materialised buffer.
    """
    for which, node in (("producer", c.producer), ("consumer", c.consumer)):
        if node.opcode != "concatenate":
            continue
        if len(node.operands) > MAX_CONCATENATE_ARGUMENTS:
            return objection(which=which, name=node.name,
                             what=f"joins {len(node.operands)} operands (more than {MAX_CONCATENATE_ARGUMENTS})",
                             operands=len(node.operands))
        if is_minor_dim_concatenate(node):
            dim = concatenate_dimension(node)
            return objection(which=which, name=node.name,
                             what=f"concatenates along its minor-most dimension {dim} of size "
                                  f"{node.shape.dims[dim]} (at least {MINOR_CONCATENATE_SIZE})",
                             operands=len(node.operands))
    return None


@rule(id="CPU-EXPENSIVE-REUSE", name="cpu-expensive-reused", passes=("fusion",), pipelines=_CPU,
      tags={"expensive", "reuse"}, relaxable=True,
      xla=XlaRef(_FILE, _FN, "Fusion is not profitable.", _COMMIT),
      message="{producer} ({opcode}) is expensive and {consumer} reads each of its elements several times; "
              "fused, it would be recomputed for every read")
def expensive_reuse(c: Candidate):
    """An expensive producer is not fused into a consumer that reads its elements repeatedly.

    What it checks: the producer is not a fusion, is expensive by XLA:CPU's list
    (transcendentals, float divides, reductions, gathers, f32→bf16 converts, ...), and the
    consumer reuses that operand's elements (a broadcast, dynamic-slice, reduce-window, a
    pad's padding value, a reduce's init value, or a fusion containing one of those on the
    path from that operand).
    Why XLA does this: a fused producer is recomputed for every element the consumer reads; an
    `exp` broadcast to 1000 columns would be evaluated 1000 times per input.
    Example:
        e = f32[64] exponential(x)
        ROOT b = f32[64,1000] broadcast(e), dimensions={0}   # e is not fused into b
    Relaxing: a performance trade: the expensive op is recomputed per use, but nothing is
    written to memory in between.
    """
    p = c.producer
    if p.opcode == "fusion" or not is_expensive(p):
        return None
    if not c.run.reuses_operand_elements(c.consumer, c.operand_index):
        return None
    return objection(producer=p.name, opcode=p.opcode, consumer=c.consumer.name)


@rule(id="CPU-TOO-MANY-REDUCTIONS", name="cpu-too-many-reductions", passes=("fusion",), pipelines=_CPU,
      tags={"reduction", "compile-time"}, relaxable=True,
      xla=XlaRef(_FILE, _FN, "Too many reductions inside single fusion.", _COMMIT),
      message="{consumer} already holds {reductions} reduces (more than {limit}); another one would make "
              "its code too large to compile quickly")
def too_many_reductions(c: Candidate):
    """A fusion holding more than 5 reduces takes no further reduce.

    What it checks: the consumer is a fusion, the producer a `reduce`, and the consumer's
    fused computation already contains more than 5 reduces (so a fusion holds at most 6).
    Why XLA does this: each fused reduction is unrolled by LLVM; many of them in one kernel
    make LLVM's instruction combining take minutes.
    Example:
        ROOT s = f32[8] fusion(r1, ..., r7), kind=kLoop, calls=sum_of_six_reduces
    Relaxing: a compile-time trade: one larger kernel that compiles slowly.
    """
    if c.consumer.opcode != "fusion" or c.producer.opcode != "reduce" or c.consumer.fused is None:
        return None
    count = sum(1 for n in c.consumer.fused.nodes() if n.opcode == "reduce")
    if count > MAX_REDUCTIONS_IN_FUSION:
        return objection(consumer=c.consumer.name, reductions=count, limit=MAX_REDUCTIONS_IN_FUSION)
    return None


@rule(id="CPU-CONSTANT-ALONE", name="cpu-constant-into-unfused", passes=("fusion",), pipelines=_CPU,
      tags={"constant"}, relaxable=True,
      xla=XlaRef(_FILE, _FN, "Not fusing: insufficient non-constant nodes.", _COMMIT),
      message="{producer} is a constant and {consumer} is not a fusion yet; a constant is only fused into an "
              "existing fusion")
def constant_alone(c: Candidate):
    """A scalar constant is fused only into a consumer that is already a fusion.

    What it checks: the producer is a `constant` (necessarily a scalar, see
    cpu-non-scalar-constant) and the consumer is not a fusion.
    Why XLA does this: a two-instruction fusion of a constant and one op gains nothing; once the
    consumer is a fusion (because something else fused), the constant joins it for free.
    Example:
        one = f32[] constant(1)
        b = f32[8] broadcast(one), dimensions={}
        ROOT n = f32[8] negate(b)         # if nothing else fuses, `one` stays outside
    Relaxing: a performance trade of no consequence: the constant is inlined into the op.
    """
    if c.producer.opcode == "constant" and c.consumer.opcode != "fusion":
        return objection(producer=c.producer.name, consumer=c.consumer.name)
    return None


@rule(id="CPU-FUSION-PRODUCER", name="cpu-fusion-producer", passes=("fusion",), pipelines=_CPU,
      tags={"structure"}, relaxable=False,
      xla=XlaRef(_FILE, _FN, "Not fusing: producer is itself a fusion node.", _COMMIT),
      message="{producer} is already a fusion; XLA:CPU does not merge fusions")
def fusion_producer(c: Candidate):
    """A fusion is never fused into its consumer on CPU.

    What it checks: the producer is a `fusion` (one made earlier, e.g. a purely elementwise
    library fusion; fusions made in the same run are never candidates again).
    Why XLA does this: XLA:CPU has no fusion merger; its comment says output fusion is not
    supported on CPUs.
    Example:
        f = f32[8] fusion(x), kind=kLoop, calls=body
        ROOT n = f32[8] negate(f)
    Relaxing: not possible; the CPU pass cannot merge fusion bodies.
    """
    if c.producer.opcode == "fusion":
        return objection(producer=c.producer.name)
    return None


@rule(id="CPU-CODE-DUPLICATION", name="cpu-code-duplication", passes=("fusion",), pipelines=_CPU,
      tags={"duplication", "compile-time"}, relaxable=True,
      xla=XlaRef(_FILE, _FN, "Code duplication too high", _COMMIT),
      message="fusing {producer} into {consumer} would emit its code {emitted} times (limit "
              f"{rif.ALLOWED_CODE_DUPLICATION}{{extra}})")
def code_duplication(c: Candidate):
    """Fusing the producer would make the elemental emitter repeat its code too often.

    What it checks: the pass may duplicate, the consumer is a fusion, and by XLA's
    FusionNodeIndexingEvaluation the producer would be indexed with more than 15 distinct
    index computations, or it is a concatenate, dot, dynamic-update-slice, pad, reduce or
    reduce-window (whose code cannot be cached) that would be emitted more than once or has
    several users.  Broadcasts always pass.
    Why XLA does this: the elemental emitter regenerates a producer's code once per distinct
    index it is read with; slices of slices multiply that and compile time explodes.
    Example:
        y = f32[64] multiply(x, two)
        ROOT s = f32[48] fusion(y), kind=kLoop, calls=sum_of_16_slices_of_y   # y stays outside
    Relaxing: a compile-time trade: the kernel gets larger and slower to compile.
    """
    if not c.run.may_duplicate:
        return None
    return rif.code_duplication_facts(c)


def allowed_case(c: Candidate) -> str | None:
    """C12–C14: which accepting case applies (None: none does)."""
    consumer, i = c.consumer, c.operand_index
    if consumer.opcode == "dot" and consumer.shape.rank <= 1 and len(consumer.operands) == 2:
        a, b = consumer.operands
        if a.shape.rank == 1 and i == 1 and a.shape.byte_size < FUSION_THRESHOLD_BYTES:
            return "small matrix-vector product"
        if b.shape.rank == 1 and i == 0 and b.shape.byte_size < FUSION_THRESHOLD_BYTES:
            return "small matrix-vector product"
    if consumer.opcode == "fusion" and consumer.fusion_kind == "kLoop":
        return "the consumer is a loop fusion"
    if can_be_loop_fused(consumer):
        return "the consumer is loop-fusible"
    return None


@rule(id="CPU-NO-FUSIBLE-CASE", name="cpu-consumer-not-loop-fusible", passes=("fusion",), pipelines=_CPU,
      tags={"dot", "custom-call", "tuple", "structure"}, relaxable=False,
      xla=XlaRef(_FILE, _FN, "Not fusing: not found a fusible case", _COMMIT),
      message="{consumer} cannot host a loop fusion: {why}")
def no_fusible_case(c: Candidate):
    """The consumer is not something a CPU loop fusion can be built around.

    What it checks: none of the accepting cases holds: the consumer is not a small
    matrix-vector `dot` reading a vector under 16 KiB, not a kLoop fusion, and not loop-fusible
    itself (elementwise, or bitcast/broadcast/concatenate/dynamic-slice/dynamic-update-slice/
    gather/iota/pad/reduce/reshape/reverse/slice/transpose).  Typical consumers here: `tuple`
    (a loop's state or the result), `dot`, `convolution`, `custom-call`, `sort`, `scatter`,
    `reduce-window`, a kOutput fusion.
    Why XLA does this: only loop-fusible consumers become loop fusions; the others are library
    calls, buffer groupings or ops with their own emitters.
    Example:
        a = f32[8] add(x, y)
        ROOT t = (f32[8], f32[8]) tuple(a, x)   # a tuple is a buffer, not a kernel
    Relaxing: not possible.
    """
    if allowed_case(c) is not None:
        return None
    return objection(consumer=c.consumer.name, why=_loop_fusible_why(c.consumer))


#: CpuInstructionFusion::ShouldFuse before the kOutput shortcut (C0, C1) and after it (C3–C15).
CPU_SHOULD_FUSE_BEFORE_OUTPUT = ("CPU-CUSTOM-FUSION-CONSUMER", "CPU-NON-SCALAR-CONSTANT")
#: C0 alone: what can object before the shortcut to a producer that is not a constant.
CPU_SHOULD_FUSE_BEFORE_OUTPUT_NOT_CONSTANT = ("CPU-CUSTOM-FUSION-CONSUMER",)


def should_fuse_before_output(producer: "Node") -> tuple[str, ...]:
    """C0–C1 worth asking for this producer (C1 only of a constant)."""
    if producer.opcode == "constant":
        return CPU_SHOULD_FUSE_BEFORE_OUTPUT
    return CPU_SHOULD_FUSE_BEFORE_OUTPUT_NOT_CONSTANT

CPU_SHOULD_FUSE_AFTER_OUTPUT = (
    ("CPU-OUTPUT-FUSIBLE-ADD", "CPU-NOT-LOOP-FUSIBLE", "CPU-CONCATENATE", "CPU-EXPENSIVE-REUSE")
    + rif.GENERIC_SHOULD_FUSE
    + ("CPU-TOO-MANY-REDUCTIONS", "CPU-CONSTANT-ALONE", "CPU-FUSION-PRODUCER", "CPU-CODE-DUPLICATION",
       "CPU-NO-FUSIBLE-CASE")
)
#: The same without the in-place rules, for a consumer that updates no operand in place: their
#: shared analysis (ShouldFuseInPlaceOp) walks the consumer's in-place pairs, and there are none,
#: so none of them can object — and they would be asked for nearly every pair.
CPU_SHOULD_FUSE_AFTER_OUTPUT_NOT_IN_PLACE = tuple(r for r in CPU_SHOULD_FUSE_AFTER_OUTPUT
                                                  if r not in rif.IN_PLACE_RULES)


def should_fuse_after_output(consumer: "Node", producer: "Node | None" = None,
                             may_duplicate: bool | None = None) -> tuple[str, ...]:
    """The rules of C3–C15 worth asking for the pair, in XLA's order: the in-place ones only of
    a consumer that updates an operand in place; given the producer (and whether the pass may
    duplicate), without the rules that cannot object to it (`_CANNOT_OBJECT`).  Leaving out a
    rule that would answer None changes no decision: `evaluate` skips a None answer, relaxed
    or not."""
    in_place = updates_in_place(consumer)
    if producer is None:
        return CPU_SHOULD_FUSE_AFTER_OUTPUT if in_place else CPU_SHOULD_FUSE_AFTER_OUTPUT_NOT_IN_PLACE
    key = (in_place, _PRODUCER_CLASS.get(producer.opcode, "other"), _CONSUMER_CLASS.get(consumer.opcode, "other"),
           may_duplicate is not False)
    found = _AFTER_OUTPUT.get(key)
    if found is None:
        every = CPU_SHOULD_FUSE_AFTER_OUTPUT if in_place else CPU_SHOULD_FUSE_AFTER_OUTPUT_NOT_IN_PLACE
        found = _AFTER_OUTPUT[key] = tuple(r for r in every if may_object(r, key[1], key[2], key[3]))
    return found


def should_fuse_rules(consumer: "Node", producer: "Node", may_duplicate: bool) -> tuple[str, ...]:
    """C0–C1 and C3–C15 as one list, for a pair the kOutput shortcut (C2) does not take: asked
    as one list they answer as the two asked one after the other (the first objection not
    relaxed decides, relaxed ones are noted in order), with one question instead of two."""
    key = (updates_in_place(consumer), _PRODUCER_CLASS.get(producer.opcode, "other"),
           _CONSUMER_CLASS.get(consumer.opcode, "other"), may_duplicate)
    found = _WHOLE.get(key)
    if found is None:
        found = _WHOLE[key] = should_fuse_before_output(producer) + \
            should_fuse_after_output(consumer, producer, may_duplicate)
    return found


#: The lists of should_fuse_rules, by (in place, producer class, consumer class, may duplicate):
#: the producer class says whether C1 (a constant producer) is among them.
_WHOLE: dict[tuple, tuple[str, ...]] = {}

#: The lists of should_fuse_after_output, by (in place, producer class, consumer class, may duplicate).
_AFTER_OUTPUT: dict[tuple, tuple[str, ...]] = {}

#: Opcodes of a producer or consumer some rule of the list looks for; any other is "other".
_PRODUCER_CLASS = {"constant": "constant", "add": "add", "concatenate": "concatenate", "reduce": "reduce",
                   "fusion": "fusion"}
_CONSUMER_CLASS = {"concatenate": "concatenate", "fusion": "fusion"}

#: Rule id → (producer classes, consumer classes) outside which the rule answers None (None:
#: any class); read off each rule's first test.  CPU-CONCATENATE objects when either side is a
#: concatenate, so it is kept for both (`may_object`).
_CANNOT_OBJECT = {
    "CPU-OUTPUT-FUSIBLE-ADD": ({"add"}, None),          # can_be_output_fused_into_some_operand
    "CPU-TOO-MANY-REDUCTIONS": ({"reduce"}, {"fusion"}),
    "CPU-CONSTANT-ALONE": ({"constant"}, None),
    "CPU-FUSION-PRODUCER": ({"fusion"}, None),
    "CPU-CODE-DUPLICATION": (None, {"fusion"}),         # code_duplication_facts: a fusion consumer
}


def may_object(rule_id: str, producer: str, consumer: str, may_duplicate: bool = True) -> bool:
    """Whether `rule_id` can object to a producer and consumer of these classes."""
    if rule_id == "CPU-CONCATENATE":
        return producer == "concatenate" or consumer == "concatenate"
    if rule_id == "IF-CANNOT-DUPLICATE":  # objects only in a pass that may not duplicate
        return not may_duplicate
    if rule_id == "IF-EXPENSIVE-DUPLICATION":  # and this one only in a pass that may
        return may_duplicate
    if rule_id == "CPU-CODE-DUPLICATION" and not may_duplicate:
        return False
    producers, consumers = _CANNOT_OBJECT.get(rule_id, (None, None))
    return (producers is None or producer in producers) and (consumers is None or consumer in consumers)
