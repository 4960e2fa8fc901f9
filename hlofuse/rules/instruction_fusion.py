"""Rules of XLA's generic InstructionFusion pass, shared by every backend that subclasses it
(XLA:CPU's CpuInstructionFusion, the legacy XLA:GPU GpuInstructionFusion).

Two parts:

1. HLO facts the generic pass reads (XLA's HloInstruction methods at the pinned commits):
   `is_fusible`, `is_elementwise`, `operand_element_use` / `reuses_operand_elements`,
   `in_place_pairs`, `effectively_at_most_unary`, `is_always_duplicable`, and the
   code-duplication model `FusionNodeIndexingEvaluation`.  Pure functions of the graph.
2. The registered rules of `InstructionFusion::RunImpl` and `InstructionFusion::ShouldFuse`:
   the do-not-duplicate set, the root producer, duplication of expensive producers, and the
   in-place safety checks of `ShouldFuseInPlaceOp` (one rule per XLA reason string).

Rules read the pass state through `candidate.extra`:
    extra["operand_index"]  the consumer's operand slot being considered
    extra["run"]            the `passes.instruction_fusion.FusionRun` (policy, caches, sets)
Source: docs/xla/cpu-fusion.md §2 (X0102) and docs/xla/legacy-gpu-pipeline.md §2 (P).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .. import attributes, ir
from . import XLA_COMMITS, Candidate, XlaRef, objection, rule

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node

_FILE = "xla/service/instruction_fusion.cc"
_X0102 = XLA_COMMITS["cpu"]
_PIPELINES = ("cpu", "legacy")

# ------------------------------------------------------------------------------------------
# 1. HLO facts
# ------------------------------------------------------------------------------------------

#: HloInstruction::IsOpElementwise (X0102).
ELEMENTWISE_OPCODES = frozenset({
    # unary
    "abs", "acos", "acosh", "asin", "asinh", "atanh", "round-nearest-afz", "round-nearest-even",
    "ceil", "count-leading-zeros", "convert", "bitcast-convert", "copy", "cosine", "cosh", "erf",
    "exponential", "exponential-minus-one", "floor", "imag", "is-finite", "log", "log-plus-one",
    "not", "negate", "popcnt", "real", "reduce-precision", "rsqrt", "logistic", "sign", "sine",
    "sinh", "sqrt", "cbrt", "tan", "tanh",
    # binary
    "add", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply", "mulhi",
    "power", "remainder", "subtract", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "stochastic-convert",
    # ternary
    "select", "clamp",
})

#: Opcodes with side effects of their own (HloInstruction::HasSideEffectNoRecurse).
_SIDE_EFFECT_OPCODES = frozenset({
    "send", "send-done", "recv", "recv-done", "rng", "rng-get-and-update-state", "infeed",
    "outfeed", "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-broadcast", "collective-permute-start", "collective-permute-done",
})
_LAYOUT_CONSTRAINED_COLLECTIVES = frozenset({"all-to-all", "all-gather", "all-reduce", "reduce-scatter"})

#: Callers whose computations are "embedded" (GetInstructionCallContext == kEmbedded): their
#: bodies are scalar lambdas (reducers, comparators, scatter combiners), never fused.
EMBEDDED_CALLERS = frozenset({
    "all-reduce", "reduce-scatter", "all-reduce-start", "map", "reduce", "reduce-window", "scan",
    "scatter", "select-and-scatter", "sort", "fusion", "custom-call",
})  # not topk: XLA gives it no call context, so its comparator is fused like any computation

#: ElementalIrEmitter::OpInvalidatesCache: ops whose elemental code cannot reuse the cache.
CACHE_INVALIDATING_OPCODES = frozenset({
    "concatenate", "dot", "dynamic-update-slice", "pad", "reduce", "reduce-window",
})

#: FusionNodeIndexingEvaluation::kAllowedCodeDuplication.
ALLOWED_CODE_DUPLICATION = 15


def is_elementwise(node: "Node", operand_index: int | None = None) -> bool:
    """HloInstruction::IsElementwise / IsElementwiseOnOperand."""
    op = node.opcode
    if op == "dynamic-update-slice":
        return operand_index == 0
    if op == "constant" or op == "rng":
        return True
    if op == "map":
        dims = attributes.int_list(node.attr("dimensions"))
        return not dims or dims == tuple(range(node.shape.rank))
    if op == "fusion":
        if node.fused is None:
            return False
        if operand_index is None:
            return all(n.opcode == "parameter" or is_elementwise(n) for n in node.fused.nodes())
        return _fusion_elementwise_on(node, operand_index)
    if op == "bitcast-convert" and node.operands:
        if node.shape.element_bits != node.operands[0].shape.element_bits:
            return False
    return op in ELEMENTWISE_OPCODES


def _fusion_elementwise_on(fusion: "Node", index: int) -> bool:
    """Every instruction on a path from fused parameter `index` to the root is elementwise."""
    start = fusion.fused.parameters[index]
    seen = {start.uid}
    work = [start]
    while work:
        node = work.pop()
        for user in node.users:
            if user.uid in seen:
                continue
            if not is_elementwise(user, user.operand_index(node)):
                return False
            seen.add(user.uid)
            work.append(user)
    return True


def has_side_effect(node: "Node") -> bool:
    """HloInstruction::HasSideEffect: its own side effects or those of what it calls."""
    if node.opcode in _SIDE_EFFECT_OPCODES:
        return True
    if node.opcode == "custom-call" and (node.attr("custom_call_has_side_effect") or "").strip() == "true":
        return True
    if node.opcode in _LAYOUT_CONSTRAINED_COLLECTIVES and (node.attr("constrain_layout") or "") == "true":
        return True
    program = node.graph.program if node.graph is not None else None
    if program is not None:
        for name in node.called:
            graph = program.graphs.get(name)
            if graph is not None and any(has_side_effect(n) for n in graph):
                return True
    return False


def is_fusible(node: "Node") -> bool:
    """HloInstruction::IsFusible: may this instruction take part in a fusion at all?"""
    op = node.opcode
    if op in ("domain", "parameter", "while", "conditional", "call"):
        return False
    if op in ("fusion", "map", "reduce", "reduce-window"):
        return True
    if op == "rng":
        return len(node.users) <= 1
    return not has_side_effect(node)


def not_fusible_reason(node: "Node") -> str:
    """Why is_fusible(node) is False, in words."""
    op = node.opcode
    if op == "parameter":
        return "a parameter is an input buffer, not a computation"
    if op in ("while", "conditional", "call"):
        return f"{op} runs other computations"
    if op == "domain":
        return "domain marks a sharding boundary"
    if op == "rng":
        return "rng has several users and would be drawn twice"
    return "it has side effects"


# -- element reuse (HloInstruction::OperandElementUse) ---------------------------------------

REUSE, USE, NO_USE = 0, 1, 2  # XLA's UseKind lattice: kReuse < kUse < kNoUse


def operand_element_use(node: "Node", i: int) -> int:
    """How `node` reads the elements of operand `i`: once (USE) or several times (REUSE)."""
    op = node.opcode
    if op in ("bitcast", "concatenate", "reshape", "reverse", "slice", "transpose", "gather"):
        return USE
    if op == "pad":
        return REUSE if i > 0 else USE
    if op == "reduce":
        return REUSE if i >= len(node.operands) // 2 else USE
    if op == "fusion":
        return _fusion_param_use(i, node.fused.root, {})
    if op == "dot":
        if node.shape.rank <= 1:
            other = node.operands[1 - i] if len(node.operands) == 2 else None
            if other is not None and other.shape.rank <= 1:
                return USE
        return REUSE
    if op == "dynamic-update-slice":
        return USE if i in (0, 1) else REUSE
    return USE if is_elementwise(node) else REUSE


def _fusion_param_use(param: int, node: "Node", cache: dict[int, int]) -> int:
    """FusionReusesParamElements: the meet over paths from the root down to parameter `param`."""
    if node.opcode == "parameter" and node.parameter_number == param:
        return USE
    if node.uid in cache:
        return cache[node.uid]
    cache[node.uid] = NO_USE
    for k, operand in enumerate(node.operands):
        old = cache[node.uid]
        use = operand_element_use(node, k)
        if use == NO_USE:
            continue
        below = _fusion_param_use(param, operand, cache)
        if below == NO_USE:
            continue
        cache[node.uid] = min(old, use, below)
        if cache[node.uid] == REUSE:
            break
    return cache[node.uid]


def reuses_operand_elements(node: "Node", i: int) -> bool:
    return operand_element_use(node, i) == REUSE


# -- duplication --------------------------------------------------------------------------


def is_always_duplicable(node: "Node") -> bool:
    """A widening convert or any broadcast: cheaper duplicated than materialised."""
    if node.opcode == "broadcast":
        return True
    return (node.opcode == "convert" and bool(node.operands)
            and node.operands[0].shape.byte_size < node.shape.byte_size)


def fusion_would_duplicate(producer: "Node", consumer: "Node") -> bool:
    """The producer keeps a copy outside: it has users other than the consumer."""
    return not (len(producer.users) == 1 and producer.users[0] is consumer)


def effectively_at_most_unary(node: "Node") -> bool:
    """At most one operand is "large" (true rank at least the output's); broadcasts, iotas
    and scalar constants never count."""
    out_rank = max((s.true_rank for s in node.shape.leaves() if s.is_array), default=0)
    large = 0
    for op in node.operands:
        if op.opcode in ("broadcast", "iota"):
            continue
        if op.opcode == "constant" and op.shape.is_effective_scalar:
            continue
        rank = op.shape.true_rank if op.shape.is_array else 0
        if rank >= out_rank:
            large += 1
    return large <= 1


def total_elements(shape: ir.Shape) -> int:
    return sum(s.elements for s in shape.leaves() if s.is_array)


def unique_operands(node: "Node") -> list["Node"]:
    out: list[Node] = []
    for op in node.operands:
        if not any(o is op for o in out):
            out.append(op)
    return out


# -- in-place operations (AliasInfo::GetInPlaceInputOutputPairs) ---------------------------

_ALIAS_RE = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")


def _index(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace(" ", "").split(",") if x)


def in_place_pairs(node: "Node") -> list[tuple[int, tuple[int, ...]]]:
    """(operand number, output shape index) pairs whose buffers the instruction updates in place."""
    op = node.opcode
    if op == "dynamic-update-slice":
        return [(0, ())]
    if op in ("scatter", "all-reduce-start"):
        n = (len(node.operands) - 1) // 2 if op == "scatter" else len(node.operands)
        return [(0, ())] if n == 1 else [(k, (k,)) for k in range(n)]
    pairs: list[tuple[int, tuple[int, ...]]] = []
    if op == "fusion" and node.fused is not None:
        pairs.extend(_fusion_in_place_pairs(node))
    aliasing = node.attr("output_to_operand_aliasing")
    if aliasing:
        for out_index, operand, _ in _ALIAS_RE.findall(aliasing):
            pair = (int(operand), _index(out_index))
            if pair not in pairs:
                pairs.append(pair)
    return pairs


def follow_tuple_indirection(node: "Node", index: tuple[int, ...]) -> tuple["Node", tuple[int, ...]]:
    """Through `tuple` and `get-tuple-element`, to the instruction that produces the value."""
    while True:
        if node.opcode == "tuple" and index:
            node, index = node.operands[index[0]], index[1:]
        elif node.opcode == "get-tuple-element":
            node, index = node.operands[0], (int(node.attr("index")),) + index
        else:
            return node, index


def _follow(node: "Node", index: tuple[int, ...]) -> tuple["Node", tuple[int, ...]]:
    node, index = follow_tuple_indirection(node, index)
    while node.opcode == "bitcast" and node.operands:  # FollowNoOpIndirection
        node, index = follow_tuple_indirection(node.operands[0], index)
    return node, index


def _leaf_indices(shape: ir.Shape, prefix: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    if not shape.is_tuple:
        return [prefix]
    out = []
    for k, sub in enumerate(shape.tuple_shapes):
        out.extend(_leaf_indices(sub, prefix + (k,)))
    return out


def _fusion_in_place_pairs(fusion: "Node") -> list[tuple[int, tuple[int, ...]]]:
    pairs = []
    for out_index in _leaf_indices(fusion.shape):
        source, source_index = _follow(fusion.fused.root, out_index)
        found = None
        for operand, output in in_place_pairs(source):
            if output == source_index:
                found, found_index = _follow(source.operands[operand], ())
        if found is not None and found.opcode == "parameter":
            pairs.append((found.parameter_number, out_index))
    return pairs


def _first_integer(node: "Node") -> int | None:
    if node.opcode != "constant" or node.literal is None:
        return None
    m = re.search(r"-?\d+", node.literal)
    if m is None:
        return 1 if "true" in node.literal else (0 if "false" in node.literal else None)
    return int(m.group(0))


def _is_nonelementwise(node: "Node") -> bool:
    return (node.opcode not in ("fusion", "bitcast", "parameter")) and not is_elementwise(node)


def _extract(node: "Node", keep) -> list["Node"]:
    """XLA's ExtractInstructions: the node itself if it matches, else matching fused nodes."""
    if keep(node):
        return [node]
    if node.opcode != "fusion" or node.fused is None:
        return []
    return [n for n in node.fused.nodes() if keep(n)]


def _reaches(start: "Node", targets: list["Node"]) -> bool:
    wanted = {t.uid for t in targets}
    seen = {start.uid}
    work = [start]
    while work:
        node = work.pop()
        if node.uid in wanted:
            return True
        for user in node.users:
            if user.uid not in seen:
                seen.add(user.uid)
                work.append(user)
    return False


def _safe_slice_into_dus(producer: "Node", consumer: "Node", dus: "Node") -> bool:
    """IsSafeToFuseSliceIntoDusFusion: no other non-elementwise op shares the in-place buffer."""
    memo: dict[int, bool] = {}

    def bad(node: "Node") -> bool:
        if node.uid in memo:
            return memo[node.uid]
        if node is not dus and not is_elementwise(node) and node.opcode != "parameter":
            memo[node.uid] = True
            return True
        memo[node.uid] = any(bad(u) for u in node.users)
        return memo[node.uid]

    for i, op in enumerate(consumer.operands):
        if op is producer and bad(consumer.fused.parameters[i]):
            return False
    return True


def in_place_refusal(producer: "Node", consumer: "Node") -> tuple[str, dict] | None:
    """InstructionFusion::ShouldFuseInPlaceOp: (rule id, facts) of the first refusal, or None."""
    for k, out_index in in_place_pairs(consumer):
        if k >= len(consumer.operands):
            continue
        buffer = consumer.operands[k]
        for i, op in enumerate(consumer.operands):
            if i != k and op is buffer:
                return "IF-INPLACE-SHARED-BUFFER", {"buffer": buffer.name, "operand": k, "other": i}
        if not (buffer is producer or any(o is buffer for o in producer.operands)):
            continue
        non_elementwise = _extract(producer, _is_nonelementwise)
        if len(non_elementwise) > 1:
            return "IF-INPLACE-PRODUCER-NON-ELEMENTWISE", {
                "buffer": buffer.name, "ops": ", ".join(n.opcode for n in non_elementwise)}
        if not non_elementwise:
            if consumer.opcode != "fusion":
                return None
            root, _ = follow_tuple_indirection(consumer.fused.root, out_index)
            others = _extract(consumer, lambda n: _is_nonelementwise(n) and n is not root)
            param = consumer.fused.parameters[consumer.operand_index(producer)]
            if _reaches(param, others):
                return "IF-INPLACE-CONSUMER-CONFLICT", {"buffer": buffer.name}
            return None
        dus_ops = _extract(consumer, lambda n: n.opcode == "dynamic-update-slice")
        if not dus_ops:
            return None
        if len(dus_ops) > 1:
            return "IF-INPLACE-MULTIPLE-DUS", {"count": len(dus_ops)}
        dus, hero = dus_ops[0], non_elementwise[0]

        def real(owner: "Node", node: "Node") -> "Node":
            if owner.opcode == "fusion" and node.opcode == "parameter":
                return owner.operands[node.parameter_number]
            return node

        if hero.opcode == "slice":
            if hero.shape != dus.operands[1].shape:
                return "IF-INPLACE-SLICE-SHAPE", {"slice": hero.name, "slice_shape": str(hero.shape),
                                                  "update_shape": str(dus.operands[1].shape)}
            dims = attributes._slice(hero.attr("slice") or "")
            for d in range(dus.shape.rank):
                start = _first_integer(real(consumer, dus.operands[2 + d]))
                if start is None or d >= len(dims) or start != dims[d].start or dims[d].stride != 1:
                    return "IF-INPLACE-SLICE-INDEX", {"slice": hero.name, "dimension": d}
            if consumer.opcode == "fusion" and not _safe_slice_into_dus(producer, consumer, dus):
                return "IF-INPLACE-SLICE-SHARED", {"slice": hero.name}
            return None
        if hero.opcode == "dynamic-slice":
            if hero.shape != dus.operands[1].shape:
                return "IF-INPLACE-DS-SHAPE", {"slice": hero.name, "slice_shape": str(hero.shape),
                                               "update_shape": str(dus.operands[1].shape)}
            for d in range(dus.shape.rank):
                ds_index = real(producer, hero.operands[1 + d])
                dus_index = real(consumer, dus.operands[2 + d])
                a, b = _first_integer(ds_index), _first_integer(dus_index)
                if a != b or (a is None and ds_index is not dus_index):
                    return "IF-INPLACE-DS-INDEX", {"slice": hero.name, "dimension": d}
            if consumer.opcode == "fusion" and not _safe_slice_into_dus(producer, consumer, dus):
                return "IF-INPLACE-DS-SHARED", {"slice": hero.name}
            return None
        return "IF-INPLACE-UNRECOGNIZED", {"op": hero.opcode, "name": hero.name}
    return None


# -- code duplication (FusionNodeIndexingEvaluation) -----------------------------------------


def _same_shape_ignoring_type(a: ir.Shape, b: ir.Shape) -> bool:
    if a.is_tuple or b.is_tuple:
        return a.same_dims(b)
    return a.dims == b.dims and a.minor_to_major == b.minor_to_major


class FusionNodeIndexingEvaluation:
    """How many distinct index computations XLA's elemental emitter would generate for each
    instruction of a fusion (XLA's FusionNodeIndexingEvaluation).  Values outside the fusion
    stand in for the fused parameters bound to them."""

    def __init__(self, fusion: "Node"):
        self.fusion = fusion
        #: uid → uids of the instructions that hand it an index (the fusion itself for the root)
        self.indexing_users: dict[int, set[int]] = {fusion.fused.root.uid: {fusion.uid}}
        self.count: dict[int, int] = {fusion.uid: 1}
        for node in reversed(fusion.fused.post_order()):
            if node.opcode != "parameter":
                self._update_count(node)
                self._update_operands(node)

    def _update_count(self, node: "Node") -> None:
        self.count[node.uid] = sum(self.count.get(u, 0) for u in self.indexing_users.setdefault(node.uid, set()))

    def _update_operands(self, node: "Node") -> None:
        mine = self.indexing_users.setdefault(node.uid, set())
        for op in node.operands:
            if op.opcode == "parameter" and op.graph is self.fusion.fused:
                op = self.fusion.operands[op.parameter_number]
            target = self.indexing_users.setdefault(op.uid, set())
            if node.opcode == "transpose" or _same_shape_ignoring_type(op.shape, node.shape):
                target |= mine
            else:
                target.add(node.uid)

    def emitted(self, producer: "Node") -> int:
        return sum(self.count.get(u, 0) for u in self.indexing_users.get(producer.uid, ()))

    def too_high(self, producer: "Node") -> bool:
        """CodeDuplicationTooHigh: broadcasts always pass (materialising them is worse)."""
        if producer.opcode == "broadcast":
            return False
        emitted = self.emitted(producer)
        return emitted > ALLOWED_CODE_DUPLICATION or (
            producer.opcode in CACHE_INVALIDATING_OPCODES and (emitted > 1 or real_user_count(producer) > 1))

    def remove_operand(self, producer: "Node") -> set[int]:
        return self.indexing_users.pop(producer.uid, set())

    def update(self, clone: "Node", users: set[int]) -> None:
        self.indexing_users[clone.uid] = set(users)
        self._update_count(clone)
        self._update_operands(clone)


def real_user_count(node: "Node") -> int:
    """Users of `node`, where a fusion user counts the users of its parameter for `node`."""
    total = 0
    for user in node.users:
        if user.opcode == "fusion" and user.fused is not None:
            total += len(user.fused.parameters[user.operand_index(node)].users)
        else:
            total += 1
    return total


# ------------------------------------------------------------------------------------------
# 2. Rules
# ------------------------------------------------------------------------------------------


def _run(c: Candidate):
    return c.extra["run"]


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
    others = [u.name for u in p.users if u is not c.consumer]
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
    key = ("in_place", c.producer.uid, c.consumer.uid)
    cache = c.extra.setdefault("_memo", {})
    if key not in cache:
        cache[key] = in_place_refusal(c.producer, c.consumer)
    return cache[key]


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
    fusion; `extra["run"].indexing_evaluation(fusion)` supplies the cached evaluation).  XLA:CPU
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
