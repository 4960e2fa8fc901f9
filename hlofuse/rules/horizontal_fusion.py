"""Horizontal fusion's rules (xla/service/gpu/transforms/horizontal_loop_fusion.cc and
horizontal_input_fusion.cc): which independent kernels feeding one consumer may become one
kernel, and how many at once (docs/xla/legacy-gpu-pipeline.md §8, §9).

HorizontalLoopFusion is replayed at two XLA commits, described by `LoopFusionXla`:
`LOOP_P` (76da7301, jaxlib 0.4.35, the legacy pipeline's XLA and the default) and `LOOP_N`
(84d72608, 2025-01-15, the XLA that shared/corpus/fusion's horizontal cases were taken from;
legacy contract §0.4).  A rule that exists at one commit only says so in its docstring and is
listed in that commit's rule tuples only, so the other variant never evaluates it.
HorizontalInputFusion is replayed at P only.

XLA gives no reason strings here (it only logs); the XlaRefs name the function and leave the
message empty.  Candidates are (candidate kernel, the consumer whose operands are scanned);
a `HorizontalCandidate` (rules/candidates.py) carries the pass's view: `xla` (the LoopFusionXla
replayed; P when None), `sliced` (the sliced-input mode), `candidates` (every candidate of this
consumer), and a `SpanCandidate` for the span checks `left` (the span's first candidate) and
the running totals.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..gpu import gpu_config
from ..gpu.fusible import is_consumer_the_only_non_root_user
from ..gpu.properties import instr_count_of_fusible, outputs_of_fusible
from ..gpu.shapes import all_in_default_memory_space, elements, equal_ignoring_element_type, \
    is_monotonic_dim0_major, memory_space
from . import XLA_COMMITS, Candidate, XlaRef, objection, rule

_FILE = "xla/service/gpu/transforms/horizontal_loop_fusion.cc"
_P = XLA_COMMITS["legacy"]
_N = XLA_COMMITS["corpus"]
_PASSES = ("horizontal_loop_fusion", "horizontal_input_fusion")
_PIPELINES = ("legacy",)

#: Thresholds of IsProfitableFusionCandidate: (elements, fused instructions) per mode.
LOOP_LIMITS = (8192 * 8192, 128)
SLICED_LIMITS = (128 * 2048, 30)
#: kMaxCudaParamSize: bytes of kernel parameters (8 per operand or output).
MAX_CUDA_PARAM_SIZE = 4000
#: kMaxInstrUnrollCost (present at XLA 76da7301, removed days later).
MAX_INSTR_UNROLL_COST = 100


@dataclass(frozen=True, slots=True)
class LoopFusionXla:
    """What HorizontalLoopFusion does at one XLA commit: the switches where P and N differ and
    the rules each stage asks (docs/xla/legacy-gpu-pipeline.md §0.4, §8, §11.4)."""

    #: "P" or "N", as the legacy contract names the commits.
    label: str
    commit: str
    #: Which computations `run_loop` visits when the caller does not say: P has no option and
    #: fuses in the entry computation only; N's `only_entry_computation` defaults to false
    #: (every computation GetFusibleComputations returns).
    entry_only_by_default: bool
    #: Candidates are found through bitcasts as well as get-tuple-elements
    #: (LatestNonTrivialAncestor at N, LatestNonGteAncestor at P), and IsConsumerTheOnlyNonRootUser
    #: looks through bitcast users too.
    through_bitcast: bool
    #: kInput fusions rooted at a concatenate are candidates (IsConcatenationInputFusion), and
    #: are held to the sliced-mode element limit in either mode.
    concat_input_fusions: bool
    #: Tuple-shaped reduce-windows (and kLoop fusions rooted at one) are not candidates.
    excludes_variadic_reduce_window: bool
    #: Candidates are ordered by a key ending in the instruction's unique id (std::sort on a
    #: tuple at N), not by a stable sort of the key without it (P).
    sort_by_unique_id: bool
    #: Consumers with fewer operands are skipped before any candidate is looked at.
    min_consumer_operands: int
    #: In sliced mode, a multi-dimensional output whose layout is not {n-1,...,0} is first
    #: bitcast to the same bytes with a descending layout, then reshaped to 1-D.
    bitcast_before_flattening: bool
    #: Rules asked while IsFusibleCandidate filters operands (before candidates are de-duplicated).
    fusible_rules: tuple[str, ...]
    #: Rules asked of each candidate in FusionCandidates::Initialize, in order.
    candidate_rules: tuple[str, ...]
    #: Rules asked for each neighbour in GetNextSpanOfFusions, in order.
    span_rules: tuple[str, ...]


def _ref(function: str, commit: str = _P) -> XlaRef:
    return XlaRef(_FILE, function, None, commit)


def replayed_xla(c: Candidate) -> LoopFusionXla:
    """The HorizontalLoopFusion variant a candidate is asked for (P unless the pass says)."""
    return c.xla or LOOP_P


def is_concatenation_input_fusion(node) -> bool:
    """IsConcatenationInputFusion (horizontal_loop_fusion.cc, N only): a kInput fusion whose
    fused root is a concatenate."""
    return node.opcode == "fusion" and node.fusion_kind == "kInput" and node.fused.root.opcode == "concatenate"


def is_dynamic_update_slice_fusion(node) -> bool:
    """IsDynamicUpdateSliceFusion (horizontal_loop_fusion.cc, N only): a fusion whose root, or
    one of whose root tuple's operands, is a dynamic-update-slice."""
    if node.opcode != "fusion":
        return False
    root = node.fused.root
    if root.opcode == "tuple":
        return any(op.opcode == "dynamic-update-slice" for op in root.operands)
    return root.opcode == "dynamic-update-slice"


def representative_shape(node):
    """The shape XLA measures a candidate by: its (first) output."""
    return outputs_of_fusible(node)[0].shape


@rule(id="HF-CONSUMER-NOT-ONLY-USER", name="horizontal-other-users", passes=_PASSES, pipelines=_PIPELINES,
      tags={"cycle", "horizontal", "legality"}, relaxable=False,
      xla=XlaRef("xla/service/gpu/gpu_fusible.cc", "IsConsumerTheOnlyNonRootUser", None, _P),
      message="{producer} is also read by {other}, not only by {consumer}; fusing it horizontally could "
              "create a cycle")
def consumer_not_only_user(c: Candidate):
    """A horizontal candidate must be read only by the consumer (or the root).

    What it checks: every user of the candidate is the consumer, or the computation's root, or
    a get-tuple-element whose users satisfy the same.  At P (and in HorizontalInputFusion) only
    get-tuple-element users are looked through; the N variant of HorizontalLoopFusion looks
    through bitcast users as well (gpu_fusible.cc at 84d72608).
    Why XLA does this: the candidates become one kernel whose outputs all exist at the same
    time; if another instruction read one of them and fed a second candidate, the fused kernel
    would depend on itself.
    Example:
        a = f32[8] fusion(x), kind=kLoop, calls=f
        b = f32[8] fusion(a), kind=kLoop, calls=g
        ROOT t = (f32[8], f32[8]) tuple(a, b)
    Relaxing: not possible.
    """
    cfg = gpu_config(c.ctx)
    if is_consumer_the_only_non_root_user(c.producer, c.consumer, cfg, replayed_xla(c).through_bitcast):
        return None
    other = next((u.name for u in c.producer.users if u is not c.consumer), "another instruction")
    return objection(producer=c.producer.name, consumer=c.consumer.name, other=other)


@rule(id="HF-TOO-LARGE", name="horizontal-too-large", passes=_PASSES, pipelines=_PIPELINES,
      tags={"horizontal", "launch"}, relaxable=True, xla=_ref("IsProfitableFusionCandidate"),
      message="{producer} computes {elements} elements (more than {limit} in {mode} mode); it fills the GPU "
              "on its own")
def too_large(c: Candidate):
    """A large kernel gains nothing from horizontal fusion.

    What it checks: the candidate's (first) output has more than 8192x8192 elements (kLoop
    mode) or 128x2048 (sliced-input mode).  At N a kInput fusion rooted at a concatenate (a
    candidate only there) is held to 128x2048 in both modes.
    Why XLA does this: horizontal fusion saves launch overhead for small kernels; a large one
    already occupies the whole GPU.
    Example:
        a = f32[300000] negate(x)
        b = f32[300000] negate(y)
        ROOT t = (f32[300000], f32[300000]) tuple(a, b)    # not sliced-fused: too large
    Relaxing: a performance trade.
    """
    sliced = c.sliced
    concat = replayed_xla(c).concat_input_fusions and is_concatenation_input_fusion(c.producer)
    limit = (SLICED_LIMITS if sliced or concat else LOOP_LIMITS)[0]
    n = elements(representative_shape(c.producer))
    if n <= limit:
        return None
    return objection(producer=c.producer.name, elements=n, limit=limit, mode="sliced-input" if sliced else "kLoop")


@rule(id="HF-TOO-MANY-INSTRUCTIONS", name="horizontal-too-many-instructions", passes=_PASSES,
      pipelines=_PIPELINES, tags={"horizontal", "compile-time"}, relaxable=True,
      xla=_ref("IsProfitableFusionCandidate"),
      message="{producer} holds {count} instructions (more than {limit} in {mode} mode)")
def too_many_instructions(c: Candidate):
    """A fusion with many instructions is not horizontally fused.

    What it checks: the candidate fusion holds more than 128 instructions (kLoop mode) or 30
    (sliced-input mode), parameters included.
    Why XLA does this: a big kernel is not launch-bound, and horizontal fusion would make an
    even bigger one.
    Example:
        two kLoop fusions of 40 instructions each feeding one tuple (sliced mode refuses)
    Relaxing: a performance trade.
    """
    sliced = c.sliced
    limit = (SLICED_LIMITS if sliced else LOOP_LIMITS)[1]
    if c.producer.opcode != "fusion":
        return None
    count = instr_count_of_fusible(c.producer)
    if count <= limit:
        return None
    return objection(producer=c.producer.name, count=count, limit=limit, mode="sliced-input" if sliced else "kLoop")


@rule(id="HF-NOT-ROW-MAJOR", name="horizontal-not-row-major", passes=_PASSES, pipelines=_PIPELINES,
      tags={"horizontal", "layout"}, relaxable=True, xla=_ref("HasOnlyRowMajorLayout"),
      message="{producer} holds {offender} with a non-default layout ({layout})")
def not_row_major(c: Candidate):
    """Horizontal fusion takes only kernels with default (row-major) layouts (P only).

    What it checks: the candidate (or every array instruction inside a candidate fusion) has
    the layout {n-1,...,0}.  Only at P (XLA 76da7301, HasOnlyRowMajorLayout); N dropped the
    check and instead bitcasts such outputs to a descending layout before flattening them, so
    the N variant does not ask this rule.
    Why XLA does this: the sliced-input trick reshapes outputs to 1-D and concatenates them;
    XLA 2024 keeps to layouts where that is a plain bitcast.
    Example:
        a = f32[8,4]{0,1} negate(x)
        b = f32[8,4]{0,1} negate(y)
    Relaxing: a performance trade (XLA dropped this check later).
    """
    p = c.producer
    nodes = p.fused.nodes() if p.opcode == "fusion" else [p]
    for node in nodes:
        if node.shape.is_array and node.shape.rank and not is_monotonic_dim0_major(node.shape):
            return objection(producer=p.name, offender=node.name, layout=str(node.shape.layout))
    return None


def _candidate_ids(c: Candidate):
    """ids of the consumer's other candidates (`candidates`); the pass passes them
    precomputed as `candidate_ids` (a root tuple may have thousands of operands)."""
    ids = c.candidate_ids
    return ids if ids is not None else {id(o) for o in c.candidates or ()}


@rule(id="HF-SHARED-PARAMETER", name="horizontal-shared-parameter", passes=_PASSES, pipelines=_PIPELINES,
      tags={"horizontal", "in-place", "legality"}, relaxable=False, xla=_ref("AnyOpndIsParamSharedAmongFusions"),
      message="{producer} reads parameter {parameter}, which {other} reads too")
def shared_parameter(c: Candidate):
    """Candidates reading the same entry parameter are not fused horizontally (P only).

    What it checks: an operand of the candidate is a `parameter` that another candidate of the
    same consumer also reads.  Only at P (XLA 76da7301, AnyOpndIsParamSharedAmongFusions); N
    keeps the ban for dynamic-update-slice fusions only (HF-DUS-SHARED-OPERAND), so the N
    variant does not ask this rule.
    Why XLA does this: XLA 2024 avoids buffer aliasing problems of the fused kernel's
    concatenated parameters.
    Example:
        a = f32[8] multiply(p, p)
        b = f32[8] add(p, q)
        ROOT t = (f32[8], f32[8]) tuple(a, b)
    Relaxing: not possible.
    """
    others = _candidate_ids(c)
    for op in c.producer.operands:
        if op.opcode != "parameter":
            continue
        for user in op.users:
            if user is not c.producer and id(user) in others:
                return objection(producer=c.producer.name, parameter=op.name, other=user.name)
    return None


@rule(id="HF-DUS-SHARED-OPERAND", name="horizontal-dus-shared-operand", passes=("horizontal_loop_fusion",),
      pipelines=_PIPELINES, tags={"horizontal", "in-place", "legality"}, relaxable=False,
      xla=_ref("FusionCandidates::Initialize", _N),
      message="{producer} updates a slice in place and reads {operand}, which {other} reads too")
def dus_shared_operand(c: Candidate):
    """A dynamic-update-slice fusion sharing an operand with another candidate is not fused (N only).

    What it checks: the candidate is a fusion rooted at a dynamic-update-slice (or whose root
    tuple holds one), and some operand of it is also read by another candidate of the same
    consumer.  Only at N (XLA 84d72608, IsDynamicUpdateSliceFusion and
    AnyOperandIsSharedAmongFusions): it replaced P's broader HF-SHARED-PARAMETER.
    Why XLA does this: a dynamic-update-slice fusion writes into its input buffer; after
    horizontal fusion the outputs are concatenated, so the fused kernel's output can no longer
    alias that input, and a shared input would be read after being overwritten.
    Example:
        a = f32[8] fusion(p, u, i), kind=kLoop, calls=dus    # ROOT dynamic-update-slice
        b = f32[8] fusion(p, v, i), kind=kLoop, calls=dus
        ROOT t = (f32[8], f32[8]) tuple(a, b)
    Relaxing: not possible.
    """
    if not is_dynamic_update_slice_fusion(c.producer):
        return None
    others = _candidate_ids(c)
    for op in c.producer.operands:
        for user in op.users:
            if user is not c.producer and id(user) in others:
                return objection(producer=c.producer.name, operand=op.name, other=user.name)
    return None


@rule(id="HF-NON-DEFAULT-MEMORY-SPACE", name="horizontal-non-default-memory-space",
      passes=("horizontal_loop_fusion",), pipelines=_PIPELINES, tags={"horizontal", "memory-space", "legality"},
      relaxable=False, xla=_ref("IsFusibleCandidate", _N),
      message="{producer}: {what} lives in memory space {space}, not the default one")
def non_default_memory_space(c: Candidate):
    """Only kernels whose inputs and outputs live in the default memory space are fused (N only).

    What it checks: the candidate's shape and every operand's shape (each tuple element
    included) carry no memory space other than 0 in their layouts (`S(n)` with n != 0).  Only
    at N (XLA 84d72608, IsShapeDefaultMemorySpace inside IsFusibleCandidate); at P such kernels
    are fused like any other.
    Why XLA does this: the horizontal fusion's outputs are one tuple (or one concatenated
    buffer), which cannot mix buffers placed in different memories.
    Example:
        a = f32[1]{0} copy(x)
        b = f32[1]{0:S(5)} copy(y)
        ROOT t = (f32[1]{0}, f32[1]{0:S(5)}) tuple(a, b)
    Relaxing: not possible.
    """
    def first_space(shape) -> int:
        if shape.is_tuple:
            return next((first_space(s) for s in shape.tuple_shapes if not all_in_default_memory_space(s)), 0)
        return memory_space(shape)

    p = c.producer
    if not all_in_default_memory_space(p.shape):
        return objection(producer=p.name, what="its output", space=first_space(p.shape))
    for op in p.operands:
        if not all_in_default_memory_space(op.shape):
            return objection(producer=p.name, what=f"its operand {op.name}", space=first_space(op.shape))
    return None


#: The candidate filters of FusionCandidates::Initialize at P, in order.
CANDIDATE_RULES = ("HF-CONSUMER-NOT-ONLY-USER", "HF-TOO-LARGE", "HF-TOO-MANY-INSTRUCTIONS", "HF-NOT-ROW-MAJOR",
                   "HF-SHARED-PARAMETER")


# ------------------------------------------------------------------------------------------
# Spans (GetNextSpanOfFusions): which neighbours in sorted order go into one kernel
# ------------------------------------------------------------------------------------------


def _left(c: Candidate):
    return c.left


@rule(id="HF-DIFFERENT-OUTPUT-TYPE", name="horizontal-different-output-type", passes=_PASSES,
      pipelines=_PIPELINES, tags={"horizontal", "legality"}, relaxable=False, xla=_ref("GetNextSpanOfFusions"),
      message="{producer} outputs {type} while {left} outputs {left_type}")
def different_output_type(c: Candidate):
    """Kernels fused horizontally must output the same element type.

    What it checks: the candidate's (unique) output element type equals that of the span's
    first candidate.
    Why XLA does this: the sliced-input trick concatenates the outputs into one array.
    Example:
        a = f32[8] negate(x)
        b = s32[8] negate(y)
    Relaxing: not possible.
    """
    a, b = representative_shape(_left(c)).element_type, representative_shape(c.producer).element_type
    if a == b:
        return None
    return objection(producer=c.producer.name, type=b, left=_left(c).name, left_type=a)


@rule(id="HF-DIFFERENT-OUTPUT-COUNT", name="horizontal-different-output-count", passes=_PASSES,
      pipelines=_PIPELINES, tags={"horizontal", "legality"}, relaxable=False, xla=_ref("GetNextSpanOfFusions"),
      message="{producer} has {count} outputs while {left} has {left_count}")
def different_output_count(c: Candidate):
    """Kernels fused horizontally must have the same number of outputs.

    What it checks: the candidate has as many outputs as the span's first candidate.
    Why XLA does this: the fused kernel's outputs are laid out candidate by candidate, output by
    output; XLA builds it for equal counts only.
    Example:
        a = (f32[8], f32[8]) fusion(x), kind=kLoop, calls=two_outputs
        b = f32[8] negate(y)
    Relaxing: not possible.
    """
    a, b = len(outputs_of_fusible(_left(c))), len(outputs_of_fusible(c.producer))
    if a == b:
        return None
    return objection(producer=c.producer.name, count=b, left=_left(c).name, left_count=a)


@rule(id="HF-DIFFERENT-SIZE", name="horizontal-different-size", passes=_PASSES, pipelines=_PIPELINES,
      tags={"horizontal"}, relaxable=True, xla=_ref("GetNextSpanOfFusions"),
      message="{producer} holds {count} instructions while {left} holds {left_count}")
def different_size(c: Candidate):
    """Only kernels of the same instruction count are fused horizontally (P only).

    What it checks: the candidate's fused instruction count (1 for an unfused op) equals that of
    the span's first candidate.  Only at P (XLA 76da7301, GetNextSpanOfFusions); N dropped it,
    so the N variant does not ask this rule.
    Why XLA does this: similar kernels balance the work of the fused kernel's threads.
    Example:
        a = f32[8] fusion(x), kind=kLoop, calls=three_ops
        b = f32[8] negate(y)
    Relaxing: a performance trade.
    """
    a, b = instr_count_of_fusible(_left(c)), instr_count_of_fusible(c.producer)
    if a == b:
        return None
    return objection(producer=c.producer.name, count=b, left=_left(c).name, left_count=a)


@rule(id="HF-DIFFERENT-SHAPES", name="horizontal-different-shapes", passes=_PASSES, pipelines=_PIPELINES,
      tags={"horizontal", "shape", "legality"}, relaxable=False, xla=_ref("GetNextSpanOfFusions"),
      message="{producer} outputs {shape} while {left} outputs {left_shape}; one loop needs one shape")
def different_shapes(c: Candidate):
    """kLoop-mode horizontal fusion needs equal output shapes.

    What it checks: in kLoop mode the candidates' first output shapes are equal ignoring
    element type (the sliced-input mode has no such check: it flattens and concatenates).
    Why XLA does this: a kLoop horizontal fusion runs one loop over all candidates' outputs.
    Example:
        a = f32[8] negate(x)
        b = f32[16] negate(y)
    Relaxing: not possible.
    """
    if c.sliced:
        return None
    a, b = representative_shape(_left(c)), representative_shape(c.producer)
    if equal_ignoring_element_type(a, b):
        return None
    return objection(producer=c.producer.name, shape=b.to_text(), left=_left(c).name, left_shape=a.to_text())


@rule(id="HF-BATCH-FULL", name="horizontal-batch-full", passes=_PASSES, pipelines=_PIPELINES,
      tags={"horizontal"}, relaxable=True, xla=_ref("GetNextSpanOfFusions"),
      message="the horizontal fusion already has {outputs} outputs (at most {limit} per kernel)")
def batch_full(c: Candidate):
    """A horizontal fusion takes at most 32 (or 64) outputs.

    What it checks: the outputs accumulated in the span reach the batch size: 32 in sliced mode
    or when the span starts with a fusion, 64 for bare ops in kLoop mode.
    Why XLA does this: larger batches stop paying off and grow the kernel's parameters.
    Example:
        70 small negates feeding one tuple: two horizontal fusions
    Relaxing: a performance trade.
    """
    if c.accum_outputs < c.max_batch:
        return None
    return objection(producer=c.producer.name, outputs=c.accum_outputs, limit=c.max_batch)


@rule(id="HF-PARAMETER-SIZE", name="horizontal-parameter-size", passes=_PASSES, pipelines=_PIPELINES,
      tags={"horizontal", "budget", "legality"}, relaxable=False, xla=_ref("GetNextSpanOfFusions"),
      message="the horizontal fusion would pass {bytes} bytes of kernel parameters (limit {limit})")
def parameter_size(c: Candidate):
    """A horizontal fusion stays below CUDA's kernel-parameter size.

    What it checks: 8 bytes per operand and output of the span reach 4000 bytes
    (kMaxCudaParamSize).
    Why XLA does this: CUDA limits the size of a kernel's parameters.
    Example:
        a span whose candidates have 500 operands in all
    Relaxing: not possible; the kernel might not launch.
    """
    size = c.accum_io * 8
    if size < MAX_CUDA_PARAM_SIZE:
        return None
    return objection(producer=c.producer.name, bytes=size, limit=MAX_CUDA_PARAM_SIZE)


@rule(id="HF-UNROLL-COST", name="horizontal-unroll-cost", passes=_PASSES, pipelines=_PIPELINES,
      tags={"horizontal", "expensive"}, relaxable=True, xla=_ref("GetNextSpanOfFusions"),
      message="the horizontal fusion's unroll cost would reach {cost} (limit {limit}); sqrt, rsqrt, abs, "
              "floor, ceil and rounding of floats cost 20 each")
def unroll_cost(c: Candidate):
    """A horizontal fusion keeps its unrolled instruction cost below 100 (P only).

    What it checks: the summed unroll cost of the span's candidates (20 per float abs, ceil,
    floor, rounding, rsqrt, sqrt; 0 for parameters, constants, tuples, broadcasts, bitcasts,
    reshapes, transposes, slices; 1 otherwise) reaches 100.  Present at the XLA of jaxlib
    0.4.35 (P), removed a day later ("Always unroll small loops"), so the N variant does not
    ask this rule.
    Why XLA does this: the horizontal loop emitter unrolls; costly instructions make the
    unrolled kernel large.
    Example:
        three kLoop fusions of sqrt(sqrt(sqrt(x))) feeding one tuple: 60 + 60 >= 100, not fused
    Relaxing: a performance trade.
    """
    if c.accum_cost < MAX_INSTR_UNROLL_COST:
        return None
    return objection(producer=c.producer.name, cost=c.accum_cost, limit=MAX_INSTR_UNROLL_COST)


@rule(id="HF-NO-PARTNER", name="horizontal-no-partner", passes=_PASSES, pipelines=_PIPELINES,
      tags={"horizontal"}, relaxable=False, xla=_ref("FuseConsumerOperands"),
      message="{producer} has no other candidate to share a kernel with (its span holds it alone)")
def no_partner(c: Candidate):
    """A horizontal candidate left alone in its span is not fused.

    What it checks: after sorting and splitting the candidates into spans, this candidate's
    span holds only itself.
    Why XLA does this: horizontal fusion needs at least two kernels.
    Example:
        a = f32[8] negate(x)
        ROOT t = (f32[8], s32[]) tuple(a, i)
    Relaxing: not possible; there is nothing to fuse with.
    """
    return objection(producer=c.producer.name) if c.alone else None


#: The span checks of GetNextSpanOfFusions at P, in order.
SPAN_RULES = ("HF-DIFFERENT-OUTPUT-TYPE", "HF-DIFFERENT-OUTPUT-COUNT", "HF-DIFFERENT-SIZE", "HF-DIFFERENT-SHAPES",
              "HF-BATCH-FULL", "HF-PARAMETER-SIZE", "HF-UNROLL-COST")


# ------------------------------------------------------------------------------------------
# The two replayed commits
# ------------------------------------------------------------------------------------------

#: XLA 76da7301 (jaxlib 0.4.35): the legacy pipeline's HorizontalLoopFusion.
LOOP_P = LoopFusionXla(
    label="P", commit=_P, entry_only_by_default=True, through_bitcast=False, concat_input_fusions=False,
    excludes_variadic_reduce_window=False, sort_by_unique_id=False, min_consumer_operands=0,
    bitcast_before_flattening=False, fusible_rules=(), candidate_rules=CANDIDATE_RULES, span_rules=SPAN_RULES)

#: XLA 84d72608 (2025-01-15): the HorizontalLoopFusion shared/corpus/fusion's cases assert.
LOOP_N = LoopFusionXla(
    label="N", commit=_N, entry_only_by_default=False, through_bitcast=True, concat_input_fusions=True,
    excludes_variadic_reduce_window=True, sort_by_unique_id=True, min_consumer_operands=2,
    bitcast_before_flattening=True, fusible_rules=("HF-NON-DEFAULT-MEMORY-SPACE",),
    candidate_rules=("HF-CONSUMER-NOT-ONLY-USER", "HF-TOO-LARGE", "HF-TOO-MANY-INSTRUCTIONS", "HF-DUS-SHARED-OPERAND"),
    span_rules=("HF-DIFFERENT-OUTPUT-TYPE", "HF-DIFFERENT-OUTPUT-COUNT", "HF-DIFFERENT-SHAPES", "HF-BATCH-FULL",
                "HF-PARAMETER-SIZE"))

LOOP_VERSIONS = {"P": LOOP_P, "N": LOOP_N}


def loop_fusion_xla(xla: "str | LoopFusionXla") -> LoopFusionXla:
    """The variant named by "P" or "N" (or given as itself); an unknown name is an error."""
    if isinstance(xla, LoopFusionXla):
        return xla
    try:
        return LOOP_VERSIONS[xla.upper()]
    except (KeyError, AttributeError):
        raise ValueError(f"unknown HorizontalLoopFusion variant {xla!r}; expected one of "
                         f"{', '.join(LOOP_VERSIONS)}") from None
