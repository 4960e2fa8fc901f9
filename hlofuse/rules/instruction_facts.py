"""What XLA's HloInstruction (and its helpers) says about an instruction, as the generic
InstructionFusion pass reads it: fusible, elementwise, how it uses its operands' elements,
which operands it updates in place, whether duplicating it is cheap, and the elemental
emitter's code-duplication count (FusionNodeIndexingEvaluation).  Pure functions of
`hlofuse.graph` nodes; the rules in rules/instruction_fusion.py and the backends' rules ask
them.  Source: xla/hlo/ir/hlo_instruction.cc, xla/service/instruction_fusion.cc,
xla/hlo/analysis/alias_info.cc, xla/service/fusion_node_indexing_evaluation.cc at XLA 5a9e73cb
(docs/xla/cpu-fusion.md §2).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from .. import attributes, ir
from ..graph import graph_cache

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node

#: HloInstruction::IsOpElementwise (X0102).
ELEMENTWISE_OPCODES: Final = frozenset({
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

#: Callers whose computations are "embedded" (GetInstructionCallContext == kEmbedded): their
#: bodies are scalar lambdas (reducers, comparators, scatter combiners), never fused.
EMBEDDED_CALLERS: Final = frozenset({
    "all-reduce", "reduce-scatter", "all-reduce-start", "map", "reduce", "reduce-window", "scan",
    "scatter", "select-and-scatter", "sort", "fusion", "custom-call",
})  # not topk: XLA gives it no call context, so its comparator is fused like any computation

#: ElementalIrEmitter::OpInvalidatesCache: ops whose elemental code cannot reuse the cache.
CACHE_INVALIDATING_OPCODES: Final = frozenset({
    "concatenate", "dot", "dynamic-update-slice", "pad", "reduce", "reduce-window",
})

#: FusionNodeIndexingEvaluation::kAllowedCodeDuplication.
ALLOWED_CODE_DUPLICATION: Final = 15


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


_ALWAYS_SIDE_EFFECTING: Final = frozenset({
    "send", "send-done", "recv", "recv-done", "rng", "rng-get-and-update-state", "infeed",
    "outfeed", "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-broadcast", "collective-permute-start", "collective-permute-done",
})


def _is_spmd(node: "Node") -> bool:
    """Whether the module was SPMD-partitioned (the text shows it as num_partitions > 1)."""
    program = node.graph.program if node.graph is not None else None
    source = getattr(program, "source", None)
    return source is not None and (source.attr("num_partitions") or "1") != "1"


def has_side_effect_no_recurse(node: "Node") -> bool:
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


def has_side_effect(node: "Node") -> bool:
    """HloInstruction::HasSideEffect: this instruction, or anything in a computation it calls."""
    if has_side_effect_no_recurse(node):
        return True
    if node.fused is None and not node.called:  # most instructions: nothing to look into
        return False
    program = node.graph.program if node.graph is not None else None
    called = []
    if node.fused is not None:
        called.append(node.fused)
    if program is not None:
        called.extend(program.graphs[c] for c in node.called if c in program.graphs)
    return any(has_side_effect(n) for g in called for n in g.nodes())


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
        uses = _fusion_param_uses(node)
        return uses[i] if i < len(uses) else NO_USE
    if op == "dot":
        if node.shape.rank <= 1:
            other = node.operands[1 - i] if len(node.operands) == 2 else None
            if other is not None and other.shape.rank <= 1:
                return USE
        return REUSE
    if op == "dynamic-update-slice":
        return USE if i in (0, 1) else REUSE
    return USE if is_elementwise(node) else REUSE


_NO_PARAMS: Final[dict[int, int]] = {}


def _fusion_param_uses(fusion: "Node") -> tuple[int, ...]:
    """_fusion_param_use of every parameter of the fusion, in one walk of its body (operands
    before users: each instruction's meet per parameter below it), remembered per version of
    the body.  Callers ask every operand of a fusion in turn (the reuse cache of instruction
    fusion): one walk per parameter would walk the body as many times."""
    body = fusion.fused
    cache = graph_cache(body)
    found = cache.get("parameter element use")
    if found is None:
        below: dict[int, dict[int, int]] = {}  # uid → {parameter number: its use, where used}
        for node in body._remembered_post_order():
            if node.opcode == "parameter":
                below[node.uid] = {node.parameter_number: USE}
                continue
            mine: dict[int, int] = {}
            for k, operand in enumerate(node.operands):
                uses = below.get(operand.uid, _NO_PARAMS)
                if not uses:
                    continue
                use = operand_element_use(node, k)
                if use == NO_USE:
                    continue
                for param, under in uses.items():
                    met = use if use < under else under
                    old = mine.get(param, NO_USE)
                    if met < old:
                        mine[param] = met
            below[node.uid] = mine
        at_root = below.get(body.root.uid, _NO_PARAMS)
        found = cache["parameter element use"] = tuple(at_root.get(p, NO_USE) for p in range(len(body.parameters)))
    return found


def _fusion_param_use(param: int, node: "Node", cache: dict[int, int]) -> int:
    """FusionReusesParamElements: the meet over paths from the root down to parameter `param`
    (the definition, one parameter at a time; _fusion_param_uses answers for all at once)."""
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
    """IsAlwaysDuplicable (instruction_fusion.cc): a widening convert, or any broadcast;
    cheaper duplicated than materialised.  Sizes as ShapeUtil::ByteSizeOf counts them (a
    sub-byte element takes a byte)."""
    if node.opcode == "broadcast":
        return True
    if node.opcode != "convert" or not node.operands:
        return False
    from ..gpu.shapes import byte_size

    return byte_size(node.operands[0].shape) < byte_size(node.shape)


def fusion_would_duplicate(producer: "Node", consumer: "Node") -> bool:
    """The producer keeps a copy outside: it has users other than the consumer."""
    return not (len(producer.users) == 1 and producer.users[0] is consumer)


def effectively_at_most_unary(node: "Node") -> bool:
    """At most one operand is "large" (true rank at least the output's); broadcasts, iotas
    and scalar constants never count."""
    shape = node.shape
    if shape.is_tuple:
        out_rank = max((s.true_rank for s in shape.leaves() if s.is_array), default=0)
    else:  # (asked of every instruction of every computation each run: no generator for one leaf)
        out_rank = shape.true_rank if shape.is_array else 0
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
    if not shape.is_tuple:
        return shape.elements  # (0 for a token, as no leaf is counted)
    return sum(s.elements for s in shape.leaves() if s.is_array)


def unique_operands(node: "Node") -> list["Node"]:
    """The operands without repeats, first use first (an output tuple may have thousands)."""
    return list({id(op): op for op in node.operands}.values())


# -- in-place operations (AliasInfo::GetInPlaceInputOutputPairs) ---------------------------

_ALIAS_RE = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")


def _index(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace(" ", "").split(",") if x)


def output_to_operand_aliasing(node: "Node") -> list[tuple[tuple[int, ...], int, tuple[int, ...]]]:
    """`output_to_operand_aliasing={{out}: (operand, {index}), ...}` as (output index, operand
    number, operand index) triples."""
    text = node.attr("output_to_operand_aliasing")
    if not text:
        return []
    return [(_index(out), int(operand), _index(index)) for out, operand, index in _ALIAS_RE.findall(text)]


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
        pairs.extend(_remembered_fusion_pairs(node))
    for out_index, operand, _ in output_to_operand_aliasing(node):
        pair = (operand, out_index)
        if pair not in pairs:
            pairs.append(pair)
    return pairs


def updates_in_place(node: "Node") -> bool:
    """bool(in_place_pairs(node)), asked for nearly every candidate pair on the GPU: a fusion's
    own pairs are remembered per version of its body (they depend on the body alone)."""
    op = node.opcode
    if op == "fusion" and node.fused is not None:
        if _remembered_fusion_pairs(node):
            return True
    elif op in ("dynamic-update-slice", "scatter", "all-reduce-start"):
        return bool(in_place_pairs(node))
    return bool(output_to_operand_aliasing(node))


def _remembered_fusion_pairs(fusion: "Node") -> tuple[tuple[int, tuple[int, ...]], ...]:
    """_fusion_in_place_pairs, remembered per version of the body (they depend on it alone)."""
    cache = graph_cache(fusion.fused)
    found = cache.get("in-place-pairs")
    if found is None:
        found = cache["in-place-pairs"] = tuple(_fusion_in_place_pairs(fusion))
    return found


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


def leaf_indices(shape: ir.Shape, prefix: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    if not shape.is_tuple:
        return [prefix]
    out = []
    for k, sub in enumerate(shape.tuple_shapes):
        out.extend(leaf_indices(sub, prefix + (k,)))
    return out


def _fusion_in_place_pairs(fusion: "Node") -> list[tuple[int, tuple[int, ...]]]:
    pairs = []
    for out_index in leaf_indices(fusion.shape):
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
    if a is b:  # (the reader shares one object per distinct shape: most elementwise edges)
        return True
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
        # (the fused computation's remembered post order, walked backwards: not edited here)
        for node in reversed(fusion.fused._remembered_post_order()):
            if node.opcode != "parameter":
                self._update_count(node)
                self._update_operands(node)

    # The sets below are made only where an instruction has none yet (a `setdefault(uid,
    # set())` would make one per question, most of them thrown away).
    def _update_count(self, node: "Node") -> None:
        users = self.indexing_users.get(node.uid)
        if users is None:
            self.indexing_users[node.uid] = set()
            self.count[node.uid] = 0
            return
        count = self.count
        total = 0
        for u in users:
            total += count.get(u, 0)
        count[node.uid] = total

    def _update_operands(self, node: "Node") -> None:
        indexing_users = self.indexing_users
        mine = indexing_users.get(node.uid)
        if mine is None:
            mine = indexing_users[node.uid] = set()
        fusion = self.fusion
        fused = fusion.fused
        reshaping = node.opcode != "transpose"
        shape = node.shape
        for op in node.operands:
            if op.opcode == "parameter" and op.graph is fused:
                op = fusion.operands[op.parameter_number]
            target = indexing_users.get(op.uid)
            if target is None:
                target = indexing_users[op.uid] = set()
            if not reshaping or _same_shape_ignoring_type(op.shape, shape):
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
        """`users`: the set `remove_operand` handed back for the producer, kept as the clone's
        (not copied: XLA moves it too, UpdateEvaluationCache; the callers drop it)."""
        self.indexing_users[clone.uid] = users
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
