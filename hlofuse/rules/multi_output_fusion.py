"""MultiOutputFusion's rules (xla/service/gpu/transforms/multi_output_fusion.cc): sibling
fusion (two users of one value become one kernel with two outputs) and producer-consumer
multi-output fusion (a producer joins its consumer's kernel and is still written out for its
other users).  docs/xla/legacy-gpu-pipeline.md §7 (2024) and docs/xla/priority-fusion.md §7
(2026; the same checks, another cost model).

Candidates (`MofCandidate`, rules/candidates.py): siblings are (i, j) with `parent` the shared
operand; producer-consumer candidates are (X, C).  `model` is the pass's performance model (see
passes/multi_output_fusion.py) and `reachable` a reachability oracle.
"""

from __future__ import annotations

from ..attributes import slice_dims
from ..gpu import gpu_config
from ..gpu.fusible import is_fusible_as_multi_output_fusion_root, is_loop_fusible_as_producer
from ..gpu.in_place import in_place_pairs
from ..gpu.properties import is_multi_output_fusion
from ..gpu.shapes import byte_size_of_elements
from ..gpu.transposes import is_physically_transposing
from . import XLA_COMMITS, Candidate, XlaRef, objection, rule
from .gpu_fusible import BUDGET_RULES, SHAPE_RULES

_FILE = "xla/service/gpu/transforms/multi_output_fusion.cc"
_FILE_FUSIBLE = "xla/service/gpu/gpu_fusible.cc"
_P = XLA_COMMITS["legacy"]
_PASSES = ("multi_output_fusion",)
_PIPELINES = ("legacy", "priority")


def _ref(function: str, message: str | None, file: str = _FILE) -> XlaRef:
    return XlaRef(file, function, message, _P)


# ------------------------------------------------------------------------------------------
# Sibling fusion (CanFuseSiblings)
# ------------------------------------------------------------------------------------------


@rule(id="MOF-SIBLINGS-CONNECTED", name="mof-siblings-connected", passes=_PASSES, pipelines=_PIPELINES,
      tags={"cycle", "multi-output", "legality"}, relaxable=False,
      xla=_ref("CanFuseSiblings", "{first} and {second} are connected"),
      message="{first} and {second} are connected ({path}); one kernel holding both would depend on itself")
def siblings_connected(c: Candidate):
    """Siblings where one reaches the other cannot become one kernel.

    What it checks: either sibling is reachable from the other through users.
    Why XLA does this: merging them would create a cycle: the kernel would read its own output.
    Example:
        a = f32[8] fusion(p), kind=kLoop, calls=f
        b = f32[8] fusion(p, a), kind=kLoop, calls=g     # b reads a; both read p
    Relaxing: not possible.
    """
    reachable = c.reachable
    a, b = c.producer, c.consumer
    if reachable(a, b):
        return objection(first=a.name, second=b.name, path=f"{b.name} depends on {a.name}")
    if reachable(b, a):
        return objection(first=a.name, second=b.name, path=f"{a.name} depends on {b.name}")
    return None


def _unique_slice(parent, node):
    """FindUniqueSlice: the slice through which `node` reads `parent` (directly, or through a
    single-user fused parameter), if there is exactly one."""
    if node.opcode == "slice":
        return node
    if node.opcode != "fusion":
        return None
    result = None
    for i, op in enumerate(node.operands):
        if op is parent:
            if result is not None:
                return None
            param = node.fused_parameter(i)
            if len(param.users) != 1:
                return None
            result = _unique_slice(param, param.users[0])
            if result is None:
                return None
    return result


@rule(id="MOF-SLICES-NON-OVERLAPPING", name="mof-slices-non-overlapping", passes=_PASSES, pipelines=_PIPELINES,
      tags={"slice", "multi-output", "memory-traffic"}, relaxable=True,
      xla=_ref("ParameterSlicesAreNonOverlapping", "slices are non-overlapping"),
      message="{first} and {second} read disjoint slices of {parent} (dimension {dimension}); fusing them "
              "saves no reads")
def slices_non_overlapping(c: Candidate):
    """Siblings reading disjoint slices of a large operand are not fused.

    What it checks: the shared operand is an array of at least 1024 bytes and each sibling reads
    it through exactly one slice; the slices do not overlap in some dimension.
    Why XLA does this: sibling fusion pays off by reading the shared operand once; disjoint
    slices share no data, so the fusion would only make a bigger kernel.
    Example:
        a = f32[128] fusion(p), calls=first_half    # slice [0:128] of f32[256] p
        b = f32[128] fusion(p), calls=second_half   # slice [128:256]
    Relaxing: a performance trade: one larger kernel instead of two, without saving reads.
    """
    parent = c.parent
    if parent is None or parent.shape.is_tuple or byte_size_of_elements(parent.shape) < 1024:
        return None
    s1, s2 = _unique_slice(parent, c.producer), _unique_slice(parent, c.consumer)
    if s1 is None or s2 is None:
        return None
    d1, d2 = slice_dims(s1), slice_dims(s2)
    for dim in range(min(parent.shape.rank, len(d1), len(d2))):
        if not (d1[dim].start < d2[dim].limit and d2[dim].start < d1[dim].limit):
            return objection(first=c.producer.name, second=c.consumer.name, parent=parent.name, dimension=dim)
    return None


@rule(id="MOF-MULTIPLE-DUS", name="mof-multiple-dus", passes=_PASSES, pipelines=_PIPELINES,
      tags={"in-place", "multi-output", "legality"}, relaxable=False,
      xla=_ref("LegalToFuse", "can't fuse multiple DUSs"),
      message="{which} is rooted at a dynamic-update-slice; its in-place update cannot share a kernel")
def multiple_dus(c: Candidate):
    """A fusion rooted at a dynamic-update-slice is not sibling-fused.

    What it checks: either sibling fusion's root is a dynamic-update-slice.
    Why XLA does this: the in-place update emitter writes into the operand's buffer; iterating
    another output in the same loop could read elements already overwritten.
    Example:
        a = f32[8] fusion(p, u, i), kind=kLoop, calls=dus
        b = f32[8] fusion(p), kind=kLoop, calls=negate
    Relaxing: not possible.
    """
    a, b = c.producer, c.consumer
    for node in (a, b):
        if node.opcode == "fusion" and node.fused.root.opcode == "dynamic-update-slice":
            return objection(first=a.name, second=b.name, which=node.name)
    return None


def sibling_rules() -> tuple[str, ...]:
    """CanFuseSiblings, in XLA's order."""
    return ("MOF-SIBLINGS-CONNECTED",) + SHAPE_RULES + ("MOF-SLICES-NON-OVERLAPPING", "MOF-MULTIPLE-DUS") \
        + BUDGET_RULES


# ------------------------------------------------------------------------------------------
# Producer-consumer multi-output fusion
# ------------------------------------------------------------------------------------------


@rule(id="MOF-PRODUCER-MULTI-OUTPUT", name="mof-producer-multi-output", passes=_PASSES, pipelines=_PIPELINES,
      tags={"multi-output", "legality"}, relaxable=False,
      xla=_ref("IsProducerMultiOutputFusible", "Producer is a multi-output fusion", _FILE_FUSIBLE),
      message="{producer} already is a multi-output fusion")
def producer_multi_output(c: Candidate):
    """A multi-output fusion is not fused into a consumer as a further output.

    What it checks: the producer is a fusion whose root is a tuple.
    Why XLA does this: merging a multi-output producer into a consumer is not supported.
    Example:
        f = (f32[8], f32[8]) fusion(x), kind=kLoop, calls=two
        ROOT r = f32[] reduce(get-tuple-element(f), index=0), ...
    Relaxing: not possible.
    """
    if not is_multi_output_fusion(c.producer):
        return None
    return objection(producer=c.producer.name)


@rule(id="MOF-PRODUCER-IN-PLACE", name="mof-producer-in-place", passes=_PASSES, pipelines=_PIPELINES,
      tags={"in-place", "multi-output", "legality"}, relaxable=False,
      xla=_ref("IsProducerMultiOutputFusible", "In-place operations are present", _FILE_FUSIBLE),
      message="{producer} updates operand {operand} in place")
def producer_in_place(c: Candidate):
    """A producer that updates a buffer in place is not multi-output fused.

    What it checks: the producer has in-place input/output pairs (a dynamic-update-slice, a
    scatter, a fusion rooted at one, an aliasing custom call...).
    Why XLA does this: XLA's comment: iterating all outputs of one loop in parallel must not let
    one iteration overwrite an element another still reads; XLA bans the case outright.
    Example:
        d = f32[8] dynamic-update-slice(p, u, i)
        n = f32[8] negate(d)
        ROOT t = (f32[8], f32[8]) tuple(d, n)
    Relaxing: not possible; the result could be wrong.
    """
    pairs = in_place_pairs(c.producer)
    if not pairs:
        return None
    return objection(producer=c.producer.name, operand=pairs[0][0])


@rule(id="MOF-PRODUCER-NOT-LOOP-FUSIBLE", name="mof-producer-not-loop-fusible", passes=_PASSES,
      pipelines=_PIPELINES, tags={"structure", "custom-call", "legality"}, relaxable=False,
      xla=_ref("IsProducerMultiOutputFusible", "producer is not loop-fusible", _FILE_FUSIBLE),
      message="{producer} ({opcode}) cannot be computed inside another kernel")
def producer_not_loop_fusible(c: Candidate):
    """The producer is not loop-fusible, so it cannot join a consumer's kernel.

    What it checks: IsLoopFusibleAsProducer (as for instruction fusion).
    Why XLA does this: the producer must be emitted elementally inside the consumer's loop.
    Example:
        r = u32[2048] custom-call(k), custom_call_target="cu_threefry2x32_ffi"
        a = u32[2048] add(r, one)
        ROOT t = (u32[2048], u32[2048]) tuple(r, a)
    Relaxing: not possible.
    """
    if is_loop_fusible_as_producer(c.producer, gpu_config(c.ctx)):
        return None
    return objection(producer=c.producer.name, opcode=c.producer.opcode)


@rule(id="MOF-PRODUCER-TRANSPOSING", name="mof-producer-transposing", passes=_PASSES, pipelines=_PIPELINES,
      tags={"transpose", "layout", "multi-output"}, relaxable=True,
      xla=_ref("IsProducerMultiOutputFusible", "producer is physically transposing", _FILE_FUSIBLE),
      message="{producer} physically transposes its data; as a side output of {consumer} it would be "
              "written uncoalesced")
def producer_transposing(c: Candidate):
    """A physically transposing producer is not multi-output fused.

    What it checks: the producer is a copy or a non-bitcast transpose, or a fusion holding one.
    Why XLA does this: the consumer's loop iterates in its own layout; writing the transposed
    producer as a side output would be strided.
    Example:
        t = f32[64,32]{0,1} copy(f32[64,32]{1,0} x)
        ROOT r = (f32[64], f32[64,32]{0,1}) tuple(reduce(t), t)
    Relaxing: a performance trade: the side output is written uncoalesced.
    """
    if not is_physically_transposing(c.producer):
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name)


@rule(id="MOF-CONSUMER-NOT-ROOT", name="mof-consumer-not-root", passes=_PASSES, pipelines=_PIPELINES,
      tags={"multi-output", "structure", "tuple", "legality"}, relaxable=False,
      xla=_ref("ProducerCandidateIsFusible", "consumer not eligible as multi-output fusion root."),
      message="{consumer} ({opcode}) cannot be an output of a multi-output kernel")
def consumer_not_root(c: Candidate):
    """The consumer cannot be the root of a multi-output fusion.

    What it checks: IsFusibleAsMultiOutputFusionRoot(consumer): fusible, not a custom fusion, and
    an input-fusible reduction, a tiled transpose, a kLoop fusion or an elementwise op.
    Why XLA does this: only those kernels can be extended with side outputs (a scatter's
    emitter, a tuple, a custom call cannot).
    Example:
        n = f32[8] negate(x)
        ROOT t = (f32[8], f32[8]) tuple(n, x)
    Relaxing: not possible.
    """
    if is_fusible_as_multi_output_fusion_root(c.consumer, gpu_config(c.ctx)):
        return None
    return objection(consumer=c.consumer.name, opcode=c.consumer.opcode)


@rule(id="MOF-CYCLE", name="mof-would-create-cycle", passes=_PASSES, pipelines=_PIPELINES,
      tags={"cycle", "multi-output", "legality"}, relaxable=False,
      xla=_ref("OperandReachableFromProducer", "{producer} would introduce a cycle when fused"),
      message="{producer} would introduce a cycle when fused into {consumer}: {consumer} also reads "
              "{operand}, which depends on {producer}")
def would_create_cycle(c: Candidate):
    """Fusing would make the kernel read a value computed from its own output.

    What it checks: another operand of the consumer (looking through get-tuple-element) is
    reachable from the producer.
    Why XLA does this: the merged kernel would depend on itself.
    Example:
        a = f32[8] negate(x)
        b = f32[8] exponential(a)
        ROOT c = f32[8] add(a, b)        # a cannot join c's kernel: b is in between
    Relaxing: not possible.
    """
    reachable = c.reachable
    for operand in c.consumer.operands:
        if operand is not c.producer and reachable(c.producer, operand):
            return objection(producer=c.producer.name, consumer=c.consumer.name, operand=operand.name)
    return None


@rule(id="MOF-TOO-LARGE-IR", name="mof-too-large-ir", passes=_PASSES, pipelines=_PIPELINES,
      tags={"compile-time", "duplication"}, relaxable=True,
      xla=_ref("ProducerCandidateIsFusible", "will generate too large IR"),
      message="fusing {producer} into {consumer} would emit {merged} IR instructions (limit 10000)")
def too_large_ir(c: Candidate):
    """The multi-output kernel's IR would be too large.

    What it checks: ProducerConsumerMergedTooLarge (as FusionMerger's huge-IR rule).
    Why XLA does this: compile time grows with the emitted IR.
    Example:
        a producer of 200 instructions whose consumer reads it through 100 slices
    Relaxing: a compile-time trade.
    """
    too_large, merged, _ = c.model.merged_too_large(c.producer, c.consumer)
    if not too_large:
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name, merged=merged)


@rule(id="MOF-SLOWER-IF-FUSED", name="mof-slower-if-fused", passes=_PASSES, pipelines=_PIPELINES,
      tags={"cost-model"}, relaxable=True, xla=_ref("ProducerCandidateIsFusible", "will execute slower if fused"),
      message="the model says {producer} inside {consumer} (still written as an output) is slower: "
              "{fused_us:.3f} us fused vs {unfused_us:.3f} us unfused{dominant_words}")
def slower_if_fused(c: Candidate):
    """XLA's performance model says the multi-output kernel would be slower.

    What it checks: the performance model's fused time (the producer recomputed in the consumer
    plus its output still written) against the unfused time; refused when fused > unfused.
    (2024: GpuPerformanceModel::EstimateRunTimes(multi_output=true); 2026:
    EstimateRunTimesForMultiOutputFusion.)
    Why XLA does this: the fusion saves a launch and a read of the producer's output, but may
    make the consumer's kernel slower (more work per element, worse launch shape).
    Example:
        p = f32[4096,4096] exponential(x)
        ROOT r = f32[4096] fusion(broadcast-heavy use of p), kind=kInput, calls=reduce
    Relaxing: a performance trade: the model predicts a slower kernel.
    """
    model = c.model
    if hasattr(model, "estimate_run_time_terms"):  # the 2024 model: its sums are the terms
        found = model.estimate_run_time_terms(c.producer, [c.consumer], multi_output=True)
        times = found.times
        if times.fused <= times.unfused:
            return None
        from ..cost.terms import legacy_terms, terms_facts

        return objection(producer=c.producer.name, consumer=c.consumer.name, fused_us=times.fused_us,
                         unfused_us=times.unfused_us,
                         **terms_facts(legacy_terms(found, side_output=True), c.producer.name, times))
    times = model.estimate_run_times(c.producer, [c.consumer], multi_output=True)
    if times.fused <= times.unfused:
        return None
    from ..cost.terms import cost_facts

    return objection(producer=c.producer.name, consumer=c.consumer.name, fused_us=times.fused_us,
                     unfused_us=times.unfused_us,
                     **cost_facts(model, c.producer, [c.consumer], side_output=True, times=times))


@rule(id="MOF-OTHER-CONSUMER-PREFERRED", name="mof-other-consumer-preferred", passes=_PASSES,
      pipelines=_PIPELINES, tags={"multi-output", "choice"}, relaxable=False,
      xla=_ref("SelectPreferredFusionCandidate", None),
      message="{producer} could join {consumer}, but XLA picks one consumer and preferred {chosen}")
def other_consumer_preferred(c: Candidate):
    """Another consumer was preferred for the producer.

    What it checks: among the consumers that passed every check, XLA takes the first one of the
    highest priority (a multi-output fusion over another fusion over an unfused op); this
    consumer was not it.  XLA gives no reason string; hlofuse names the choice.
    Why XLA does this: a producer is fused into one consumer per step.
    Example:
        p = f32[8] negate(x)
        a = f32[8] fusion(p), kind=kLoop, calls=f       # preferred (a fusion)
        b = f32[8] add(p, y)
    Relaxing: not possible; the producer can join only one kernel.
    """
    chosen = c.chosen
    if chosen is None or chosen is c.consumer:
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name, chosen=chosen.name)


#: IsProducerMultiOutputFusible, in order.
PRODUCER_RULES = ("MOF-PRODUCER-MULTI-OUTPUT", "MOF-PRODUCER-IN-PLACE", "MOF-PRODUCER-NOT-LOOP-FUSIBLE",
                  "MOF-PRODUCER-TRANSPOSING")


def consumer_rules() -> tuple[str, ...]:
    """ProducerCandidateIsFusible, in XLA's order (shape checks compare (consumer, producer))."""
    return ("MOF-CONSUMER-NOT-ROOT",) + SHAPE_RULES + ("MOF-CYCLE",) + BUDGET_RULES + (
        "MOF-TOO-LARGE-IR", "MOF-SLOWER-IF-FUSED")
