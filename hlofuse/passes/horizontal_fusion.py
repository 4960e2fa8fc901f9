"""Horizontal fusion at XLA 76da7301 (docs/xla/legacy-gpu-pipeline.md §8, §9): independent
kernels that feed one consumer become one kernel.

* `horizontal_loop_fusion` (HorizontalLoopFusion, entry computation only): for each consumer,
  walking the post order backwards, its operands' small elementwise ops and kLoop fusions are
  sorted, cut into spans, and each span of two or more becomes one fusion — a kLoop fusion
  returning a tuple (equal shapes), or the "sliced input" kInput fusion that flattens the
  outputs, concatenates them and slices them apart again.
* `horizontal_input_fusion` (HorizontalInputFusion): reduction kernels feeding one consumer are
  merged greedily into multi-output fusions.

HorizontalLoopFusion can also be replayed as of XLA 84d72608 (2025-01-15, "N"), the XLA that
shared/corpus/fusion's horizontal cases come from: `run_loop(..., xla="N")`.  The legacy
pipeline always runs P (the default).  What differs is data, not a second driver: a
`rules.horizontal_fusion.LoopFusionXla` says, per commit, which computations are visited,
whether candidates are found through bitcasts, whether concatenate-rooted kInput fusions
qualify, how candidates are ordered, and which rules each stage asks (legacy contract §0.4,
§11.4).  At N, compared with P:

* every computation GetFusibleComputations returns is visited unless `only_entry_computation`;
* candidates are found through bitcasts as well as get-tuple-elements, and the only-user check
  looks through bitcast users too;
* kInput fusions rooted at a concatenate are candidates; tuple-shaped reduce-windows are not;
* a kernel with an input or output outside the default memory space is not a candidate
  (HF-NON-DEFAULT-MEMORY-SPACE);
* the row-major layout rule (HF-NOT-ROW-MAJOR) is gone, and non-row-major outputs are bitcast
  to a descending layout before the sliced mode flattens them;
* the shared-parameter ban (HF-SHARED-PARAMETER) is narrowed to dynamic-update-slice fusions
  sharing any operand (HF-DUS-SHARED-OPERAND);
* the equal-instruction-count span rule (HF-DIFFERENT-SIZE) and the unroll-cost limit
  (HF-UNROLL-COST) are gone;
* candidates are sorted on a key ending in the unique id; consumers with fewer than two
  operands are skipped.

Every candidate considered yields one Decision (candidate, consumer).
"""

from __future__ import annotations

from ..gpu import gpu_config
from ..gpu.fusible import fusible_computations, is_consumer_the_only_non_root_user, is_input_fusible_reduction, \
    is_nestable_variadic_reduce_window, is_nestable_variadic_reduction
from ..gpu.heroes import real_hero
from ..gpu.properties import instr_count_of_fusible, is_custom_fusion, is_elementwise, outputs_of_fusible
from ..gpu.shapes import descending_layout_same_physical, elements, equal_ignoring_element_type, \
    is_monotonic_dim0_major
from ..graph import Graph, Node, add_operand, clone_node
from ..fusion_primitives import _dedupe_operands, create_fusion, fuse_into_multi_output, make_gte
from ..ir import INTEGRAL_TYPES, Layout, Shape, tuple_shape
from ..pipeline import Context, decision_from
from ..rules import Candidate, Outcome, evaluate
from ..rules.candidates import HorizontalCandidate, SpanCandidate
from ..rules.gpu_fusible import BUDGET_RULES, SHAPE_RULES
from ..rules.horizontal_fusion import LoopFusionXla, is_concatenation_input_fusion, loop_fusion_xla
from .cleanup import remove_instruction

#: xla_data.proto PrimitiveType numbers: the sort key XLA orders candidates by.
#: What two input fusions joined horizontally are asked (one tuple: the evaluator remembers
#: its compiled lists per tuple).
_INPUT_PAIR_RULES = SHAPE_RULES + BUDGET_RULES

_TYPE_ORDER = {
    "pred": 1, "s8": 2, "s16": 3, "s32": 4, "s64": 5, "u8": 6, "u16": 7, "u32": 8, "u64": 9, "f16": 10, "f32": 11,
    "f64": 12, "tuple": 13, "opaque": 14, "c64": 15, "bf16": 16, "token": 17, "c128": 18, "f8e5m2": 19,
    "f8e4m3fn": 20, "s4": 21, "u4": 22, "f8e4m3b11fnuz": 23, "f8e5m2fnuz": 24, "f8e4m3fnuz": 25, "s2": 26,
    "u2": 27, "f8e4m3": 28, "f8e3m4": 29,
}
_UNROLL_FREE = frozenset({"parameter", "constant", "tuple", "broadcast", "bitcast", "reshape", "transpose", "slice"})
_UNROLL_COSTLY = frozenset({"abs", "ceil", "floor", "round-nearest-afz", "round-nearest-even", "rsqrt", "sqrt"})


def latest_non_gte_ancestor(node: Node) -> Node:
    """HloInstruction::LatestNonGteAncestor: strip get-tuple-elements."""
    while node.opcode == "get-tuple-element":
        node = node.operands[0]
    return node


def latest_non_trivial_ancestor(node: Node) -> Node:
    """LatestNonTrivialAncestor (horizontal_loop_fusion.cc, N): strip get-tuple-elements and
    bitcasts."""
    while node.opcode in ("get-tuple-element", "bitcast"):
        node = node.operands[0]
    return node


def unroll_cost(node: Node) -> int:
    """GetInstrUnrollCostOfFusible (P only: N has no unroll-cost limit)."""
    if node.opcode == "fusion":
        return sum(unroll_cost(n) for n in node.fused.nodes())
    if node.opcode in _UNROLL_FREE:
        return 0
    if node.shape.element_type not in INTEGRAL_TYPES and node.opcode in _UNROLL_COSTLY:
        return 20
    return 1


def _control_predecessor_names(graph: Graph) -> set[str]:
    """Names that some instruction of the graph lists in its control-predecessors."""
    from ..ir import _names_in

    out: set[str] = set()
    for node in graph:
        text = node.attr("control-predecessors")
        if text:
            out.update(_names_in(text))
    return out


def _is_fusible_candidate(node: Node, cfg, control_names: set[str], xla: LoopFusionXla) -> bool:
    """IsFusibleCandidate: an elementwise op with operands, or a kLoop fusion (at N also a
    kInput fusion rooted at a concatenate) whose outputs share one element type; never
    control-dependent ops or nestable variadic reductions (at N nor reduce-windows).  N's
    memory-space test is a rule the caller asks (`fusible_rules`), so that it is explained."""
    if node.attr("control-predecessors") or node.name in control_names:
        return False
    if is_nestable_variadic_reduction(node, cfg):
        return False
    if xla.excludes_variadic_reduce_window and is_nestable_variadic_reduce_window(node):
        return False
    if is_elementwise(node) and node.operands:
        return True
    if not (node.opcode == "fusion" and node.fusion_kind == "kLoop"
            or xla.concat_input_fusions and is_concatenation_input_fusion(node)):
        return False
    types = {o.shape.element_type for o in outputs_of_fusible(node)}
    return len(types) == 1


# ------------------------------------------------------------------------------------------
# HorizontalLoopFusion
# ------------------------------------------------------------------------------------------


def run_loop(program, ctx: Context, prefix: str = "", only_entry: bool | None = None,
             xla: "str | LoopFusionXla" = "P") -> bool:
    """HorizontalLoopFusion::Run as of XLA commit `xla` ("P", the default, or "N").

    P fuses in the entry computation only and has no option; N visits every computation
    GetFusibleComputations returns unless `only_entry_computation` is set.  `only_entry`
    overrides the variant's default (for P, False is a replay convenience XLA never ran)."""
    version = loop_fusion_xla(xla)
    if only_entry is None:
        only_entry = version.entry_only_by_default
    graphs = [program.entry] if only_entry else fusible_computations(program, gpu_config(ctx))
    changed = False
    for graph in graphs:
        changed |= HorizontalLoopFusion(graph, ctx, prefix, version).run()
    return changed


class HorizontalLoopFusion:
    def __init__(self, graph: Graph, ctx: Context, prefix: str = "", xla: "str | LoopFusionXla" = "P"):
        self.graph = graph
        self.ctx = ctx
        self.cfg = gpu_config(ctx)
        self.prefix = prefix
        self.xla = loop_fusion_xla(xla)

    def run(self) -> bool:
        stack = self.graph.post_order()
        self.control_names = _control_predecessor_names(self.graph)
        changed = False
        while stack:
            consumer = stack.pop()
            if consumer not in self.graph or len(consumer.operands) < self.xla.min_consumer_operands:
                continue
            outcomes: dict[int, tuple[Node, Outcome]] = {}
            found = self.fusible_operands(consumer, outcomes)
            if self.fuse_consumer_operands(consumer, False, stack, outcomes, found):
                changed = True
                found = self.fusible_operands(consumer, outcomes)  # else nothing changed: the same
            changed |= self.fuse_consumer_operands(consumer, True, stack, outcomes, found)
            for candidate, outcome in outcomes.values():
                self.ctx.record(decision_from(self.ctx.pass_name, candidate, consumer, outcome))
        return changed

    def fusible_operands(self, consumer: Node, outcomes) -> list[Node]:
        """The first half of FusionCandidates::Initialize (the same in both modes): the distinct
        operands (through get-tuple-elements, at N bitcasts) that are fusible candidates."""
        xla = self.xla
        ancestor = latest_non_trivial_ancestor if xla.through_bitcast else latest_non_gte_ancestor
        found: list[Node] = []
        seen: set[int] = set()  # ids of `found` (a root tuple may have thousands of operands)
        for operand in consumer.operands:
            pred = ancestor(operand)
            if id(pred) in seen or not _is_fusible_candidate(pred, self.cfg, self.control_names, xla):
                continue
            if xla.fusible_rules:
                outcome = evaluate(xla.fusible_rules, HorizontalCandidate(pred, consumer, self.ctx, xla),
                                   self.ctx.relaxed)
                if not outcome.allowed:
                    outcomes[pred.uid] = (pred, outcome)
                    continue
            found.append(pred)
            seen.add(id(pred))
        return found

    def candidates(self, consumer: Node, sliced: bool, outcomes, found: list[Node]) -> list[Node]:
        """FusionCandidates::Initialize: `found` (fusible_operands) filtered and sorted."""
        xla = self.xla
        kept = []
        found_ids = frozenset(id(f) for f in found)
        for node in found:
            asked = HorizontalCandidate(node, consumer, self.ctx, xla, sliced, found, found_ids)
            outcome = evaluate(xla.candidate_rules, asked, self.ctx.relaxed)
            if outcome.allowed:
                kept.append(node)
            else:
                outcomes[node.uid] = (node, outcome)

        def key(n: Node) -> tuple:
            first = outputs_of_fusible(n)[0].shape
            k = (_TYPE_ORDER.get(first.element_type, 99), len(outputs_of_fusible(n)), instr_count_of_fusible(n),
                 elements(first))
            # N: std::sort on a key ending in unique_id (a total order); P: std::stable_sort without it
            return k + (n.uid,) if xla.sort_by_unique_id else k

        kept.sort(key=key)
        return kept

    def spans(self, consumer: Node, fusible: list[Node], sliced: bool, outcomes) -> list[list[Node]]:
        """GetNextSpanOfFusions, repeatedly: runs of compatible neighbours."""
        spans = []
        pos = 0
        while pos < len(fusible):
            left = fusible[pos]
            max_batch = 32 if sliced or left.opcode == "fusion" else 64
            right = pos
            accum_outputs = accum_io = accum_cost = 0
            relaxed: list[str] = []
            while right < len(fusible):
                node = fusible[right]
                outputs = len(outputs_of_fusible(node))
                asked = SpanCandidate(node, consumer, self.ctx, self.xla, sliced, left=left, max_batch=max_batch,
                                      accum_outputs=accum_outputs + outputs,
                                      accum_io=accum_io + len(node.operands) + outputs,
                                      accum_cost=accum_cost + unroll_cost(node))
                outcome = evaluate(self.xla.span_rules, asked,
                                   self.ctx.relaxed)
                relaxed += [r for r in outcome.relaxed if r not in relaxed]
                if not outcome.allowed:
                    if right != pos:
                        outcomes[node.uid] = (node, outcome)
                    elif right == pos:
                        outcomes[node.uid] = (node, outcome)
                    break
                accum_outputs, accum_io, accum_cost = asked.accum_outputs, asked.accum_io, asked.accum_cost
                right += 1
            if right == pos:
                right += 1
            span = fusible[pos:right]
            if len(span) == 1:
                if span[0].uid not in outcomes:
                    alone = evaluate(("HF-NO-PARTNER",), HorizontalCandidate(span[0], consumer, self.ctx, alone=True))
                    outcomes[span[0].uid] = (span[0], alone)
            else:
                for node in span:
                    outcomes[node.uid] = (node, Outcome(None, {}, tuple(relaxed)))
                spans.append(span)
            pos = right
        return spans

    def fuse_consumer_operands(self, consumer: Node, sliced: bool, stack: list[Node], outcomes,
                               found: list[Node]) -> bool:
        fusible = self.candidates(consumer, sliced, outcomes, found)
        changed = False
        for span in self.spans(consumer, fusible, sliced, outcomes):
            fusions = []
            for node in span:
                fusions.append(node if node.opcode == "fusion" else create_fusion(node, "kLoop"))
            stack.append(self.fuse(fusions, sliced))
            changed = True
        return changed

    def fuse(self, fusions: list[Node], sliced: bool) -> Node:
        """HorizontalLoopFusionImpl::Fuse: one fusion computing every candidate's outputs."""
        program = self.graph.program
        body = program.add_graph(Graph(program, self.prefix + "horizontally_fused_computation"))
        mapping: dict[int, Node] = {}
        operands: list[Node] = []
        for i, fusion in enumerate(fusions):
            for j, param in enumerate(fusion.fused.parameters):
                new = Node(f"param_{i}_{j}", "parameter", fusion.operands[j].shape, literal=str(len(operands)))
                body.add(new)
                mapping[param.uid] = new
                operands.append(fusion.operands[j])
        for fusion in fusions:
            root = fusion.fused.root
            for old in fusion.fused.post_order():
                if old.opcode == "parameter" or (sliced and old.opcode == "tuple" and old is root):
                    continue
                new = clone_node(old, body)
                for op in old.operands:
                    add_operand(new, mapping[op.uid])
                mapping[old.uid] = new
        per = len(outputs_of_fusible(fusions[0]))
        if sliced:
            outputs = self._concat_and_slice(body, fusions, mapping, per)
        else:
            outputs = [mapping[outputs_of_fusible(f)[k].uid] for f in fusions for k in range(per)]
        root = Node("tuple", "tuple", tuple_shape([o.shape for o in outputs]))
        body.add(root)
        for o in outputs:
            add_operand(root, o)
        body.root = root
        hfusion = Node(self.prefix + "fusion", "fusion", root.shape, attrs=[("kind", "kInput" if sliced else "kLoop")])
        self.graph.add(hfusion)
        hfusion.fused = body
        body.fusion_owner = hfusion
        for op in operands:
            add_operand(hfusion, op)
        index = 0
        for fusion in fusions:
            values = []
            for k in range(per):
                original = outputs_of_fusible(fusion)[k].shape
                gte = make_gte(hfusion, index)
                index += 1
                if original.rank == 1:
                    values.append(gte)
                else:
                    bitcast = Node("bitcast", "bitcast", original)
                    self.graph.add(bitcast)
                    add_operand(bitcast, gte)
                    values.append(bitcast)
            if len(values) == 1:
                replacement = values[0]
            else:
                replacement = Node("tuple", "tuple", tuple_shape([v.shape for v in values]))
                self.graph.add(replacement)
                for v in values:
                    add_operand(replacement, v)
            self.graph.replace_all_uses(fusion, replacement)
            remove_instruction(self.graph, fusion)
        _dedupe_operands(hfusion)
        return hfusion

    def _concat_and_slice(self, body: Graph, fusions: list[Node], mapping, per: int) -> list[Node]:
        """The sliced-input trick: flatten each output, concatenate per output index, slice back."""
        concats = []
        for k in range(per):
            flat = []
            for fusion in fusions:
                out = mapping[outputs_of_fusible(fusion)[k].uid]
                if out.shape.rank == 1:
                    flat.append(out)
                else:
                    if self.xla.bitcast_before_flattening and not is_monotonic_dim0_major(out.shape):
                        # N: give the output a descending layout over the same bytes first
                        bitcast = Node("bitcast", "bitcast", descending_layout_same_physical(out.shape))
                        body.add(bitcast)
                        add_operand(bitcast, out)
                        out = bitcast
                    shape = Shape(out.shape.element_type, (elements(out.shape),), Layout((0,)))
                    reshape = Node("reshape", "reshape", shape)
                    body.add(reshape)
                    add_operand(reshape, out)
                    flat.append(reshape)
            total = sum(f.shape.dims[0] for f in flat)
            concat = Node("concatenate", "concatenate", Shape(flat[0].shape.element_type, (total,), Layout((0,))),
                          attrs=[("dimensions", "{0}")])
            body.add(concat)
            for f in flat:
                add_operand(concat, f)
            concats.append(concat)
        slices: list[Node | None] = [None] * (per * len(fusions))
        for k, concat in enumerate(concats):
            start = 0
            for j, fusion in enumerate(fusions):
                n = elements(outputs_of_fusible(fusion)[k].shape)
                piece = Node("slice", "slice", Shape(concat.shape.element_type, (n,), Layout((0,))),
                             attrs=[("slice", "{[%d:%d]}" % (start, start + n))])
                body.add(piece)
                add_operand(piece, concat)
                slices[per * j + k] = piece
                start += n
        return slices


# ------------------------------------------------------------------------------------------
# HorizontalInputFusion
# ------------------------------------------------------------------------------------------


def run_input(program, ctx: Context) -> bool:
    """HorizontalInputFusion::Run.  XLA 2024 overwrites `changed` per computation, so only the
    last computation's answer is returned (fixed in later XLA); kept for fidelity."""
    changed = False
    for graph in program.non_fusion_graphs():
        changed = fuse_input_reductions(graph, ctx)
    return changed


def _loop_shape_key(node: Node, cfg):
    hero = real_hero(node, cfg)
    return hero.operands[0].shape if hero.operands else None


def fuse_input_reductions(graph: Graph, ctx: Context) -> bool:
    cfg = gpu_config(ctx)
    changed = False
    for consumer in graph.post_order():
        if consumer not in graph:
            continue
        candidates: list[Node] = []
        for operand in consumer.operands:
            pred = latest_non_gte_ancestor(operand)
            if is_custom_fusion(pred) or not is_input_fusible_reduction(pred, cfg):
                continue
            if any(pred is c for c in candidates):
                continue
            if not is_consumer_the_only_non_root_user(pred, consumer, cfg):
                ctx.decide(("HF-CONSUMER-NOT-ONLY-USER",), HorizontalCandidate(pred, consumer, ctx))
                continue
            candidates.append(pred)
        if len(candidates) <= 1:
            continue
        candidates = _sort_input_candidates(candidates, cfg)
        for j, node in enumerate(candidates):
            if node.opcode != "fusion":
                candidates[j] = create_fusion(node, "kInput")
                changed = True
        anchor = 0
        for j in range(1, len(candidates)):
            first, second = candidates[anchor], candidates[j]
            outcome = ctx.decide(_INPUT_PAIR_RULES,
                                 Candidate(first, second, ctx, pair=(first, second), budget=(first, second, False)))
            if outcome.allowed:
                fuse_into_multi_output(first, second)
                if second in graph and not second.users:
                    remove_instruction(graph, second)
                changed = True
            else:
                anchor = j
    return changed


def _sort_input_candidates(candidates: list[Node], cfg) -> list[Node]:
    """XLA sorts by the hero's input shape (rank, then dimensions), then instruction count.
    XLA's std::sort is not stable and its comparator is not a strict weak order for shapes
    that differ only in layout; a stable sort is used here."""
    import functools

    def compare(a: Node, b: Node) -> int:
        sa, sb = _loop_shape_key(a, cfg), _loop_shape_key(b, cfg)
        if sa is not None and sb is not None and not equal_ignoring_element_type(sa, sb):
            if sa.rank != sb.rank:
                return -1 if sa.rank < sb.rank else 1
            for x, y in zip(sa.dims, sb.dims):
                if x != y:
                    return -1 if x < y else 1
            return -1
        ca, cb = instr_count_of_fusible(a), instr_count_of_fusible(b)
        return -1 if ca < cb else (1 if ca > cb else 0)

    return sorted(candidates, key=functools.cmp_to_key(compare))
