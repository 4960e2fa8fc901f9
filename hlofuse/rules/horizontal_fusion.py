"""Horizontal fusion's rules (xla/service/gpu/transforms/horizontal_loop_fusion.cc and
horizontal_input_fusion.cc at XLA 76da7301): which independent kernels feeding one consumer
may become one kernel, and how many at once (docs/xla/legacy-gpu-pipeline.md §8, §9).

XLA gives no reason strings here (it only logs); the XlaRefs name the function and leave the
message empty.  Candidates are (candidate kernel, the consumer whose operands are scanned);
`extra` carries the pass's view: `sliced` (the sliced-input mode), `candidates` (every
candidate of this consumer), and for the span checks `left` (the span's first candidate) and
the running totals.
"""

from __future__ import annotations

from ..gpu import gpu_config
from ..gpu.fusible import is_consumer_the_only_non_root_user
from ..gpu.properties import instr_count_of_fusible, outputs_of_fusible
from ..gpu.shapes import elements, equal_ignoring_element_type, is_monotonic_dim0_major
from . import XLA_COMMITS, Candidate, XlaRef, objection, rule

_FILE = "xla/service/gpu/transforms/horizontal_loop_fusion.cc"
_P = XLA_COMMITS["legacy"]
_PASSES = ("horizontal_loop_fusion", "horizontal_input_fusion")
_PIPELINES = ("legacy",)

#: Thresholds of IsProfitableFusionCandidate: (elements, fused instructions) per mode.
LOOP_LIMITS = (8192 * 8192, 128)
SLICED_LIMITS = (128 * 2048, 30)
#: kMaxCudaParamSize: bytes of kernel parameters (8 per operand or output).
MAX_CUDA_PARAM_SIZE = 4000
#: kMaxInstrUnrollCost (present at XLA 76da7301, removed days later).
MAX_INSTR_UNROLL_COST = 100


def _ref(function: str) -> XlaRef:
    return XlaRef(_FILE, function, None, _P)


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
    a get-tuple-element whose users satisfy the same (XLA 2024 looks through
    get-tuple-element only).
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
    if is_consumer_the_only_non_root_user(c.producer, c.consumer, cfg):
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
    mode) or 128x2048 (sliced-input mode).
    Why XLA does this: horizontal fusion saves launch overhead for small kernels; a large one
    already occupies the whole GPU.
    Example:
        a = f32[300000] negate(x)
        b = f32[300000] negate(y)
        ROOT t = (f32[300000], f32[300000]) tuple(a, b)    # not sliced-fused: too large
    Relaxing: a performance trade.
    """
    sliced = c.extra.get("sliced", False)
    limit = (SLICED_LIMITS if sliced else LOOP_LIMITS)[0]
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
    sliced = c.extra.get("sliced", False)
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
    """Horizontal fusion takes only kernels with default (row-major) layouts.

    What it checks: the candidate (or every array instruction inside a candidate fusion) has
    the layout {n-1,...,0}.
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


@rule(id="HF-SHARED-PARAMETER", name="horizontal-shared-parameter", passes=_PASSES, pipelines=_PIPELINES,
      tags={"horizontal", "in-place", "legality"}, relaxable=False, xla=_ref("AnyOpndIsParamSharedAmongFusions"),
      message="{producer} reads parameter {parameter}, which {other} reads too")
def shared_parameter(c: Candidate):
    """Candidates reading the same entry parameter are not fused horizontally.

    What it checks: an operand of the candidate is a `parameter` that another candidate of the
    same consumer also reads.
    Why XLA does this: XLA 2024 avoids buffer aliasing problems of the fused kernel's
    concatenated parameters (relaxed in later XLA except for dynamic-update-slices).
    Example:
        a = f32[8] multiply(p, p)
        b = f32[8] add(p, q)
        ROOT t = (f32[8], f32[8]) tuple(a, b)
    Relaxing: not possible.
    """
    others = c.extra.get("candidates") or ()
    for op in c.producer.operands:
        if op.opcode != "parameter":
            continue
        for user in op.users:
            if user is not c.producer and any(user is o for o in others):
                return objection(producer=c.producer.name, parameter=op.name, other=user.name)
    return None


#: The candidate filters of FusionCandidates::Initialize, in order.
CANDIDATE_RULES = ("HF-CONSUMER-NOT-ONLY-USER", "HF-TOO-LARGE", "HF-TOO-MANY-INSTRUCTIONS", "HF-NOT-ROW-MAJOR",
                   "HF-SHARED-PARAMETER")


# ------------------------------------------------------------------------------------------
# Spans (GetNextSpanOfFusions): which neighbours in sorted order go into one kernel
# ------------------------------------------------------------------------------------------


def _left(c: Candidate):
    return c.extra["left"]


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
    """Only kernels of the same instruction count are fused horizontally (XLA 2024).

    What it checks: the candidate's fused instruction count (1 for an unfused op) equals that of
    the span's first candidate.
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
    if c.extra.get("sliced"):
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
    if c.extra["accum_outputs"] < c.extra["max_batch"]:
        return None
    return objection(producer=c.producer.name, outputs=c.extra["accum_outputs"], limit=c.extra["max_batch"])


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
    size = c.extra["accum_io"] * 8
    if size < MAX_CUDA_PARAM_SIZE:
        return None
    return objection(producer=c.producer.name, bytes=size, limit=MAX_CUDA_PARAM_SIZE)


@rule(id="HF-UNROLL-COST", name="horizontal-unroll-cost", passes=_PASSES, pipelines=_PIPELINES,
      tags={"horizontal", "expensive"}, relaxable=True, xla=_ref("GetNextSpanOfFusions"),
      message="the horizontal fusion's unroll cost would reach {cost} (limit {limit}); sqrt, rsqrt, abs, "
              "floor, ceil and rounding of floats cost 20 each")
def unroll_cost(c: Candidate):
    """A horizontal fusion keeps its unrolled instruction cost below 100 (XLA 2024).

    What it checks: the summed unroll cost of the span's candidates (20 per float abs, ceil,
    floor, rounding, rsqrt, sqrt; 0 for parameters, constants, tuples, broadcasts, bitcasts,
    reshapes, transposes, slices; 1 otherwise) reaches 100.  Present at the XLA of jaxlib
    0.4.35, removed a day later ("Always unroll small loops").
    Why XLA does this: the horizontal loop emitter unrolls; costly instructions make the
    unrolled kernel large.
    Example:
        three kLoop fusions of sqrt(sqrt(sqrt(x))) feeding one tuple: 60 + 60 >= 100, not fused
    Relaxing: a performance trade.
    """
    if c.extra["accum_cost"] < MAX_INSTR_UNROLL_COST:
        return None
    return objection(producer=c.producer.name, cost=c.extra["accum_cost"], limit=MAX_INSTR_UNROLL_COST)


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
    return objection(producer=c.producer.name) if c.extra.get("alone") else None


#: The span checks of GetNextSpanOfFusions, in order.
SPAN_RULES = ("HF-DIFFERENT-OUTPUT-TYPE", "HF-DIFFERENT-OUTPUT-COUNT", "HF-DIFFERENT-SIZE", "HF-DIFFERENT-SHAPES",
              "HF-BATCH-FULL", "HF-PARAMETER-SIZE", "HF-UNROLL-COST")
