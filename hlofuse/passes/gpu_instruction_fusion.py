"""GpuInstructionFusion (xla/service/gpu/transforms/instruction_fusion.cc at XLA 76da7301): the
GPU policy on the generic InstructionFusion driver (passes/instruction_fusion.py).

What the GPU policy changes (docs/xla/legacy-gpu-pipeline.md §2):
* computations: GetFusibleComputations (entry, while bodies and conditions, conditional
  branches; never reducers or call bodies); the do-not-duplicate set is still computed for
  the others, as XLA does;
* ShouldFuse: the GPU checks around the generic ones (rules/gpu_instruction_fusion.py);
* IsExpensive: divide, sqrt, rsqrt and exp are cheap on f32 and f16;
* kinds: kInput when either side is an input-fusible reduction, scatter or tiled transpose;
* FuseInstruction keeps FusionNodeIndexingEvaluation up to date incrementally, as XLA does,
  so the code-duplication check stays linear in the fusion's size.

The legacy pipeline runs two instances, `may_duplicate=false` then `true` (`make_passes`), each
with its own operand-reuse cache, as XLA's two pass objects have.
"""

from __future__ import annotations

from ..gpu import gpu_config
from ..gpu.config import GpuConfig
from ..gpu.fusible import choose_fusion_kind, fusible_computations
from ..gpu.properties import is_expensive_gpu
from ..rules.gpu_instruction_fusion import should_fuse_rules
from .instruction_fusion import FusionPolicy, InstructionFusion
from ..fusion_primitives import fuse_instruction


class GpuFusionPolicy(FusionPolicy):
    """GpuInstructionFusion's overrides of InstructionFusion."""

    name = "fusion"

    def __init__(self, may_duplicate: bool):
        super().__init__(may_duplicate)
        self.cfg: GpuConfig | None = None  # set by start_run

    def computations(self, program):
        fusible = {g.name for g in fusible_computations(program, self.cfg)}
        return [(graph, graph.name in fusible) for graph in program.non_fusion_graphs()]

    def start_run(self, run) -> None:
        self.cfg = gpu_config(run.ctx)
        run.indexing_evaluations.clear()  # fusion_node_evaluations_.clear() at every Run

    def should_fuse(self, run, consumer, operand_index: int):
        return run.evaluate(should_fuse_rules(consumer.operands[operand_index], consumer), consumer, operand_index)

    def is_expensive(self, node) -> bool:
        return is_expensive_gpu(node)

    def choose_kind(self, producer, consumer) -> str:
        return choose_fusion_kind(producer, consumer, self.cfg)

    def fuse_instruction(self, run, fusion, producer):
        """GpuInstructionFusion::FuseInstruction: move the producer's indexing users to its
        clone inside the fusion, then update the evaluation for the clone's operands."""
        evaluation = run.indexing_evaluation(fusion)
        users = evaluation.remove_operand(producer)
        clone = fuse_instruction(fusion, producer)
        evaluation.update(clone, users)
        return clone


class GpuInstructionFusion(InstructionFusion):
    """One GpuInstructionFusion pass object (its reuse cache outlives a run)."""

    def __init__(self, may_duplicate: bool):
        super().__init__(GpuFusionPolicy(may_duplicate))

    def run(self, program, ctx) -> bool:
        self.policy.cfg = gpu_config(ctx)
        return super().run(program, ctx)


def make_passes() -> tuple[GpuInstructionFusion, GpuInstructionFusion]:
    """The two instances the legacy pipeline runs: without, then with duplication."""
    return GpuInstructionFusion(may_duplicate=False), GpuInstructionFusion(may_duplicate=True)


def run_once(program, ctx, may_duplicate: bool = True) -> bool:
    """One run of a fresh GpuInstructionFusion (XLA's unit tests construct one per test)."""
    return GpuInstructionFusion(may_duplicate).run(program, ctx)
