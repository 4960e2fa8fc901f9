"""GpuInstructionFusion's own rules (xla/service/gpu/transforms/instruction_fusion.cc at XLA
76da7301): the GPU checks of ShouldFuse around the generic InstructionFusion ones.

`GPU_SHOULD_FUSE` (end of file) lists every rule GpuInstructionFusion::ShouldFuse asks, in
XLA's order (docs/xla/legacy-gpu-pipeline.md §2.5): the producer is a fusion, the consumer is
a custom fusion, expensive producer + reusing consumer, read coalescing, the IsProducerConsumer
Fusible checks (rules/gpu_fusible.py), heavy computation, the generic root / duplication /
in-place checks (rules/instruction_fusion.py), the budget, and code duplication.

A concatenate producer gets its own duplication rules (same XLA reason strings, tag `concat`),
so that `--relax concat` lifts exactly the refusals the paper changed in XLA: a concatenate
with several users not duplicated into them.  hlofuse differs from XLA only in naming the
concatenate case separately; the decisions are XLA's.

Rules read the driver's state from a `FusionCandidate`'s `run` (passes/instruction_fusion.FusionRun).
"""

from __future__ import annotations

from ..gpu import gpu_config
from ..gpu.fusible import is_input_fusible_reduction
from ..gpu.heavy import creates_heavy_computation
from ..gpu.properties import is_custom_fusion, is_expensive_gpu
from ..gpu.transposes import is_physically_transposing
from . import XLA_COMMITS, Candidate, XlaRef, objection, rule
from .instruction_facts import is_always_duplicable, updates_in_place

_FILE = "xla/service/gpu/transforms/instruction_fusion.cc"
_P = XLA_COMMITS["legacy"]
_PASSES = ("fusion",)
_PIPELINES = ("legacy",)


def _ref(function: str, message: str | None) -> XlaRef:
    return XlaRef(_FILE, function, message, _P)


@rule(id="IF-GPU-PRODUCER-IS-FUSION", name="gpu-producer-is-fusion", passes=_PASSES, pipelines=_PIPELINES,
      tags={"structure", "legality"}, relaxable=False,
      xla=_ref("GpuInstructionFusion::ShouldFuseInexpensiveChecks", "the producer is a fusion"),
      message="{producer} is already a fusion; merging fusions is the fusion merger's job")
def producer_is_fusion(c: Candidate):
    """Instruction fusion never fuses a fusion into its consumer.

    What it checks: the producer is a `fusion` instruction.
    Why XLA does this: XLA's comment: output fusions are not supported on GPU; merging a
    producer fusion into its users is what FusionMerger does, with its own checks.
    Example:
        f = f32[8] fusion(x), kind=kLoop, calls=g
        ROOT n = f32[8] negate(f)
    Relaxing: not possible here; see the fusion merger's rules.
    """
    if c.producer.opcode != "fusion":
        return None
    return objection(producer=c.producer.name)


@rule(id="IF-GPU-CUSTOM-FUSION-CONSUMER", name="gpu-custom-fusion-consumer", passes=_PASSES,
      pipelines=_PIPELINES, tags={"custom-call", "legality"}, relaxable=False,
      xla=_ref("GpuInstructionFusion::ShouldFuseInexpensiveChecks", "the consumer is a custom fusion"),
      message="{consumer} is a custom (library) fusion; nothing is fused into it")
def custom_fusion_consumer(c: Candidate):
    """Nothing is fused into a custom (library) fusion.

    What it checks: the consumer is a fusion of kind kCustom (cuBLAS/cuDNN/Triton patterns).
    Why XLA does this: custom fusions match fixed library patterns; extra instructions would
    break the match.
    Example:
        a = f32[64,64] add(x, y)
        ROOT d = f32[64,64] fusion(a, w), kind=kCustom, calls=gemm
    Relaxing: not possible.
    """
    if not is_custom_fusion(c.consumer):
        return None
    return objection(consumer=c.consumer.name)


@rule(id="IF-GPU-EXPENSIVE-REUSE", name="gpu-expensive-producer-reused", passes=_PASSES, pipelines=_PIPELINES,
      tags={"expensive"}, relaxable=True,
      xla=_ref("GpuInstructionFusion::ShouldFuseInexpensiveChecks",
               "the producer is expensive, and the consumer reuses inputs"),
      message="{producer} ({opcode}) is expensive and {consumer} reads each of its elements several times")
def expensive_reuse(c: Candidate):
    """An expensive producer is not fused into a consumer that reads its elements repeatedly.

    What it checks: the producer is expensive on GPU (transcendentals except f32/f16 exp,
    divide, sqrt, rsqrt; integer divides; reductions, dots, gathers...) and the consumer reuses
    the operand's elements (a broadcast, a reduce-window, a dot, a pad's padding value...,
    judged by the pass's reuse cache, as XLA's).
    Why XLA does this: a fused producer is recomputed for every element the consumer reads; an
    expensive one read N times costs N times.
    Example:
        l = f32[1024] log(x)
        ROOT b = f32[1024,1024] broadcast(l), dimensions={0}
    Relaxing: a performance trade: the producer is recomputed per repeated read.
    """
    run = c.run
    if not is_expensive_gpu(c.producer):
        return None
    if not run.reuses_operand_elements(c.consumer, c.operand_index):
        return None
    return objection(producer=c.producer.name, opcode=c.producer.opcode, consumer=c.consumer.name)


@rule(id="IF-GPU-READ-COALESCING", name="gpu-breaks-read-coalescing", passes=_PASSES, pipelines=_PIPELINES,
      tags={"transpose", "layout", "reduction"}, relaxable=True,
      xla=_ref("GpuInstructionFusion::ShouldFuseInexpensiveChecks",
               "fusing the producer would break read coalescing"),
      message="{producer} transposes data in memory ({opcode}) and {consumer} is a reduction; fused, the "
              "reduction would read uncoalesced")
def read_coalescing(c: Candidate):
    """A physically transposing producer is not fused into a reduction.

    What it checks: the consumer is an input-fusible reduction and the producer is a copy or a
    non-bitcast transpose (or a fusion holding one).
    Why XLA does this: the reduction emitter's reads are laid out for its own input layout;
    reading through a transpose makes them strided.
    Example:
        t = f32[64,32]{0,1} copy(f32[64,32]{1,0} x)
        ROOT r = f32[64] reduce(t, zero), dimensions={1}, to_apply=add
    Relaxing: a performance trade: the fused reduction reads uncoalesced memory.
    """
    # (the cheaper question first: most producers transpose nothing)
    if not is_physically_transposing(c.producer) or not is_input_fusible_reduction(c.consumer, gpu_config(c.ctx)):
        return None
    return objection(producer=c.producer.name, opcode=c.producer.opcode, consumer=c.consumer.name)


@rule(id="IF-GPU-HEAVY-COMPUTATION", name="gpu-heavy-computation", passes=_PASSES, pipelines=_PIPELINES,
      tags={"expensive", "reduction"}, relaxable=True,
      xla=_ref("GpuInstructionFusion::ShouldFuseInexpensiveChecks",
               "the fusion would create a heavy computation"),
      message="{heavy} uses more than 10 inputs per output and {reader} reads its result several times per "
              "element; fused, it would be recomputed each time")
def heavy_computation(c: Candidate):
    """A heavy producer is not fused into a consumer that reads it repeatedly.

    What it checks: CreatesHeavyComputation: the producer (or something in it) is an elemental
    reduce or a reduce-window using more than 10 inputs per output, and the consumer (or an
    instruction of it reached from the producer's parameter) is a broadcast or gather with
    more outputs than inputs, or a reduce-window with overlapping windows.
    Why XLA does this: each repeated read would redo the whole reduction.
    Example:
        w = f32[504,504] reduce-window(x, zero), window={size=9x9}, to_apply=add
        ROOT g = f32[512,512] gather(w, idx), ...
    Relaxing: a performance trade: the reduction is recomputed per repeated read.
    """
    found = creates_heavy_computation(c.producer, c.consumer, gpu_config(c.ctx))
    if found is None:
        return None
    heavy, reader = found
    return objection(producer=c.producer.name, consumer=c.consumer.name, heavy=heavy.name, reader=reader.name)


# ------------------------------------------------------------------------------------------
# Duplication of a concatenate (the paper's rule) and code duplication
# ------------------------------------------------------------------------------------------


def _concat_users(c: Candidate) -> tuple[bool, list[str]]:
    p = c.producer
    others = [u.name for u in p.users if u is not c.consumer]
    return bool(others), others


@rule(id="IF-GPU-CONCAT-NOT-DUPLICATED", name="concat-not-duplicated", passes=_PASSES, pipelines=_PIPELINES,
      tags={"duplication"}, relaxable=True,
      xla=XlaRef("xla/service/instruction_fusion.cc", "InstructionFusion::ShouldFuse",
                 "fusion pass cannot duplicate", _P),
      message="{producer} is a concatenate with {users} users ({others} besides {consumer}); this fusion pass "
              "does not duplicate it into its users")
def concat_not_duplicated(c: Candidate):
    """A concatenate with several users is not duplicated into them (first fusion pass).

    What it checks: the pass runs without duplication (XLA:GPU's first `fusion` pass) and the
    producer is a concatenate that also has users other than this consumer.  This is XLA's
    generic no-duplication refusal, named separately for concatenates.
    Why XLA does this: the first pass forms fusions that need no copies; a concatenate with
    several users stays a kernel boundary, as in the paper's cart-pole simulator.
    Example:
        c = f32[2048,4] concatenate(x, xd, t, td), dimensions={1}
        a = f32[2048,4] abs(c)
        ROOT s = f32[2048,4] select(done, reset, c)
    Relaxing: a performance trade: the concatenate is computed in every kernel that reads it.
    `--relax concat` does not lift this rule: the paper changed the duplicating pass
    (concat-code-duplication) and the merge of a concatenate kernel into its users
    (merger-concat-slower-if-fused); relaxing this first-pass refusal too splits the shared
    dynamics into more kernels.  Relax it by id to explore that.
    """
    run = c.run
    if run.may_duplicate or c.producer.opcode != "concatenate":
        return None
    duplicated, others = _concat_users(c)
    if not duplicated:
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name, users=len(c.producer.users),
                     others=", ".join(others[:4]))


def _evaluation(c: Candidate):
    run = c.run
    return run.indexing_evaluation(c.consumer)


@rule(id="IF-GPU-CONCAT-DUPLICATION", name="concat-code-duplication", passes=_PASSES, pipelines=_PIPELINES,
      tags={"concat", "duplication", "compile-time"}, relaxable=True,
      xla=_ref("GpuInstructionFusion::ShouldFuse", "the fusion would result in an overly large code duplication"),
      message="{producer} is a concatenate read {emitted} times inside {consumer} and by {user_count} users in "
              "all; XLA emits a concatenate's code only once per kernel")
def concat_duplication(c: Candidate):
    """A concatenate is not fused where its code would be emitted more than once.

    What it checks: the consumer is a fusion and the producer is a concatenate whose
    elemental code would be generated more than once (FusionNodeIndexingEvaluation counts more
    than one distinct index for it) or that has several (real) users:
    CodeDuplicationTooHigh's rule for ops that invalidate the emitter's cache.  This is the
    rule the paper (Snider & Liang) relaxed in XLA to fuse its cart-pole kernels.
    Why XLA does this: the elemental emitter cannot cache a concatenate's value; each use
    regenerates the selection among its operands, and XLA fears the code growth.
    Example:
        c = f32[2048,4] concatenate(x, xd, t, td), dimensions={1}
        ROOT f = f32[2048,4] fusion(c, d), kind=kLoop, calls=reads_c_twice
    Relaxing: a compile-time and performance trade: the concatenate is recomputed for each
    use; XLA still refuses if it would be emitted more than 15 times.
    """
    p = c.producer
    if c.consumer.opcode != "fusion" or p.opcode != "concatenate":
        return None
    from .instruction_fusion import real_user_count

    evaluation = _evaluation(c)
    emitted = evaluation.emitted(p)
    users = real_user_count(p)
    if emitted > 1 or users > 1:
        return objection(producer=p.name, consumer=c.consumer.name, emitted=emitted, user_count=users)
    return None


@rule(id="IF-GPU-CODE-DUPLICATION", name="code-duplication-too-high", passes=_PASSES, pipelines=_PIPELINES,
      tags={"duplication", "compile-time"}, relaxable=True,
      xla=_ref("GpuInstructionFusion::ShouldFuse", "the fusion would result in an overly large code duplication"),
      message="fusing {producer} into {consumer} would emit its code {emitted} times{why}")
def code_duplication(c: Candidate):
    """Fusing the producer would make the emitter repeat its code too often.

    What it checks: the consumer is a fusion and, by XLA's FusionNodeIndexingEvaluation, the
    producer would be emitted for more than 15 distinct indices, or it is an op whose code the
    emitter cannot cache (dot, dynamic-update-slice, pad, reduce, reduce-window; concatenates
    have their own rule) and it would be emitted more than once or has several users.
    Broadcasts always pass.
    Why XLA does this: the elemental emitter regenerates a producer for every distinct index it
    is read with; chains of slices and reshapes multiply that, and compile time explodes.
    Example:
        y = f32[64] multiply(x, two)
        ROOT s = f32[48] fusion(y), kind=kLoop, calls=sum_of_16_slices_of_y
    Relaxing: a compile-time trade: the kernel is larger and slower to compile, not wrong.
    """
    p = c.producer
    if c.consumer.opcode != "fusion" or p.opcode == "broadcast":
        return None
    from .instruction_fusion import ALLOWED_CODE_DUPLICATION, CACHE_INVALIDATING_OPCODES, real_user_count

    emitted = _evaluation(c).emitted(p)
    if emitted > ALLOWED_CODE_DUPLICATION:
        return objection(producer=p.name, consumer=c.consumer.name, emitted=emitted,
                         why=f" (limit {ALLOWED_CODE_DUPLICATION})")
    if p.opcode in CACHE_INVALIDATING_OPCODES and p.opcode != "concatenate":
        users = real_user_count(p)
        if emitted > 1 or users > 1:
            return objection(producer=p.name, consumer=c.consumer.name, emitted=emitted,
                             why=f"; a {p.opcode} cannot reuse its emitted code, so once is the limit "
                                 f"({users} users)")
    return None


def should_fuse_rules(producer, consumer=None) -> tuple[str, ...]:
    """GpuInstructionFusion::ShouldFuse, in XLA's order, for this producer (a concatenate's
    duplication refusals are reported by the concatenate rules).  Given a consumer, the rules
    that cannot object to the pair are left out (`_CANNOT_OBJECT`): most pairs are elementwise
    ops and fusions, and asking the reduction, scatter, constant and in-place rules of every
    one of them is most of the time spent asking.  Leaving out a rule that answers None changes
    no decision: `evaluate` skips a None answer, relaxed or not."""
    concat = producer.opcode == "concatenate" and not is_always_duplicable(producer)
    key: tuple  # (concatenate duplicated, in place, producer class, consumer class)
    if consumer is None:
        key = (concat, True, None, None)
    else:
        key = (concat, updates_in_place(consumer), _PRODUCER_CLASS.get(producer.opcode, "other"),
               _CONSUMER_CLASS.get(consumer.opcode, "other"))
    found = _SHOULD_FUSE.get(key)
    if found is None:
        found = _SHOULD_FUSE[key] = _should_fuse_rules(*key)
    return found


#: The rule lists of should_fuse_rules (asked for every candidate pair; built once per key).
_SHOULD_FUSE: dict[tuple, tuple[str, ...]] = {}

#: Opcodes of a producer or a consumer that some rule of the list looks for; any other opcode
#: is "other" (the classes of `_CANNOT_OBJECT`).
_PRODUCER_CLASS = {"fusion": "fusion", "reduce": "reduce", "scatter": "scatter", "constant": "constant"}
_CONSUMER_CLASS = {"fusion": "fusion", "reduce": "reduce", "scatter": "scatter"}

#: Rule id → (producer classes, consumer classes) outside which the rule always answers None
#: (None: any class).  Read off each rule's first test:
#:   reductions: is_input_fusible_reduction(producer) needs a reduce or a fusion;
#:   GF-SCATTER-PRODUCER: is_input_fusible_scatter(producer), a scatter or a fusion;
#:   GF-SCATTER-IN-PLACE-OPERAND/-SHARED-OPERAND: the consumer is a scatter or a fusion;
#:   GF-PRODUCER-MULTI-OUTPUT: a fusion producer; GF-NON-SCALAR-CONSTANT: a constant producer;
#:   IF-GPU-CUSTOM-FUSION-CONSUMER, IF-GPU-CONCAT-DUPLICATION, IF-GPU-CODE-DUPLICATION: a fusion
#:   consumer; IF-GPU-READ-COALESCING: is_input_fusible_reduction(consumer).
_CANNOT_OBJECT = {
    "GF-REDUCTION-EPILOGUE-DISABLED": ({"reduce", "fusion"}, None),
    "GF-REDUCTION-NOT-RACE-FREE": ({"reduce", "fusion"}, None),
    "GF-REDUCTION-EPILOGUE-NOT-ELEMENTWISE": ({"reduce", "fusion"}, None),
    "GF-REDUCTION-MULTIPLE-USERS": ({"reduce", "fusion"}, None),
    "GF-SCATTER-PRODUCER": ({"scatter", "fusion"}, None),
    "GF-SCATTER-IN-PLACE-OPERAND": (None, {"scatter", "fusion"}),
    "GF-SCATTER-SHARED-OPERAND": (None, {"scatter", "fusion"}),
    "GF-PRODUCER-MULTI-OUTPUT": ({"fusion"}, None),
    "GF-NON-SCALAR-CONSTANT": ({"constant"}, None),
    "IF-GPU-CUSTOM-FUSION-CONSUMER": (None, {"fusion"}),
    "IF-GPU-CONCAT-DUPLICATION": (None, {"fusion"}),
    "IF-GPU-CODE-DUPLICATION": (None, {"fusion"}),
    "IF-GPU-READ-COALESCING": (None, {"reduce", "fusion"}),
}


def _should_fuse_rules(concat: bool, in_place: bool = True, producer: str | None = None,
                       consumer: str | None = None) -> tuple[str, ...]:
    from .gpu_fusible import BUDGET_RULES, producer_consumer_rules
    from .instruction_fusion import IN_PLACE_RULES

    head = ("IF-GPU-PRODUCER-IS-FUSION", "IF-GPU-CUSTOM-FUSION-CONSUMER", "IF-GPU-EXPENSIVE-REUSE",
            "IF-GPU-READ-COALESCING") + producer_consumer_rules() + ("IF-GPU-HEAVY-COMPUTATION",)
    if concat:
        duplication = ("IF-ROOT-PRODUCER", "IF-EXPENSIVE-DUPLICATION", "IF-GPU-CONCAT-NOT-DUPLICATED")
    else:
        duplication = ("IF-ROOT-PRODUCER", "IF-EXPENSIVE-DUPLICATION", "IF-CANNOT-DUPLICATE")
    rules = head + duplication + tuple(IN_PLACE_RULES) + BUDGET_RULES + (
        "IF-GPU-CONCAT-DUPLICATION", "IF-GPU-CODE-DUPLICATION")
    if not in_place:  # (asked twice, as XLA does: IsProducerConsumerFusible and ShouldFuse)
        rules = tuple(r for r in rules if r not in IN_PLACE_RULES)
    if producer is not None and producer != "fusion":  # (a fusion producer: the first rule decides)
        rules = tuple(r for r in rules if _may_object(r, producer, consumer))
    return rules


def _may_object(rule_id: str, producer: str, consumer: str | None) -> bool:
    producers, consumers = _CANNOT_OBJECT.get(rule_id, (None, None))
    return (producers is None or producer in producers) and (consumers is None or consumer in consumers)
