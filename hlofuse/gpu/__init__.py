"""XLA:GPU's fusion analyses, as pure functions over `hlofuse.graph` nodes.

These are the predicates XLA:GPU's fusion passes ask before they fuse two instructions
(xla/service/gpu/gpu_fusible.cc, ir_emission_utils.cc, reduction_utils.cc, hlo_fusion_analysis.cc
and the HloInstruction properties they build on).  Rules (hlofuse/rules/) turn them into
decisions with ids and reasons; passes (hlofuse/passes/) decide the order they are asked in.

One job per module:
    config.py      GpuConfig: the device and the XLA era an analysis answers for
    shapes.py      layout facts: transpose/reshape bitcasts, subshape counts, byte sizes
    properties.py  one instruction: IsFusible, elementwise, side effects, IsExpensive, operand reuse
    reductions.py  contiguous ("unnested") reductions, race freedom, real reduction heroes
    transposes.py  tiled transposes, physically transposing ops, minor-dimension transposes
    heroes.py      FindNonTrivialHero, real heroes of multi-output fusions, MOF shape compatibility
    fusible.py     loop/input fusibility as producer or consumer, fusion kinds, fusible computations
    heavy.py       IsExpensiveToRepeat, reads-elements-multiple-times, CreatesHeavyComputation
    budget.py      FusionFitsInBudget (shared memory, unnested reductions, 96 operands+outputs)
    in_place.py    in-place input/output pairs and InstructionFusion::ShouldFuseInPlaceOp
    emitter.py     the emitter a fusion is compiled with (loop, reduction, transpose, ...)
    triton_support.py  IsTritonSupportedInstruction: what Triton's emitter can generate

Two XLA eras are supported through `GpuConfig.era`: "2024" is XLA 76da7301 (jaxlib 0.4.35,
the legacy pipeline, docs/xla/legacy-gpu-pipeline.md) and "2026" is XLA 5a9e73cb (jaxlib
0.10.2, priority fusion, docs/xla/priority-fusion.md).  Where the two differ the function says
so in its docstring and branches on the era.
"""

from .config import ERA_LEGACY, ERA_PRIORITY, GpuConfig, gpu_config, test_device

__all__ = ["ERA_LEGACY", "ERA_PRIORITY", "GpuConfig", "gpu_config", "test_device"]
