"""XLA:GPU's shared fusibility rules (xla/service/gpu/gpu_fusible.cc): the ordered checks of
IsProducerConsumerFusible, the resource budget of FusionFitsInBudget, and the hero and loop
shape compatibility every multi-output kernel needs.  GpuInstructionFusion, FusionMerger,
MultiOutputFusion, HorizontalInputFusion (legacy) and PriorityFusion (current) all ask them.

Candidates: `producer` fused into `consumer`.  Rules that compare two instructions
symmetrically read `candidate.pair` = (a, b) (None: (producer, consumer)); budget rules read
`candidate.budget` = (instr1, instr2, is_consumer_producer) (None: (consumer, producer, True)),
because XLA's callers pass them in different orders.
"""

from __future__ import annotations

from ..gpu import gpu_config
from ..gpu.budget import over_operand_budget, over_shared_memory, over_unnested_reductions
from ..gpu.fusible import (epilogue_is_intermediate, is_input_fusible, is_input_fusible_reduction,
                           is_input_fusible_scatter, is_input_fusible_transpose, is_loop_fusible_as_consumer,
                           is_loop_fusible_as_producer, scatter_in_place_operand)
from ..gpu.heroes import find_non_trivial_hero, heroes_incompatibility, loop_shape, real_hero
from ..gpu.properties import is_multi_output_fusion
from ..gpu.reductions import is_race_free, reduction_dimensions
from ..gpu.shapes import equal_ignoring_element_type, is_reshape_or_transpose_bitcast
from . import XLA_COMMITS, Candidate, XlaRef, objection, rule

_FILE = "xla/service/gpu/gpu_fusible.cc"
_P = XLA_COMMITS["legacy"]
_PIPELINES = ("legacy", "priority")
_PASSES = ("fusion", "fusion_merger", "multi_output_fusion", "horizontal_input_fusion", "priority-fusion")


def _ref(function: str, message: str | None) -> XlaRef:
    return XlaRef(_FILE, function, message, _P)


def _cfg(c: Candidate):
    return gpu_config(c.ctx)


def _memo_of(c: Candidate) -> dict:
    """The candidate's memo (made by the first rule that keeps something in it).  Rules look
    their entry up first and compute it only when missing: no closure is made per question."""
    memo = c.memo
    if memo is None:
        memo = c.memo = {}
    return memo


#: Why an opcode cannot be a kernel's inner (loop-fused) instruction, in words.
_NOT_LOOP_FUSIBLE_WHY = {
    "custom-call": "a custom call is a library kernel of its own (cuBLAS, cuDNN, an RNG...)",
    "tuple": "a tuple only groups buffers; it computes nothing a kernel could index",
    "get-tuple-element": "a get-tuple-element names a buffer of a tuple, not a computation",
    "parameter": "a parameter is an input buffer",
    "while": "a while loop runs its body as separate kernels",
    "conditional": "a conditional runs its branches as separate kernels",
    "call": "a call runs another computation",
    "dot": "a dot runs as a library GEMM (or its own kernel)",
    "convolution": "a convolution runs as a library kernel",
    "sort": "a sort runs as its own kernel",
    "scatter": "a scatter writes its output in place and must be a kernel's root",
    "fusion": "only kLoop fusions can be loop-fused",
    "reduce": "a variadic reduce cannot be inlined into another loop",
    "rng-bit-generator": "the RNG bit generator runs as its own kernel",
    "select-and-scatter": "select-and-scatter runs as its own kernel",
    "all-reduce": "collectives run as their own kernels",
}


def _why_not_loop_fusible(node) -> str:
    return _NOT_LOOP_FUSIBLE_WHY.get(node.opcode, f"XLA:GPU's loop emitter does not fuse {node.opcode}")


# ------------------------------------------------------------------------------------------
# IsProducerConsumerFusible, in XLA's order
# ------------------------------------------------------------------------------------------


@rule(id="GF-PRODUCER-NOT-LOOP-FUSIBLE", name="producer-not-loop-fusible", passes=_PASSES, pipelines=_PIPELINES,
      tags={"structure", "custom-call", "tuple", "legality"}, relaxable=False,
      xla=_ref("IsProducerConsumerFusible", "the producer is not loop-fusible"),
      message="{producer} ({opcode}) cannot be inlined into another kernel: {why}")
def producer_not_loop_fusible(c: Candidate):
    """The producer is not loop-fusible and not a tiled transpose.

    What it checks: IsLoopFusibleAsProducer (iota, constant, a non-variadic reduce, elementwise
    ops, copies, kLoop fusions and the data-movement ops bitcast, broadcast, concatenate,
    dynamic-slice, dynamic-update-slice, gather, pad, reduce-window, reshape, reverse, slice,
    transpose) or IsInputFusibleTranspose.  Custom calls (library kernels such as the threefry
    RNG), tuples, get-tuple-elements, dots, sorts and scatters fail.
    Why XLA does this: the loop emitter recomputes a fused producer per output element; only ops
    it can express elementally can be inlined.  A custom call is an opaque library kernel.
    Example:
        r = u32[2048] custom-call(k), custom_call_target="cu_threefry2x32_ffi"
        ROOT a = u32[2048] add(r, one)     # r stays its own kernel
    Relaxing: not possible; XLA cannot emit such a kernel.
    """
    p, cfg = c.producer, _cfg(c)
    if is_loop_fusible_as_producer(p, cfg) or is_input_fusible_transpose(p, cfg):
        return None
    return objection(producer=p.name, opcode=p.opcode, why=_why_not_loop_fusible(p))


def _reduction_producer(c: Candidate) -> bool:
    memo = _memo_of(c)
    found = memo.get("input_fusible_reduction_producer")
    if found is None:
        found = memo["input_fusible_reduction_producer"] = is_input_fusible_reduction(c.producer, _cfg(c))
    return found


@rule(id="GF-REDUCTION-EPILOGUE-DISABLED", name="reduction-epilogue-disabled", passes=_PASSES,
      pipelines=_PIPELINES, tags={"reduction", "legality"}, relaxable=False,
      xla=_ref("IsProducerConsumerFusible", "Reduction epilogue fusion is not enabled."),
      message="{producer} is a reduction and xla_gpu_enable_reduction_epilogue_fusion is off")
def reduction_epilogue_disabled(c: Candidate):
    """Reduction epilogue fusion is switched off.

    What it checks: the producer is an input-fusible reduction and the debug option
    `xla_gpu_enable_reduction_epilogue_fusion` (default on) is off.
    Why XLA does this: the option lets users turn the feature off.
    Example:
        r = f32[64] reduce(x, zero), dimensions={1}, to_apply=add
        ROOT n = f32[64] negate(r)
    Relaxing: not possible; it is a switch of the compiler.
    """
    if not _reduction_producer(c) or _cfg(c).reduction_epilogue_fusion:
        return None
    return objection(producer=c.producer.name)


def _reduce_hero(c: Candidate):
    p = c.producer
    return find_non_trivial_hero(p.fused.root, _cfg(c)) if p.opcode == "fusion" else p


@rule(id="GF-REDUCTION-NOT-RACE-FREE", name="reduction-not-race-free", passes=_PASSES, pipelines=_PIPELINES,
      tags={"reduction", "legality"}, relaxable=False,
      xla=_ref("IsProducerConsumerFusible", "Reduction output fusion only works for race free reductions"),
      message="{producer} is a {dims}, reduced by several blocks at once, so no epilogue can follow it")
def reduction_not_race_free(c: Candidate):
    """A reduction whose result several blocks write cannot take an epilogue.

    What it checks: the producer is an input-fusible reduction whose reduce is not race free: a
    row reduction of more than 16384 elements (8192 with an old ptxas) or more than 8 batched
    rows, or a column reduction of more than 4096 rows.
    Why XLA does this: such reductions combine partial results with atomics; an elementwise
    epilogue would run on partial sums.
    Example:
        r = f32[] reduce(f32[100000] x, zero), dimensions={0}, to_apply=add
        ROOT s = f32[] sqrt(r)
    Relaxing: not possible; the result would be wrong.
    """
    if not _reduction_producer(c):
        return None
    hero = _reduce_hero(c)
    dims = reduction_dimensions(hero)
    if is_race_free(dims, _cfg(c)):
        return None
    return objection(producer=c.producer.name, dims=str(dims))


@rule(id="GF-REDUCTION-EPILOGUE-NOT-ELEMENTWISE", name="reduction-epilogue-not-elementwise", passes=_PASSES,
      pipelines=_PIPELINES, tags={"reduction", "legality"}, relaxable=False,
      xla=_ref("IsProducerConsumerFusible", "Reductions from/to continuous dims epilogue not fusible"),
      message="{producer} is a reduction kernel and {consumer} is not a chain of single-operand elementwise ops "
              "({offender})")
def reduction_epilogue_not_elementwise(c: Candidate):
    """Only single-operand elementwise ops (and bitcasts) may follow a reduction in its kernel.

    What it checks: the producer is an input-fusible reduction and some instruction of the
    consumer (the consumer itself, or any instruction of a consumer fusion) is not
    IsIntermediate: it has more than one operand, or it is a broadcast, a layout-changing copy,
    a reduce, a transpose...
    Why XLA does this: the reduction emitter computes each output element once, at the end of
    the reduction; an epilogue can only transform that value, not combine it with others.
    Example:
        r = f32[64] reduce(x, zero), dimensions={1}, to_apply=add
        ROOT b = f32[64,128] broadcast(r), dimensions={0}
    Relaxing: not possible; the reduction emitter cannot express it.
    """
    if not _reduction_producer(c) or epilogue_is_intermediate(c.consumer):
        return None
    from ..gpu.heroes import is_intermediate

    con = c.consumer
    offenders = [con] if con.opcode != "fusion" else [
        n for n in con.fused.nodes() if n.opcode != "parameter" and not is_intermediate(n, 1)]
    first = offenders[0] if offenders else con
    return objection(producer=c.producer.name, consumer=con.name, offender=f"{first.name}: {first.opcode}")


@rule(id="GF-REDUCTION-MULTIPLE-USERS", name="reduction-multiple-users", passes=_PASSES, pipelines=_PIPELINES,
      tags={"reduction", "legality"}, relaxable=False,
      xla=_ref("IsProducerConsumerFusible", "reduction output fusion only works for single user"),
      message="{producer} is a reduction kernel with {users} users; an epilogue can be fused only into its one user")
def reduction_multiple_users(c: Candidate):
    """A reduction with several users cannot take an epilogue.

    What it checks: the producer is an input-fusible reduction with more than one user.
    Why XLA does this: the reduction kernel must still write its own result for the other
    users, and the reduction emitter supports one epilogue per reduction.
    Example:
        r = f32[64] reduce(x, zero), dimensions={1}, to_apply=add
        n = f32[64] negate(r)
        ROOT t = (f32[64], f32[64]) tuple(n, r)
    Relaxing: not possible.
    """
    if not _reduction_producer(c) or len(c.producer.users) <= 1:
        return None
    return objection(producer=c.producer.name, users=len(c.producer.users))


@rule(id="GF-SCATTER-PRODUCER", name="scatter-producer", passes=_PASSES, pipelines=_PIPELINES,
      tags={"scatter", "legality"}, relaxable=False,
      xla=_ref("CanEmitInputFusedScatter", "do not fuse into the output of scatter"),
      message="{producer} is a scatter; its output is written in place and cannot be recomputed per element")
def scatter_producer(c: Candidate):
    """Nothing is fused into the output of a scatter.

    What it checks: the producer is a scatter or a kInput fusion rooted at one.
    Why XLA does this: a scatter updates its operand in place in an order the consumer cannot
    index; its result exists only after the whole kernel ran.
    Example:
        s = f32[8] scatter(a, i, u), ..., to_apply=add
        ROOT n = f32[8] negate(s)
    Relaxing: not possible.
    """
    if not is_input_fusible_scatter(c.producer):
        return None
    return objection(producer=c.producer.name)


def _scatter_buffer(c: Candidate):
    if not is_input_fusible_scatter(c.consumer):
        return None
    return scatter_in_place_operand(c.consumer)


@rule(id="GF-SCATTER-IN-PLACE-OPERAND", name="scatter-in-place-operand", passes=_PASSES, pipelines=_PIPELINES,
      tags={"scatter", "in-place", "legality"}, relaxable=False,
      xla=_ref("CanEmitInputFusedScatter", "do not fuse into the in-place operand of scatter"),
      message="{producer} is the buffer {consumer} scatters into in place")
def scatter_in_place_operand_rule(c: Candidate):
    """The buffer a scatter updates in place is not computed inside the scatter kernel.

    What it checks: the consumer is a (fused) scatter and the producer is its operand 0, the
    buffer it updates.
    Why XLA does this: the scatter writes into that buffer; it must exist in memory first.
    Example:
        a = f32[8] add(x, y)
        ROOT s = f32[8] scatter(a, i, u), ..., to_apply=add
    Relaxing: not possible.
    """
    buffer = _scatter_buffer(c)
    if buffer is None or buffer is not c.producer:
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name)


@rule(id="GF-SCATTER-SHARED-OPERAND", name="scatter-shared-operand", passes=_PASSES, pipelines=_PIPELINES,
      tags={"scatter", "in-place", "legality"}, relaxable=False,
      xla=_ref("CanEmitInputFusedScatter", "Producer uses the in-place operand of a scatter"),
      message="{producer} reads {buffer}, which {consumer} overwrites in place")
def scatter_shared_operand(c: Candidate):
    """A producer reading the scatter's in-place buffer cannot run inside the scatter.

    What it checks: the consumer is a (fused) scatter and the producer reads the buffer the
    scatter updates.
    Why XLA does this: the scatter overwrites that buffer while the fused producer would still
    read it.
    Example:
        s = f32[4] slice(a), slice={[0:4]}
        ROOT r = f32[8] scatter(a, i, s), ..., to_apply=add
    Relaxing: not possible.
    """
    buffer = _scatter_buffer(c)
    if buffer is None or not any(op is buffer for op in c.producer.operands):
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name, buffer=buffer.name)


@rule(id="GF-CONSUMER-NOT-FUSIBLE", name="consumer-not-fusible-gpu", passes=_PASSES, pipelines=_PIPELINES,
      tags={"structure", "tuple", "custom-call", "legality"}, relaxable=False,
      xla=_ref("IsProducerConsumerFusible", "the consumer is not input-fusible and not loop-fusible"),
      message="{consumer} ({opcode}) cannot take a producer in: {why}")
def consumer_not_fusible(c: Candidate):
    """The consumer is neither an input (reduction, scatter, transpose) nor a loop kernel.

    What it checks: IsInputFusible(consumer) or IsLoopFusibleAsConsumer(consumer): a tuple (the
    output of a loop body), a custom call, a get-tuple-element, a dot, a bitcast (it would only
    become a fusion root adding indexing) fail.
    Why XLA does this: only kernels XLA emits itself can absorb a producer; a tuple is not a
    kernel but a list of buffers, so whatever it collects must be materialised in memory.
    Example:
        n = f32[8] negate(x)
        ROOT t = (f32[8]) tuple(n)       # the loop output: n is written to memory
    Relaxing: not possible.
    """
    con, cfg = c.consumer, _cfg(c)
    # (loop-fusible first: it answers a kLoop fusion at once, while IsInputFusible looks for
    # the hero of every root of its body, again each time the body grew)
    if is_loop_fusible_as_consumer(con, cfg) or is_input_fusible(con, cfg):
        return None
    why = "a bitcast consumer would only be a fusion root, adding indexing" if con.opcode == "bitcast" \
        else _why_not_loop_fusible(con)
    return objection(consumer=con.name, opcode=con.opcode, why=why)


@rule(id="GF-PRODUCER-MULTI-OUTPUT", name="producer-multi-output", passes=_PASSES, pipelines=_PIPELINES,
      tags={"multi-output", "legality"}, relaxable=False,
      xla=_ref("IsProducerConsumerFusible", "the producer is not fusible as it is a multi-output fusion"),
      message="{producer} is a multi-output fusion; it cannot be fused into a consumer")
def producer_multi_output(c: Candidate):
    """A multi-output fusion is never fused into a consumer.

    What it checks: the producer is a fusion whose root is a tuple.
    Why XLA does this: its outputs are consumed through get-tuple-elements; fusing one of them
    would need the producer's other outputs kept as well, which the passes do not support.
    Example:
        f = (f32[8], f32[8]) fusion(x), kind=kLoop, calls=two_outputs
        ROOT n = f32[8] negate(get-tuple-element(f), index=0)
    Relaxing: not possible.
    """
    if not is_multi_output_fusion(c.producer):
        return None
    return objection(producer=c.producer.name)


@rule(id="GF-NON-SCALAR-CONSTANT", name="constant-not-fused", passes=_PASSES, pipelines=_PIPELINES,
      tags={"constant", "compile-time"}, relaxable=True,
      xla=_ref("IsProducerConsumerFusible", "not fusing constant"),
      message="{producer} is a constant {why}; XLA keeps it as an external buffer")
def non_scalar_constant(c: Candidate):
    """Only scalar constants are fused, and only into an existing fusion.

    What it checks: the producer is a constant that is not an effective scalar, or the consumer
    is not a fusion yet (a scalar constant joins a fusion one step after the fusion exists).
    Why XLA does this: an unfused constant is an external buffer, not code: compiles are faster
    and the PTX smaller.  Fusing scalars makes broadcasts of them cheap to match.
    Example:
        c = f32[16] constant({...})
        ROOT a = f32[16] add(x, c)         # c stays a kernel input
    Relaxing: a compile-time trade: the constant's values are emitted into the kernel's code.
    """
    p = c.producer
    if p.opcode != "constant":
        return None
    if not p.shape.is_effective_scalar:
        return objection(producer=p.name, why=f"of shape {p.shape.to_text(False)}, not a scalar")
    if c.consumer.opcode != "fusion":
        return objection(producer=p.name, why=f"and {c.consumer.name} is not a fusion yet")
    return None


def _in_place_rules() -> tuple[str, ...]:
    from .instruction_fusion import IN_PLACE_RULES

    return tuple(IN_PLACE_RULES)


#: IsProducerConsumerFusible, in XLA's order (ShouldFuseInPlaceOp last).
def producer_consumer_rules() -> tuple[str, ...]:
    if not _PRODUCER_CONSUMER:  # built at first use: the in-place rules' module imports this one
        _PRODUCER_CONSUMER.append((
            "GF-PRODUCER-NOT-LOOP-FUSIBLE", "GF-REDUCTION-EPILOGUE-DISABLED", "GF-REDUCTION-NOT-RACE-FREE",
            "GF-REDUCTION-EPILOGUE-NOT-ELEMENTWISE", "GF-REDUCTION-MULTIPLE-USERS", "GF-SCATTER-PRODUCER",
            "GF-SCATTER-IN-PLACE-OPERAND", "GF-SCATTER-SHARED-OPERAND", "GF-CONSUMER-NOT-FUSIBLE",
            "GF-PRODUCER-MULTI-OUTPUT", "GF-NON-SCALAR-CONSTANT") + _in_place_rules())
    return _PRODUCER_CONSUMER[0]


_PRODUCER_CONSUMER: list[tuple[str, ...]] = []


# ------------------------------------------------------------------------------------------
# FusionFitsInBudget
# ------------------------------------------------------------------------------------------


def _budget_pair(c: Candidate):
    return c.budget or (c.consumer, c.producer, True)


@rule(id="GF-SHARED-MEMORY-BUDGET", name="shared-memory-budget", passes=_PASSES, pipelines=_PIPELINES,
      tags={"budget", "reduction", "transpose", "legality"}, relaxable=False,
      xla=_ref("FusionFitsInBudget", "shared memory usage would be over the budget of {budget}B"),
      message="{first} and {second} together would need {bytes} bytes of shared memory per block "
              "(the device has {budget})")
def shared_memory_budget(c: Candidate):
    """The fused kernel would need more shared memory per block than the device has.

    What it checks: XLA's estimate of shared memory (32 elements per row reduction, a 4x32x33
    tile per column reduction, a 32x33 tile per tiled transpose) summed over both instructions
    against `shared_memory_per_block`.
    Why XLA does this: a kernel asking for more shared memory than a block may use cannot be
    launched.
    Example:
        12 column reductions of f32 (12 x 16896 bytes) in one multi-output fusion on a 48 KiB device
    Relaxing: not possible; the kernel would fail to launch.
    """
    a, b, _ = _budget_pair(c)
    found = over_shared_memory(a, b, _cfg(c))
    if found is None:
        return None
    return objection(first=a.name, second=b.name, **found)


@rule(id="GF-UNNESTED-REDUCTIONS-BUDGET", name="unnested-reductions-budget", passes=_PASSES,
      pipelines=_PIPELINES, tags={"budget", "reduction"}, relaxable=True,
      xla=_ref("FusionFitsInBudget", "over 8 unnested reductions in fusion"),
      message="{first} and {second} together hold {reductions} unnested reductions (at most {limit})")
def unnested_reductions_budget(c: Candidate):
    """A kernel holds at most 8 unnested (tiled) reductions.

    What it checks: the contiguous reductions of both instructions (inside fusions too) number
    more than 8.
    Why XLA does this: each unnested reduction keeps its own accumulators in registers; XLA's
    comment says many of them in one multi-output fusion risk register spilling.
    Example:
        nine sibling row reductions of the same input merged by multi-output fusion
    Relaxing: a performance trade: the kernel may spill registers, but computes the same.
    """
    a, b, _ = _budget_pair(c)
    found = over_unnested_reductions(a, b, _cfg(c))
    if found is None:
        return None
    return objection(first=a.name, second=b.name, **found)


@rule(id="GF-OPERAND-BUDGET", name="operand-budget", passes=_PASSES, pipelines=_PIPELINES,
      tags={"budget", "legality"}, relaxable=False,
      xla=_ref("FusionFitsInBudget",
               "Number of operands and output buffers is larger than allowed budget per fusion"),
      message="{first} and {second} together would have {operands} operands and {outputs} output buffers "
              "(at most {limit})")
def operand_budget(c: Candidate):
    """A kernel has at most 96 operands plus output buffers.

    What it checks: the distinct operands of both instructions (without the fused edge) plus
    their output buffers (tuple nodes count) exceed MaxOperandsAndOutputsPerFusion() = 96; a
    producer-consumer fusion that adds no operand to the consumer passes.
    Why XLA does this: CUDA caps the size of kernel parameters; XLA's comment calls the cap a
    workaround for that correctness problem (and good for performance).
    Example:
        a concatenate of 100 parameters fused into its consumer
    Relaxing: not possible; the kernel might not be launchable.
    """
    a, b, is_consumer_producer = _budget_pair(c)
    found = over_operand_budget(a, b, is_consumer_producer)
    if found is None:
        return None
    return objection(first=a.name, second=b.name, **found)


BUDGET_RULES = ("GF-SHARED-MEMORY-BUDGET", "GF-UNNESTED-REDUCTIONS-BUDGET", "GF-OPERAND-BUDGET")


# ------------------------------------------------------------------------------------------
# FusionHeroesAreCompatible and ShapesCompatibleForMultiOutputFusion
# ------------------------------------------------------------------------------------------


def _pair(c: Candidate):
    return c.pair or (c.producer, c.consumer)


def _hero_reason(c: Candidate):
    memo = _memo_of(c)
    found = memo.get("heroes")
    if found is None:
        a, b = _pair(c)
        cfg = _cfg(c)
        ha, hb = real_hero(a, cfg), real_hero(b, cfg)
        found = memo["heroes"] = (heroes_incompatibility(ha, hb, cfg), ha, hb)
    return found


def _hero_rule(*reasons: str):
    def check(c: Candidate):
        found, ha, hb = _hero_reason(c)
        if found not in reasons:
            return None
        a, b = _pair(c)
        return objection(first=a.name, second=b.name, first_hero=f"{ha.name} ({ha.opcode})",
                         second_hero=f"{hb.name} ({hb.opcode})")

    return check


def _register_hero_rule(rule_id, name, xla_message, message, relaxable, tags, doc, pipelines=_PIPELINES,
                        also=()):
    check = _hero_rule(xla_message, *also)
    check.__doc__ = doc
    check.__name__ = name.replace("-", "_")
    rule(id=rule_id, name=name, passes=_PASSES, pipelines=pipelines, tags=tags, relaxable=relaxable,
         xla=_ref("FusionHeroesAreCompatible", xla_message), message=message)(check)


_register_hero_rule(
    "GF-TILED-REDUCTIONS-DIFFER", "tiled-reductions-differ", "tiled reductions with different shapes",
    "{first} and {second} are reductions of different shapes ({first_hero} vs {second_hero}); one kernel "
    "cannot run both", False, {"reduction", "multi-output", "legality"},
    """Two unnested reductions of different shapes cannot share a kernel.

    What it checks: both heroes are contiguous reductions whose row/column form and sizes differ.
    Why XLA does this: the reduction emitter tiles the kernel by one reduction's shape; every
    reduction in it must use the same tiling.
    Example:
        r1 = f32[64] reduce(f32[64,128] x, zero), dimensions={1}
        r2 = f32[128] reduce(f32[64,128] x, zero), dimensions={0}   # row vs column
    Relaxing: not possible.
    """)
_register_hero_rule(
    "GF-TILED-TRANSPOSES-DIFFER", "tiled-transposes-differ", "tiled transposes with different shapes",
    "{first} and {second} hold tiled transposes of different shapes ({first_hero} vs {second_hero})",
    False, {"transpose", "multi-output", "legality"},
    """Two tiled transposes of different shapes cannot share a kernel.

    What it checks: both heroes are tiled transposes and their (normalised) dimensions or
    permutations differ (2026: or their bit widths).
    Why XLA does this: the transpose emitter uses one shared-memory tiling for the whole kernel.
    Example:
        t1 = f32[32,16,18] transpose(x), dimensions={2,1,0}
        t2 = f32[32,18,16] transpose(x), dimensions={0,2,1}
    Relaxing: not possible.
    """)
_register_hero_rule(
    "GF-NESTED-TRANSPOSE", "nested-transpose-with-unnested-hero",
    "multi-output fusion of a nested transpose with an unnested hero op",
    "{first} and {second}: a transpose the loop emitter handles ({first_hero} / {second_hero}) next to a tiled "
    "hero", True, {"transpose", "multi-output"},
    """A loop-emitted transpose would join a tiled reduction or transpose (2026 XLA).

    What it checks: one hero is a tiled transpose or reduction and the other a transpose the
    tiled emitter does not handle.  Only the 2026 XLA (priority pipeline) has this check.
    Why XLA does this: reading the nested transpose inside a tiled kernel is uncoalesced; XLA
    added the rule as a performance fix.
    Example:
        t = f32[4,8] transpose(f32[8,4] x), dimensions={1,0}
        r = f32[64] reduce(f32[64,1024] y, zero), dimensions={1}
    Relaxing: a performance trade: the kernel reads the small transpose uncoalesced.
    """, pipelines=("priority",))
_register_hero_rule(
    "GF-TRANSPOSE-AND-REDUCTION", "transpose-and-reduction", "MOF-fusion of a transpose and a reduction",
    "{first} and {second}: a tiled transpose and a tiled reduction ({first_hero} / {second_hero}) cannot share "
    "a kernel", False, {"transpose", "reduction", "multi-output", "legality"},
    """A tiled transpose and a tiled reduction cannot share a kernel.

    What it checks: one hero is a tiled transpose and the other a contiguous reduction.  (2026
    XLA spells the reason "multi-output fusion of a transpose and a reduction".)
    Why XLA does this: the two emitters tile the iteration space differently; there is no
    emitter for both.
    Example:
        t = f32[64,128] transpose(x), dimensions={1,0}
        r = f32[128] reduce(x, zero), dimensions={0}
    Relaxing: not possible.
    """, also=("multi-output fusion of a transpose and a reduction",))


@rule(id="GF-TRANSPOSE-WOULD-UNTILE", name="transpose-would-untile", passes=_PASSES, pipelines=_PIPELINES,
      tags={"transpose", "multi-output", "legality"}, relaxable=False,
      xla=_ref("FusionHeroesAreCompatible", "tiled transpose would become untiled"),
      message="merging {first} and {second} would put non-elementwise work between the tiled transpose "
              "{first_hero} and the kernel's output")
def transpose_would_untile(c: Candidate):
    """Merging would leave a tiled transpose no longer the kernel's hero.

    What it checks: one fusion holds a tiled transpose and the other reads it; in the reader,
    the parameter for the transposing fusion must have one user and reach the root only through
    single-operand elementwise ops.
    Why XLA does this: otherwise the merged kernel could not be emitted as a tiled transpose.
    Example:
        f1 = f32[64,128] fusion(x), kind=kInput, calls=transpose
        ROOT f2 = f32[128] fusion(f1), kind=kInput, calls=reduce_over_f1
    Relaxing: not possible.
    """
    return _hero_rule("tiled transpose would become untiled")(c)


@rule(id="GF-DIFFERENT-LOOP-SHAPES", name="different-loop-shapes", passes=_PASSES, pipelines=_PIPELINES,
      tags={"multi-output", "shape", "legality"}, relaxable=False,
      xla=_ref("ShapesCompatibleForMultiOutputFusion", "different loop shapes"),
      message="{first} iterates over {first_shape} and {second} over {second_shape}; one kernel has one loop")
def different_loop_shapes(c: Candidate):
    """Two outputs of one kernel must share its parallel loop's shape.

    What it checks: the loop shapes (a reduction's or tiled transpose's input shape, else the
    output shape) of both heroes are equal ignoring element type, or one is a bitcast
    reshape/transpose of the other.
    Why XLA does this: a multi-output fusion runs one parallel loop for all its outputs.
    Example:
        a = f32[8,16] negate(x)
        b = f32[16] negate(y)            # siblings of different shapes
    Relaxing: not possible.
    """
    a, b = _pair(c)
    cfg = _cfg(c)
    ha, hb = real_hero(a, cfg), real_hero(b, cfg)
    l1, l2 = loop_shape(ha, cfg), loop_shape(hb, cfg)
    if equal_ignoring_element_type(l1, l2):
        return None
    if not l1.is_tuple and not l2.is_tuple and is_reshape_or_transpose_bitcast(l1, l2, ignore_element_type=True):
        return None
    return objection(first=a.name, second=b.name, first_shape=l1.to_text(), second_shape=l2.to_text())


#: FusionHeroesAreCompatible, in XLA's order.
HERO_RULES = ("GF-TILED-REDUCTIONS-DIFFER", "GF-TILED-TRANSPOSES-DIFFER", "GF-NESTED-TRANSPOSE",
              "GF-TRANSPOSE-AND-REDUCTION", "GF-TRANSPOSE-WOULD-UNTILE")
#: ShapesCompatibleForMultiOutputFusion = heroes, then loop shapes.
SHAPE_RULES = HERO_RULES + ("GF-DIFFERENT-LOOP-SHAPES",)
