"""The legacy XLA:GPU fusion pipeline (XLA 76da7301, jaxlib 0.4.35 with
`xla_gpu_enable_priority_fusion=false`): the pipeline of the paper (docs/xla/legacy-gpu-pipeline.md
§1.2).  Two pass lists, each run once, in this order:

    "fusion":             variadic-op-splitter, fusion (no duplication), fusion (duplication),
                          fusion_merger, cse (fusion computations only), dce, multi_output_fusion,
                          cse, dce
    "horizontal fusion":  horizontal_loop_fusion, horizontal_input_fusion, cse, dce

Once, not to a fixed point: XLA builds both lists as HloPassFix<HloPassPipeline>, but at this
commit FusionPipeline() and HorizontalFusionPipeline() return them by value as a plain
HloPassPipeline, and the copy slices the fixed-point loop off.  jax 0.4.35 shows it: with
TF_CPP_VMODULE its compile runs GpuInstructionFusion twice and FusionMerger once, and a fusion
the merger makes out of a bare reduction keeps the reduction's init constant outside (a second
iteration would fuse it in; real dumps never do).  The XLA the paper studied (gpu_compiler.cc
of 2022) ran its HloPassFix directly and did iterate; this replay follows jax 0.4.35.

Each entry of the list (hlofuse/passes/pipelines.py) is one pass by its dump-file name, so
`--passes` can pick them.  The two GpuInstructionFusion objects live for the whole replay (their
operand-reuse caches outlive a pass run, as XLA's pass objects do).
"""

from __future__ import annotations

from dataclasses import replace

from ..graph import Node
from ..pipeline import Context, Pass, decision_from
from . import fusion_merger, multi_output_fusion
from .gpu_instruction_fusion import make_passes


def fusion_pass(index: int):
    """The replay's `index`-th GpuInstructionFusion (0: without duplication, 1: with), made once
    per replay."""

    def run(program, ctx: Context) -> bool:
        instances = ctx.legacy_instruction_fusion
        if instances is None:
            instances = ctx.legacy_instruction_fusion = make_passes()
        return instances[index].run(program, ctx)

    return run


class PassList:
    """Passes XLA runs as one HloPassPipeline.  Each is a pipeline entry of its own; after the
    last one the user selected, a pair decided by both instruction-fusion runs (both are called
    `fusion`) keeps only its last Decision: one per pair and pass name."""

    def __init__(self, key: str, stages: list[Pass]):
        self.key = key
        self.stages = stages

    def entries(self) -> list[Pass]:
        return [replace(stage, run=self._entry(i)) for i, stage in enumerate(self.stages)]

    def _entry(self, index: int):
        def run(program, ctx: Context) -> bool:
            first = ctx.pass_list_starts.setdefault(self.key, len(ctx.decisions))
            changed = bool(self.stages[index].run(program, ctx))
            chosen = ctx.options.passes
            selected = [i for i, stage in enumerate(self.stages) if chosen is None or stage.name in chosen]
            if selected and index == selected[-1]:
                keep_last_decisions(ctx, first)
            return changed

        return run


def keep_last_decisions(ctx: Context, first: int = 0) -> None:
    """A pair reconsidered by a later pass of the same name keeps only its last Decision (one
    per pair).  Only decisions from `first` on are looked at (the list's own: lists share no
    pass)."""
    seen: set[tuple] = set()
    kept: list = []
    for d in reversed(ctx.decisions[first:]):  # the last of each pair is the first met backwards
        if d is not None:
            key = (d.pass_name, d.computation, d.producer, d.consumer)
            if key in seen:
                continue
            seen.add(key)
        kept.append(d)
    kept.reverse()
    ctx.decisions[first:] = kept


# ------------------------------------------------------------------------------------------
# Why two kernels of a fused module are apart
# ------------------------------------------------------------------------------------------


def explain_boundary(producer: Node, consumer: Node, ctx: Context):
    """The rule that keeps `producer` (a kernel's output) out of `consumer`, asked as the pass
    that would have fused them asks it: FusionMerger for a loop fusion producer (merging into
    all users), MultiOutputFusion after it, GpuInstructionFusion for an unfused producer.
    None when the rules find no objection."""
    from ..cost.legacy import LegacyPerformanceModel
    from ..gpu import gpu_config
    from ..rules import Candidate, Outcome, evaluate
    from ..rules.candidates import MofCandidate
    from ..rules.multi_output_fusion import PRODUCER_RULES, consumer_rules
    from .gpu_instruction_fusion import GpuInstructionFusion
    from .instruction_fusion import FusionRun

    cfg = gpu_config(ctx)
    model = LegacyPerformanceModel(cfg)
    if producer.opcode == "fusion" and producer.users:
        outcome, _ = fusion_merger.should_merge(producer, list(producer.users), ctx, model)
        if not outcome.allowed:
            return decision_from("fusion_merger", producer, consumer, outcome)
    if producer.opcode != "fusion" and any(op is producer for op in consumer.operands):
        instance = GpuInstructionFusion(may_duplicate=True)
        instance.policy.cfg = cfg
        run = FusionRun(instance, consumer.graph.program, ctx)
        run.graph = consumer.graph
        outcome = instance.policy.should_fuse(run, consumer, consumer.operand_index(producer))
        if not outcome.allowed:
            return decision_from("fusion", producer, consumer, outcome)
    reach = multi_output_fusion.Reachability(consumer.graph)
    eligible = evaluate(PRODUCER_RULES, Candidate(producer, consumer, ctx), ctx.relaxed)
    if not eligible.allowed:
        return decision_from("multi_output_fusion", producer, consumer, eligible)
    outcome = evaluate(consumer_rules(), MofCandidate(producer, consumer, ctx, reachable=reach, model=model,
                                                      pair=(consumer, producer), budget=(producer, consumer, False)),
                       ctx.relaxed)
    if not outcome.allowed:
        return decision_from("multi_output_fusion", producer, consumer,
                             Outcome(outcome.blocked_by, outcome.facts, outcome.relaxed))
    return None
