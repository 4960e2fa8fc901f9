"""FusionMerger (xla/service/gpu/transforms/fusion_merger.cc at XLA 76da7301): merge each loop
fusion into all of its users, or leave it alone (docs/xla/legacy-gpu-pipeline.md §5).

Traversal: every non-fusion computation; a snapshot of its post order (defs before uses);
only `fusion` instructions are producers.  Removed producers stay in the snapshot and are
skipped as XLA skips them (they have no users).  Every (producer, user) pair yields one
Decision; the producer's verdict is shared by all its users, since XLA merges all or none.
"""

from __future__ import annotations

from ..cost.legacy import LegacyPerformanceModel, shared_model
from ..gpu import gpu_config
from ..gpu.fusible import choose_fusion_kind
from ..graph import Graph, Node
from ..fusion_primitives import create_fusion, merge_fusion
from ..pipeline import Context, decision_from
from .cleanup import remove_instruction
from ..rules import Candidate, Outcome, evaluate
from ..rules.candidates import MergerCandidate
from ..rules.fusion_merger import stages


def run(program, ctx: Context) -> bool:
    changed = False
    for graph in program.non_fusion_graphs():
        changed |= merge_computation(graph, ctx)
    return changed


def merge_computation(graph: Graph, ctx: Context) -> bool:
    cfg = gpu_config(ctx)
    model: LegacyPerformanceModel | None = None
    plan = stages()  # the rule lists, built once per computation rather than per producer
    changed = False
    for producer in graph.post_order():
        if producer.opcode != "fusion" or producer not in graph or not producer.users:
            continue
        if model is None:
            model = shared_model(ctx, cfg)
        users = list(producer.users)
        outcome, _ = should_merge(producer, users, ctx, model, plan)
        for user in users:
            ctx.record(decision_from(ctx.pass_name, producer, user, outcome))
        if outcome.allowed:
            merge_into_users(producer, users, ctx, model)
            changed = True
    return changed


def should_merge(producer: Node, users: list[Node], ctx: Context, model,
                 plan: tuple | None = None) -> tuple[Outcome, Node | None]:
    """FusionInstructionMerger::ShouldFuse: the stages in XLA's order (`plan`, default
    `stages()`), first refusal wins.  One Candidate per (producer, user) pair serves every
    stage, so what its rules memoise about the pair is computed once."""
    relaxed: list[str] = []
    candidates: list[Candidate] = []
    for rule_ids, per_user in plan or stages():
        for k in range(len(users) if per_user else 1):
            if k == len(candidates):  # users are asked in order: made when first asked
                candidates.append(MergerCandidate(producer, users[k], ctx, users, model))
            cand = candidates[k]
            user = cand.consumer
            outcome = evaluate(rule_ids, cand, ctx.relaxed)
            relaxed.extend(r for r in outcome.relaxed if r not in relaxed)
            if not outcome.allowed:
                facts = dict(outcome.facts)
                facts.setdefault("user", user.name)
                return Outcome(outcome.blocked_by, facts, tuple(relaxed)), user
    return Outcome(None, {}, tuple(relaxed)), None


def merge_into_users(producer: Node, users: list[Node], ctx: Context, model) -> None:
    """FuseIntoAllUsers: wrap non-fusion users in a fusion named `fusion`, inline the producer
    into each, then delete it."""
    cfg = gpu_config(ctx)
    graph = producer.graph
    for user in users:
        model.analysis.revisit(user)
        consumer = user
        if consumer.opcode != "fusion":
            consumer = create_fusion(user, choose_fusion_kind(producer, user, cfg))
        merge_fusion(consumer, producer)
        model.analysis.revisit(consumer)
    assert not producer.users, f"{producer.name} still has users after merging"
    if not producer.is_root:
        remove_instruction(graph, producer)
    model.analysis.revisit(producer)
