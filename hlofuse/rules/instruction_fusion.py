"""Rules of XLA's generic InstructionFusion pass, shared by every backend that subclasses it
(XLA:CPU's CpuInstructionFusion, the legacy XLA:GPU GpuInstructionFusion).

The registered rules of `InstructionFusion::RunImpl` and `InstructionFusion::ShouldFuse`: the
do-not-duplicate set, the root producer, duplication of expensive producers, and the in-place
safety checks of `ShouldFuseInPlaceOp` (one rule per XLA reason string).  The HLO facts they
read (`is_fusible`, `is_elementwise`, element reuse, in-place pairs, FusionNodeIndexingEvaluation)
live in rules/instruction_facts.py and are re-exported here.

Rules read the pass state from a `FusionCandidate` (rules/candidates.py): `operand_index`, the
consumer's operand slot being considered, and `run`, the `passes.instruction_fusion.FusionRun`
(policy, caches, sets).
Source: docs/xla/cpu-fusion.md §2 (X0102) and docs/xla/legacy-gpu-pipeline.md §2 (P).
"""

from __future__ import annotations

from itertools import islice

from . import XLA_COMMITS, Candidate, XlaRef, objection, rule
from .instruction_facts import (  # noqa: F401 - re-exported: other rules import them from here
    ALLOWED_CODE_DUPLICATION, CACHE_INVALIDATING_OPCODES, ELEMENTWISE_OPCODES, EMBEDDED_CALLERS,
    FusionNodeIndexingEvaluation, effectively_at_most_unary, follow_tuple_indirection,
    fusion_would_duplicate, has_side_effect, in_place_pairs, in_place_refusal, is_always_duplicable,
    is_elementwise, is_fusible, not_fusible_reason, operand_element_use, real_user_count,
    reuses_operand_elements, total_elements, unique_operands,
)

_FILE = "xla/service/instruction_fusion.cc"
_X0102 = XLA_COMMITS["cpu"]
_PIPELINES = ("cpu", "legacy")

# ------------------------------------------------------------------------------------------
# Rules
# ------------------------------------------------------------------------------------------


def _run(c: Candidate):
    return c.run


@rule(id="IF-PRODUCER-NOT-FUSIBLE", name="producer-not-fusible", passes=("fusion",), pipelines=_PIPELINES,
      tags={"structure", "parameter", "control-flow"}, relaxable=False,
      xla=XlaRef(_FILE, "InstructionFusion::RunImpl (HloInstruction::IsFusible)", None, _X0102),
      message="{producer} cannot be fused into anything: {why}")
def producer_not_fusible(c: Candidate):
    """The producer is not fusible at all (a parameter, a loop, a side effect).

    What it checks: `HloInstruction::IsFusible` of the producer: parameters, `while`,
    `conditional`, `call` and `domain` never are; `rng` only with at most one user; other
    instructions unless they have side effects (send/recv, infeed/outfeed, side-effecting
    custom calls, ...).
    Why XLA does this: a parameter is a buffer handed in, control flow runs other computations,
    and a side effect must happen exactly once; none of these can be inlined into a kernel.
    XLA skips such producers silently (no reason string), hlofuse names the cause.
    Example:
        p = f32[8] parameter(0)
        ROOT e = f32[8] exponential(p)    # p stays a kernel input
    Relaxing: not possible; the result would not be a valid program.
    """
    if is_fusible(c.producer):
        return None
    return objection(producer=c.producer.name, why=not_fusible_reason(c.producer))


@rule(id="IF-CONSUMER-NOT-FUSIBLE", name="consumer-not-fusible", passes=("fusion",), pipelines=_PIPELINES,
      tags={"structure", "control-flow"}, relaxable=False,
      xla=XlaRef(_FILE, "InstructionFusion::RunImpl (HloInstruction::IsFusible)", None, _X0102),
      message="nothing can be fused into {consumer}: {why}")
def consumer_not_fusible(c: Candidate):
    """The consumer is not fusible at all (a loop, a call, a side effect).

    What it checks: `HloInstruction::IsFusible` of the consumer (a `fusion` consumer always
    passes): `while`, `conditional`, `call`, `domain` and side-effecting instructions never take
    producers in.
    Why XLA does this: these instructions are not computations a kernel can contain; their
    operands are buffers they receive.  XLA skips them silently (no reason string).
    Example:
        t = (s32[], f32[8]) tuple(i, x)
        ROOT w = (s32[], f32[8]) while(t), condition=cond, body=body
    Relaxing: not possible.
    """
    if c.consumer.opcode == "fusion" or is_fusible(c.consumer):
        return None
    return objection(consumer=c.consumer.name, why=not_fusible_reason(c.consumer))


@rule(id="IF-DO-NOT-DUPLICATE", name="operand-not-duplicable", passes=("fusion",), pipelines=_PIPELINES,
      tags={"duplication", "memory-traffic"}, relaxable=True,
      xla=XlaRef(_FILE, "InstructionFusion::RunImpl (ComputeGloballyUnfusible)", "operand can not be duplicated",
                 _X0102),
      message="{producer} is kept out of {consumer} and every other fusion: it reads more than it writes "
              "({operand_elements} input elements for {output_elements} output elements) and cannot be fused on "
              "every path to its users ({blocker})")
def do_not_duplicate(c: Candidate):
    """The producer is in the do-not-duplicate set: it cannot be fused into all of its users.

    What it checks: before fusing a computation, XLA (with `may_duplicate`) walks it from the
    back and puts a producer into the set unless (1) it is effectively unary (at most one
    operand as large as its output; broadcasts, iotas and scalar constants do not count), or
    (2) its distinct operands hold no more elements than its output, or (3) it is fusible and
    `ShouldFuse` accepts it into every user along every path.  Producers in the set are refused
    before any other rule is asked.
    Why XLA does this: fusing a producer that reads more than it writes into one user while it
    stays materialised for another reads its large inputs twice: more memory traffic, not less.
    Example:
        z = f32[8,16] add(a, b)
        s = f32[8,16] sort(z), ...        # z cannot be fused into the sort
        ROOT t = (f32[8,16], f32[8,16]) tuple(s, tanh(z))   # so z is not fused into tanh either
    Relaxing: a performance trade: the producer is duplicated into the users it can fuse into
    and still computed once for the others.
    """
    run = _run(c)
    if c.producer.uid not in run.do_not_duplicate:
        return None
    info = run.do_not_duplicate[c.producer.uid]
    return objection(producer=c.producer.name, consumer=c.consumer.name, **info)


@rule(id="IF-ROOT-PRODUCER", name="root-producer", passes=("fusion",), pipelines=_PIPELINES,
      tags={"structure", "root"}, relaxable=False,
      xla=XlaRef(_FILE, "InstructionFusion::ShouldFuse", "not fusing into the output of the root instruction", _X0102),
      message="{producer} is the root of {computation}: its value is the computation's result")
def root_producer(c: Candidate):
    """The producer is the root of its computation.

    What it checks: the producer is its computation's ROOT (it still has users, e.g. inside a
    loop body whose root feeds a `get-tuple-element`).
    Why XLA does this: the root's buffer is the computation's output; fusing it into a user would
    leave the computation without its result.
    Example:
        ROOT r = f32[8] add(a, b)
        n = f32[8] negate(r)              # r is not fused into n
    Relaxing: not possible.
    """
    p = c.producer
    if p.graph is not None and p.graph.root is p:
        return objection(producer=p.name, computation=p.graph.name)
    return None


def _duplication_facts(c: Candidate, run) -> dict | None:
    p = c.producer
    if not fusion_would_duplicate(p, c.consumer) or is_always_duplicable(p):
        return None
    # five names at most: a scalar constant may have thousands of users
    others = list(islice((u.name for u in p.users if u is not c.consumer), 5))
    return {"producer": p.name, "consumer": c.consumer.name, "users": len(p.users),
            "others": ", ".join(others[:4]) + (", ..." if len(others) > 4 else "")}


@rule(id="IF-EXPENSIVE-DUPLICATION", name="expensive-duplication", passes=("fusion",), pipelines=_PIPELINES,
      tags={"duplication", "expensive"}, relaxable=True,
      xla=XlaRef(_FILE, "InstructionFusion::ShouldFuse", "expensive producer would be duplicated", _X0102),
      message="{producer} is expensive and has {users} users ({others} besides {consumer}); fusing it would "
              "compute it again in every kernel that uses it")
def expensive_duplication(c: Candidate):
    """An expensive producer with other users would be computed twice.

    What it checks: with `may_duplicate`, the producer has a user other than this consumer, it
    is expensive (the backend's `IsExpensive`: transcendentals, divides, reductions, gathers,
    ...), and it is not always duplicable (a widening `convert` or a `broadcast`).
    Why XLA does this: fusion copies the producer into the consumer's kernel and keeps the
    original for the other users; for an expensive op that repeats real work.
    Example:
        e = f32[8] exponential(x)
        a = f32[8] add(e, one)
        ROOT m = f32[8] multiply(e, two)  # e is not fused into a or m
    Relaxing: a performance trade: the expensive op runs once per kernel that uses it instead of
    once, but its result is not written to and read back from memory.
    """
    run = _run(c)
    if not run.may_duplicate or not run.policy.is_expensive(c.producer):
        return None
    return _duplication_facts(c, run)


@rule(id="IF-CANNOT-DUPLICATE", name="no-duplication", passes=("fusion",), pipelines=_PIPELINES,
      tags={"duplication"}, relaxable=True,
      xla=XlaRef(_FILE, "InstructionFusion::ShouldFuse", "fusion pass cannot duplicate", _X0102),
      message="{producer} has {users} users ({others} besides {consumer}) and this fusion pass runs without "
              "duplication")
def cannot_duplicate(c: Candidate):
    """The pass runs without duplication and the producer has other users.

    What it checks: the pass instance has `may_duplicate=false` (XLA:GPU's first
    `fusion` run; XLA:CPU with its opt-in multi-output fusion), the producer has a user other than
    this consumer, and it is not a widening `convert` or a `broadcast`.
    Why XLA does this: a first pass without duplication forms the fusions that need no copies;
    a later pass (or multi-output fusion) handles shared producers.
    Example:
        a = f32[8] add(x, y)
        b = f32[8] negate(a)
        ROOT c = f32[8] multiply(a, b)    # a is not duplicated into b
    Relaxing: a performance trade: the producer is computed in every kernel that uses it.
    """
    run = _run(c)
    if run.may_duplicate:
        return None
    return _duplication_facts(c, run)


def _in_place(c: Candidate) -> tuple[str, dict] | None:
    """The in-place analysis of the pair, once for all the IF-INPLACE rules that read it."""
    memo = c.memo
    if memo is None:
        memo = c.memo = {}
    elif "in_place" in memo:
        return memo["in_place"]
    found = memo["in_place"] = in_place_refusal(c.producer, c.consumer)
    return found


def _in_place_rule(rule_id: str, name: str, xla_message: str, message: str, summary_doc: str):
    def check(c: Candidate):
        found = _in_place(c)
        if found is None or found[0] != rule_id:
            return None
        return objection(producer=c.producer.name, consumer=c.consumer.name, **found[1])

    check.__doc__ = summary_doc
    check.__name__ = name.replace("-", "_")
    # ShouldFuseInPlaceOp is asked by every XLA fusion pass, priority fusion included
    rule(id=rule_id, name=name, passes=("fusion", "priority-fusion"), pipelines=_PIPELINES + ("priority",),
         tags={"in-place", "legality"},
         relaxable=False, xla=XlaRef(_FILE, "InstructionFusion::ShouldFuseInPlaceOp", xla_message, _X0102),
         message=message)(check)
    return check


_IN_PLACE_WHY = """Why XLA does this: the consumer writes its result into the buffer of one of its operands
    (dynamic-update-slice, scatter, aliased custom calls and fusions).  If a fused producer
    still reads that buffer while the consumer overwrites it, the kernel reads values it has
    already changed: a wrong result, not a slow one."""
_IN_PLACE_RELAX = "Relaxing: not possible; it protects correctness."

_in_place_rule(
    "IF-INPLACE-SHARED-BUFFER", "in-place-buffer-aliased",
    "The consumer is an in-place operation that has an additional operand that has the same value as the in-place buffer",
    "{consumer} updates {buffer} in place and also reads it through operand {other}",
    f"""The in-place consumer also reads its in-place buffer through another operand.

    What it checks: an in-place operand k of the consumer is the same instruction as another
    operand of the consumer.
    {_IN_PLACE_WHY}
    Example:
        ROOT d = f32[8] dynamic-update-slice(a, a_slice_of_a, i)   # with a also passed twice
    {_IN_PLACE_RELAX}
    """)
_in_place_rule(
    "IF-INPLACE-PRODUCER-NON-ELEMENTWISE", "in-place-producer-non-elementwise",
    "Producer fusion has multiple non-elementwise ops, bailing.",
    "{producer} reads {buffer}, which {consumer} updates in place, through several non-elementwise ops ({ops})",
    f"""A producer with several non-elementwise ops reads the consumer's in-place buffer.

    What it checks: the producer is (or reads) the in-place operand of the consumer and holds
    more than one instruction that is not elementwise, a bitcast or a parameter.
    {_IN_PLACE_WHY}
    Example:
        s = f32[4] slice(a), slice={{[0:4]}}
        r = f32[4] reverse(s), dimensions={{0}}
        ROOT d = f32[8] dynamic-update-slice(a, r, i)    # fusion {{s, r}} cannot go into d
    {_IN_PLACE_RELAX}
    """)
_in_place_rule(
    "IF-INPLACE-CONSUMER-CONFLICT", "in-place-consumer-conflict",
    "Non-elementwise ops in consumer lead to inplace conflict after fusion.",
    "inside {consumer}, a non-elementwise op besides the in-place update reads {buffer}, which {producer} feeds",
    f"""An elementwise producer of the in-place buffer would be read by other non-elementwise ops.

    What it checks: the producer is elementwise, the consumer is a fusion, and inside it the
    parameter bound to the producer reaches a non-elementwise instruction other than the
    in-place root.
    {_IN_PLACE_WHY}
    Example:
        ROOT f = f32[8] fusion(m, u), kind=kLoop, calls=dus_with_reverse   # m = multiply(a, b)
    {_IN_PLACE_RELAX}
    """)
_in_place_rule(
    "IF-INPLACE-MULTIPLE-DUS", "in-place-multiple-dus",
    "multiple dus ops, bailing.",
    "{consumer} holds {count} dynamic-update-slices updating buffers {producer} reads",
    f"""The consumer fusion holds several dynamic-update-slices.

    What it checks: the producer has one non-elementwise op and reads the in-place buffer, and
    the consumer contains more than one `dynamic-update-slice`.
    {_IN_PLACE_WHY}
    Example:
        ROOT f = (f32[8], f32[8]) fusion(a, s, i), kind=kLoop, calls=two_dus
    {_IN_PLACE_RELAX}
    """)
_in_place_rule(
    "IF-INPLACE-SLICE-SHAPE", "in-place-slice-shape",
    "Slice op has a different shape than the update shape of the dus op, bailing.",
    "{slice} ({slice_shape}) reads the buffer {consumer} updates, but the update is {update_shape}",
    f"""A slice of the in-place buffer does not have the shape of the update.

    What it checks: the producer's non-elementwise op is a `slice` of the buffer that the
    consumer's `dynamic-update-slice` updates, and its shape differs from the update's.
    {_IN_PLACE_WHY}
    Example:
        s = f32[2] slice(a), slice={{[0:2]}}
        ROOT d = f32[8] dynamic-update-slice(a, pad(s), i)
    {_IN_PLACE_RELAX}
    """)
_in_place_rule(
    "IF-INPLACE-SLICE-INDEX", "in-place-slice-index",
    "DUS and slice index mismatch",
    "{slice} and the dynamic-update-slice of {consumer} do not start at the same constant index (dimension {dimension})",
    f"""A slice of the in-place buffer is not at the update's (constant) position.

    What it checks: for every dimension the update's start index must be a constant equal to the
    slice's start, with stride 1; otherwise the slice may read elements already overwritten.
    {_IN_PLACE_WHY}
    Example:
        s = f32[4] slice(a), slice={{[2:6]}}
        ROOT d = f32[8] dynamic-update-slice(a, negate(s), zero)
    {_IN_PLACE_RELAX}
    """)
_in_place_rule(
    "IF-INPLACE-SLICE-SHARED", "in-place-slice-shared",
    "Fusing slice into DUS will also fuse another non-elementwise op with shared operand as DUS.",
    "fusing {slice} into {consumer} would let another non-elementwise op share the updated buffer",
    f"""Fusing the slice would make another non-elementwise op share the updated buffer.

    What it checks: the consumer fusion's parameter for the producer also reaches a
    non-elementwise instruction other than the dynamic-update-slice.
    {_IN_PLACE_WHY}
    Example:
        ROOT f = f32[8] fusion(s, a), kind=kLoop, calls=dus_and_reverse
    {_IN_PLACE_RELAX}
    """)
_in_place_rule(
    "IF-INPLACE-DS-SHAPE", "in-place-dynamic-slice-shape",
    "Dynamic slice op has a different shape than the update shape of the dus op, bailing.",
    "{slice} ({slice_shape}) reads the buffer {consumer} updates, but the update is {update_shape}",
    f"""A dynamic slice of the in-place buffer does not have the shape of the update.

    What it checks: the producer's non-elementwise op is a `dynamic-slice` of the updated
    buffer whose shape differs from the update's.
    {_IN_PLACE_WHY}
    Example:
        s = f32[2] dynamic-slice(a, i), dynamic_slice_sizes={{2}}
        ROOT d = f32[8] dynamic-update-slice(a, concatenate(s, s), i)
    {_IN_PLACE_RELAX}
    """)
_in_place_rule(
    "IF-INPLACE-DS-INDEX", "in-place-dynamic-slice-index",
    "DUS and DS index mismatch",
    "{slice} and the dynamic-update-slice of {consumer} use different start indices (dimension {dimension})",
    f"""A dynamic slice of the in-place buffer is not read at the update's position.

    What it checks: each start index of the dynamic-slice must equal the dynamic-update-slice's
    (the same constant or the same instruction).
    {_IN_PLACE_WHY}
    Example:
        s = f32[4] dynamic-slice(a, i), dynamic_slice_sizes={{4}}
        ROOT d = f32[8] dynamic-update-slice(a, negate(s), j)
    {_IN_PLACE_RELAX}
    """)
_in_place_rule(
    "IF-INPLACE-DS-SHARED", "in-place-dynamic-slice-shared",
    "Fusing DS into DUS will also fuse another non-elementwise op with shared operand as DUS.",
    "fusing {slice} into {consumer} would let another non-elementwise op share the updated buffer",
    f"""Fusing the dynamic slice would make another non-elementwise op share the updated buffer.

    What it checks: as in-place-slice-shared, for a `dynamic-slice` producer.
    {_IN_PLACE_WHY}
    Example:
        ROOT f = f32[8] fusion(s, a, i), kind=kLoop, calls=dus_and_reverse
    {_IN_PLACE_RELAX}
    """)
_in_place_rule(
    "IF-INPLACE-UNRECOGNIZED", "in-place-unrecognized",
    "unrecognized inplace update non-elementwise output pair",
    "{producer} reads the buffer {consumer} updates in place through a {op} ({name}), which XLA cannot prove safe",
    f"""The producer reads the in-place buffer through an op other than a slice.

    What it checks: the producer's single non-elementwise op is neither `slice` nor
    `dynamic-slice` while the consumer holds a dynamic-update-slice of the buffer it reads.
    {_IN_PLACE_WHY}
    Example:
        r = f32[8] reverse(a), dimensions={{0}}
        ROOT d = f32[8] dynamic-update-slice(a, slice(r), i)
    {_IN_PLACE_RELAX}
    """)

#: The in-place rules in XLA's evaluation order (they share one analysis).
IN_PLACE_RULES = (
    "IF-INPLACE-SHARED-BUFFER", "IF-INPLACE-PRODUCER-NON-ELEMENTWISE", "IF-INPLACE-CONSUMER-CONFLICT",
    "IF-INPLACE-MULTIPLE-DUS", "IF-INPLACE-SLICE-SHAPE", "IF-INPLACE-SLICE-INDEX", "IF-INPLACE-SLICE-SHARED",
    "IF-INPLACE-DS-SHAPE", "IF-INPLACE-DS-INDEX", "IF-INPLACE-DS-SHARED", "IF-INPLACE-UNRECOGNIZED",
)

#: InstructionFusion::ShouldFuse (the base every backend calls): root, duplication, in place.
GENERIC_SHOULD_FUSE = ("IF-ROOT-PRODUCER", "IF-EXPENSIVE-DUPLICATION", "IF-CANNOT-DUPLICATE") + IN_PLACE_RULES


def code_duplication_facts(c: Candidate) -> dict | None:
    """The shared check behind every backend's code-duplication rule (the consumer must be a
    fusion; `run.indexing_evaluation(fusion)` supplies the cached evaluation).  XLA:CPU
    asks only when the pass may duplicate; its rule checks that itself."""
    run = _run(c)
    if c.consumer.opcode != "fusion":
        return None
    evaluation = run.indexing_evaluation(c.consumer)
    if not evaluation.too_high(c.producer):
        return None
    emitted = evaluation.emitted(c.producer)
    extra = ""
    if c.producer.opcode in CACHE_INVALIDATING_OPCODES:
        extra = f"; a {c.producer.opcode} is re-emitted for every index, so once is the limit"
    return objection(producer=c.producer.name, consumer=c.consumer.name, emitted=emitted, extra=extra)
