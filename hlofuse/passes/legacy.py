"""The legacy XLA:GPU fusion pipeline (XLA 76da7301, jaxlib 0.4.35 with
`xla_gpu_enable_priority_fusion=false`): the pipeline of the paper (docs/xla/legacy-gpu-pipeline.md
§1.2).

    HloPassFix<HloPassPipeline>("fusion"):            repeated until nothing changes (25 at most)
        variadic-op-splitter, fusion (no duplication), fusion (duplication), fusion_merger,
        cse (fusion computations only), dce, multi_output_fusion, cse, dce
    HloPassFix<HloPassPipeline>("horizontal fusion"):
        horizontal_loop_fusion, horizontal_input_fusion, cse, dce

Each entry of the registered list is one pass by its dump-file name, so `--passes` can pick
them; the last selected pass of a fixed-point group re-runs the group's selected passes until
an iteration changes nothing, as HloPassFix does.  The two GpuInstructionFusion objects live
for the whole replay (their operand-reuse caches outlive the iterations, as in XLA).
"""

from __future__ import annotations

from ..graph import Node, Program
from ..pipeline import Context, decision_from, register_pipeline
from . import cleanup, fusion_merger, horizontal_fusion, multi_output_fusion
from .gpu_instruction_fusion import make_passes

#: HloPassFix's iteration limit.
MAX_ITERATIONS = 25


def _instruction_fusion(index: int):
    def run(program: Program, ctx: Context) -> bool:
        instances = ctx.cache.get("legacy-instruction-fusion")
        if instances is None:
            instances = ctx.cache["legacy-instruction-fusion"] = make_passes()
        return instances[index].run(program, ctx)

    return run


class FixedPointGroup:
    """Passes XLA runs inside one HloPassFix<HloPassPipeline>: each is registered on its own,
    and the last one the user selected loops the selected ones until nothing changes."""

    def __init__(self, key: str, stages: list[tuple[str, callable]]):
        self.key = key
        self.stages = stages

    def entries(self) -> list[tuple[str, callable]]:
        return [(name, self._entry(i)) for i, (name, _) in enumerate(self.stages)]

    def _selected(self, ctx: Context) -> list[int]:
        chosen = ctx.options.passes
        return [i for i, (name, _) in enumerate(self.stages) if chosen is None or name in chosen]

    def _entry(self, index: int):
        def run(program: Program, ctx: Context) -> bool:
            state = ctx.cache.setdefault(self.key, {"changed": False, "any": False, "first": len(ctx.decisions)})
            changed = self._run_stage(index, program, ctx)
            state["changed"] |= changed
            state["any"] |= changed
            selected = self._selected(ctx)
            if selected and index == selected[-1]:
                iteration = 1
                while state["changed"] and iteration < MAX_ITERATIONS:
                    state["changed"] = False
                    iteration += 1
                    for i in selected:
                        step = self._run_stage(i, program, ctx)
                        state["changed"] |= step
                        state["any"] |= step
                    ctx.cache[self.key + "-iterations"] = iteration
                keep_last_decisions(ctx, state["first"])
            return changed

        return run

    def _run_stage(self, index: int, program: Program, ctx: Context) -> bool:
        """Run one stage, unless its last run left the program exactly as it found it and
        nothing changed since: the passes are deterministic, so XLA's rerun would change
        nothing and make the same decisions again (those of the last run are kept)."""
        name, fn = self.stages[index]
        ctx.pass_name = name
        idle = ctx.cache.setdefault(self.key + "-idle", {})
        before = program_state(program)
        if idle.get(index) == before:
            return False
        changed = bool(fn(program, ctx))
        after = program_state(program)
        idle[index] = after if not changed and after == before else None
        return changed


def program_state(program: Program) -> int:
    """The program's edit count: equal counts mean an unchanged program (every edit of nodes,
    edges, roots and attributes bumps its computation's version, and so the count)."""
    return program.edits


def keep_last_decisions(ctx: Context, first: int = 0) -> None:
    """A pair reconsidered in a later iteration keeps only its last Decision (one per pair).
    Only decisions from `first` on are looked at (the group's own: groups share no pass)."""
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


FUSION = FixedPointGroup("legacy-fusion-pipeline", [
    ("variadic-op-splitter", cleanup.split_variadic_ops),
    ("fusion", _instruction_fusion(0)),
    ("fusion", _instruction_fusion(1)),
    ("fusion_merger", fusion_merger.run),
    ("cse", cleanup.cse_fusion_computations),
    ("dce", cleanup.dce),
    ("multi_output_fusion", multi_output_fusion.run),
    ("cse", cleanup.cse_fusion_computations),
    ("dce", cleanup.dce),
])

HORIZONTAL = FixedPointGroup("legacy-horizontal-pipeline", [
    ("horizontal_loop_fusion", horizontal_fusion.run_loop),
    ("horizontal_input_fusion", horizontal_fusion.run_input),
    ("cse", cleanup.cse_fusion_computations),
    ("dce", cleanup.dce),
])


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
    extra = {"reachable": reach, "pair": (consumer, producer), "budget": (producer, consumer, False),
             "model": model}
    outcome = evaluate(consumer_rules(), Candidate(producer, consumer, ctx, extra), ctx.relaxed)
    if not outcome.allowed:
        return decision_from("multi_output_fusion", producer, consumer,
                             Outcome(outcome.blocked_by, outcome.facts, outcome.relaxed))
    return None


register_pipeline(
    "gpu", "legacy", FUSION.entries() + HORIZONTAL.entries(),
    "XLA:GPU's fusion passes before priority fusion (XLA 76da7301, jaxlib 0.4.35 with "
    "xla_gpu_enable_priority_fusion=false): instruction fusion twice, fusion merger, multi-output "
    "fusion to a fixed point, then horizontal loop and input fusion — the pipeline of the paper",
    explain_boundary=explain_boundary,
)
