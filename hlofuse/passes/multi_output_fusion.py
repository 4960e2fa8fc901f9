"""MultiOutputFusion (xla/service/gpu/transforms/multi_output_fusion.cc), for both pipelines:
sibling fusion, then producer-consumer multi-output fusion, for every instruction of every
fusible computation, walking the post order backwards (uses before defs).

The checks are the same in 2024 and 2026; only the cost model differs.  The model comes from
`ctx.mof_model` when a pipeline put a factory there (`factory(cfg) -> model`, the
priority pipeline's 2026 model); otherwise the 2024 LegacyPerformanceModel is used.  A model
provides `estimate_run_times(producer, consumers, multi_output=True)` (with `.fused`,
`.unfused`, `.fused_us`, `.unfused_us`), `merged_too_large(producer, consumer) -> (bool,
merged, splits)` and `analysis.revisit(node)`.

docs/xla/legacy-gpu-pipeline.md §7; docs/xla/priority-fusion.md §7.
"""

from __future__ import annotations

from typing import Final

from ..cost.legacy import shared_model
from ..gpu import gpu_config
from ..gpu.config import GpuConfig
from ..gpu.fusible import (choose_fusion_kind, fusible_computations, is_fusible_as_multi_output_fusion_root,
                           is_nestable_variadic_reduction)
from ..gpu.properties import is_custom_fusion, is_multi_output_fusion
from ..graph import Graph, Node
from ..fusion_primitives import create_fusion, fuse_into_multi_output
from ..pipeline import Context, decision_from
from .cleanup import remove_instruction
from ..rules import Candidate, Outcome, evaluate
from ..rules.candidates import MofCandidate
from ..rules.multi_output_fusion import PRODUCER_RULES, consumer_rules, sibling_rules


#: The rule that answers for a consumer that passed when another was chosen (one tuple: the
#: evaluator remembers its compiled lists per tuple).
_OTHER_CONSUMER_PREFERRED: Final = ("MOF-OTHER-CONSUMER-PREFERRED",)


def run(program, ctx: Context) -> bool:
    cfg = gpu_config(ctx)
    changed = False
    for graph in fusible_computations(program, cfg):
        changed |= MultiOutputFusion(graph, ctx, cfg).run()
    return changed


def make_model(ctx: Context, cfg: GpuConfig):
    factory = ctx.mof_model
    return factory(cfg) if factory is not None else shared_model(ctx, cfg)


def priority(node: Node) -> int:
    """FusionPriority: a multi-output fusion 2, another fusion 1, an unfused op 0."""
    if is_multi_output_fusion(node):
        return 2
    return 1 if node.opcode == "fusion" else 0


class Reachability:
    """Answers "does b depend on a?" in one computation while it changes.

    XLA rebuilds a full reachability map after every fusion.  Here each instruction keeps a
    level, greater than the levels of its operands (and control predecessors); fusing only
    raises the levels it must.  If b depends on a then level(a) < level(b), so a search from a
    towards b never leaves the levels below b's: exact answers, without a pass over the whole
    computation per question.

    Levels start `GAP` apart along every edge, so a fusion that raises a level by less than
    that stops there instead of raising everything downstream (in a deep model a raise near
    the inputs would otherwise walk the whole rest of the graph, at every fusion)."""

    GAP = 1 << 12

    def __init__(self, graph: Graph):
        self.graph = graph
        self.level: dict[int, int] = {}
        level = self.level
        gap = self.GAP
        for node in graph.post_order():  # (every node of the computation: no list per node)
            highest = 0
            for pred in node.operands:
                found = level.get(pred.uid, 0)
                if found > highest:
                    highest = found
            if node.attrs and node.attr("control-predecessors"):
                for pred in graph.control_predecessors(node):
                    found = level.get(pred.uid, 0)
                    if found > highest:
                        highest = found
            level[node.uid] = gap + highest
        self._memo: dict[tuple[int, int], bool] = {}

    def _preds(self, node: Node) -> list[Node]:
        preds = list(node.operands)
        if node.attr("control-predecessors"):
            preds += self.graph.control_predecessors(node)
        return preds

    def _level(self, node: Node) -> int:
        found = self.level.get(node.uid)
        if found is None:
            found = self.level[node.uid] = self.GAP + max((self._level(p) for p in self._preds(node)), default=0)
        return found

    def fused(self, fusion: Node) -> None:
        """A multi-output merge gave `fusion` new operands, made get-tuple-elements of it and
        redirected users to them: raise levels where an edge now requires it.  Besides the
        fusion's operands, every new edge leaves the fusion or one of its get-tuple-elements,
        so levels are raised along users from there: a wide user (the output tuple, with
        thousands of operands) is compared with the one operand that changed, not all."""
        self._memo.clear()
        if fusion.graph is not self.graph:
            return
        if fusion.uid in self.level:  # else _level gives a new fusion its level
            need = 1 + max((self._level(p) for p in self._preds(fusion)), default=0)
            if need > self.level[fusion.uid]:
                self.level[fusion.uid] = need
        work = [fusion, *fusion.users]
        level = self.level
        while work:
            node = work.pop()
            after = self._level(node) + 1
            for user in node.users:
                if user.graph is self.graph and self._level(user) < after:
                    level[user.uid] = after
                    work.append(user)

    def reset(self) -> None:
        self._memo.clear()

    def __call__(self, a: Node, b: Node) -> bool:
        if a is b:
            return True
        key = (a.uid, b.uid)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._reaches(a, b)
        return found

    def _reaches(self, a: Node, b: Node) -> bool:
        limit = self._level(b)
        if self._level(a) >= limit:
            return False
        seen = {a.uid}
        stack = [a]
        while stack:
            node = stack.pop()
            for user in node.users:
                if user is b:
                    return True
                if user.uid not in seen and self._level(user) < limit:
                    seen.add(user.uid)
                    stack.append(user)
            for succ in self._control_successors(node):
                if succ is b:
                    return True
                if succ.uid not in seen and self._level(succ) < limit:
                    seen.add(succ.uid)
                    stack.append(succ)
        return False

    def _control_successors(self, node: Node) -> list[Node]:
        return []  # control edges matter only for the rare ops that carry them; levels keep order


class MultiOutputFusion:
    """DoMultiOutputFusion for one computation."""

    def __init__(self, graph: Graph, ctx: Context, cfg: GpuConfig):
        self.graph = graph
        self.ctx = ctx
        self.cfg = cfg
        self.model = make_model(ctx, cfg)
        self.reachable = Reachability(graph)
        # the rule lists, built once per computation (a new tuple per question is compiled
        # again by evaluate: its compiled lists are remembered per tuple)
        self.sibling_rules = sibling_rules()
        self.consumer_rules = consumer_rules()

    def run(self) -> bool:
        changed = False
        for node in reversed(self.graph.post_order()):
            if node not in self.graph:
                continue  # merged away earlier: XLA's stale pointer has no users
            if node.opcode == "constant" or is_custom_fusion(node):
                continue
            changed |= self.fuse_siblings(node)
            changed |= self.fuse_producer_into_consumer(node)
        return changed

    # -- siblings ---------------------------------------------------------------------------
    def _is_sibling_candidate(self, node: Node) -> bool:
        if not node.users or not is_fusible_as_multi_output_fusion_root(node, self.cfg):
            return False
        if is_nestable_variadic_reduction(node, self.cfg):
            return False
        return not is_multi_output_fusion(node) or all(u.opcode == "get-tuple-element" for u in node.users)

    def fuse_siblings(self, parent: Node) -> bool:
        if parent.shape.is_effective_scalar:
            return False  # IsProfitableOperand: a scalar is cheap to read twice
        users = parent.users
        if len(users) < 2 or not any(u.opcode == "fusion" for u in users):
            return False  # no pair can start: the first sibling of a pair is a fusion
        siblings = [u for u in users if self._is_sibling_candidate(u)]
        siblings.sort(key=lambda n: -priority(n))  # stable, as std::stable_sort
        changed = False
        for i in range(len(siblings)):
            if i >= len(siblings):
                break
            first = siblings[i]
            if first.opcode != "fusion":
                continue
            j = i + 1
            while j < len(siblings):
                second = siblings[j]
                outcome = self.ctx.decide(self.sibling_rules, MofCandidate(
                    first, second, self.ctx, parent=parent, reachable=self.reachable, pair=(first, second),
                    budget=(first, second, False), model=self.model))
                if not outcome.allowed:
                    j += 1
                    continue
                self.model.analysis.revisit(first)
                self.model.analysis.revisit(second)
                was_input = second.opcode == "fusion" and second.fusion_kind == "kInput"
                fuse_into_multi_output(first, second)
                if was_input:
                    first.fusion_kind = "kInput"
                if second in self.graph and not second.users:
                    remove_instruction(self.graph, second)
                self.model.analysis.revisit(first)
                del siblings[j]
                self.reachable.fused(first)
                changed = True
        return changed

    # -- producer into consumer -------------------------------------------------------------
    def fuse_producer_into_consumer(self, producer: Node) -> bool:
        users = list(producer.users)
        if not users or producer.opcode == "parameter":
            return False
        if len(users) == 1 and not is_multi_output_fusion(users[0]):
            return False  # already decided by instruction fusion / the fusion merger
        eligible = evaluate(PRODUCER_RULES, Candidate(producer, users[0], self.ctx), self.ctx.relaxed)
        if not eligible.allowed:
            for user in users:
                self.ctx.record(decision_from(self.ctx.pass_name, producer, user, eligible))
            return False
        outcomes: list[tuple[Node, Outcome]] = []
        for consumer in users:
            outcome = evaluate(self.consumer_rules, MofCandidate(
                producer, consumer, self.ctx, reachable=self.reachable, pair=(consumer, producer),
                budget=(producer, consumer, False), model=self.model), self.ctx.relaxed)
            relaxed = tuple(dict.fromkeys(eligible.relaxed + outcome.relaxed))
            outcomes.append((consumer, Outcome(outcome.blocked_by, outcome.facts, relaxed)))
        passing = [c for c, o in outcomes if o.allowed]
        chosen = max(passing, key=priority) if passing else None  # first of the highest priority
        for consumer, outcome in outcomes:
            if outcome.allowed and consumer is not chosen:
                outcome = evaluate(_OTHER_CONSUMER_PREFERRED,
                                   MofCandidate(producer, consumer, self.ctx, reachable=self.reachable,
                                                model=self.model, chosen=chosen))
            self.ctx.record(decision_from(self.ctx.pass_name, producer, consumer, outcome))
        if chosen is None:
            return False
        self.model.analysis.revisit(producer)
        self.model.analysis.revisit(chosen)
        target = chosen
        if target.opcode != "fusion":
            target = create_fusion(chosen, choose_fusion_kind(producer, chosen, self.cfg))
        fuse_into_multi_output(target, producer)
        if producer in self.graph and producer.is_dead:
            remove_instruction(self.graph, producer)
        self.model.analysis.revisit(target)
        self.reachable.fused(target)
        return True
