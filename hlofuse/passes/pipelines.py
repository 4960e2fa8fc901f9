"""Every fusion pipeline hlofuse replays, written out as the passes XLA runs, in XLA's order.

Each entry is one pass by the name XLA gives it in dump file names (`--passes` selects by these
names; a pass XLA runs twice is listed twice), with why XLA runs it there and the XLA source it
mirrors.  `hlofuse.pipeline.get_pipeline` reads `PIPELINES`; `hlofuse.pipeline.replay` runs the
entries in order.  Paths are openxla/xla paths at the commit each pipeline names.
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping

from ..pipeline import Pass, PipelineSpec

# ------------------------------------------------------------------------------------------
# 1. XLA:GPU legacy (XLA 76da7301, jaxlib 0.4.35 with xla_gpu_enable_priority_fusion=false):
#    gpu_compiler.cc RunFusionPasses runs fusion_pipeline.cc's FusionPipeline and
#    HorizontalFusionPipeline, each once (docs/xla/legacy-gpu-pipeline.md §1.2)
# ------------------------------------------------------------------------------------------

_CSE_WHY = "dedups inside fused bodies (changes user counts the next pass reads)"
_CSE_XLA = "HloCSE(is_layout_sensitive=true, only_fusion_computations=true)"
_DCE_XLA = "HloDCE"


def _legacy_fusion():
    """FusionPipeline: one HloPassPipeline (one Decision per pair across its two `fusion` runs)."""
    from . import cleanup, fusion_merger, legacy, multi_output_fusion

    return legacy.PassList("legacy-fusion-pipeline", [
        Pass("variadic-op-splitter", cleanup.split_variadic_ops,
             "splits concatenates of more than 128 operands so each fits one kernel's parameters",
             "xla/service/gpu/transforms/variadic_op_splitter.cc VariadicOpSplitter"),
        Pass("fusion", legacy.fusion_pass(0),
             "vertical fusion without duplicating a producer with other users",
             "xla/service/gpu/transforms/instruction_fusion.cc GpuInstructionFusion(may_duplicate=false)"),
        Pass("fusion", legacy.fusion_pass(1),
             "vertical fusion again, now duplicating cheap producers into each user",
             "xla/service/gpu/transforms/instruction_fusion.cc GpuInstructionFusion(may_duplicate=true)"),
        Pass("fusion_merger", fusion_merger.run,
             "merges a loop fusion into all its users when the cost model says it pays",
             "xla/service/gpu/transforms/fusion_merger.cc FusionMerger"),
        Pass("cse", cleanup.cse_fusion_computations, _CSE_WHY, _CSE_XLA),
        Pass("dce", cleanup.dce, "drops what fusion left dead", _DCE_XLA),
        Pass("multi_output_fusion", multi_output_fusion.run,
             "sibling and producer-consumer multi-output fusion (the 2024 cost model)",
             "xla/service/gpu/transforms/multi_output_fusion.cc MultiOutputFusion"),
        Pass("cse", cleanup.cse_fusion_computations, _CSE_WHY, _CSE_XLA),
        Pass("dce", cleanup.dce, "drops what multi-output fusion left dead", _DCE_XLA),
    ])


def _legacy_horizontal():
    """HorizontalFusionPipeline."""
    from . import cleanup, horizontal_fusion, legacy

    return legacy.PassList("legacy-horizontal-pipeline", [
        Pass("horizontal_loop_fusion", horizontal_fusion.run_loop,
             "puts small independent loop kernels side by side in one launch",
             "xla/service/gpu/transforms/horizontal_loop_fusion.cc HorizontalLoopFusion"),
        Pass("horizontal_input_fusion", horizontal_fusion.run_input,
             "puts independent reduction kernels of one consumer into one multi-output kernel",
             "xla/service/gpu/transforms/horizontal_input_fusion.cc HorizontalInputFusion"),
        Pass("cse", cleanup.cse_fusion_computations, _CSE_WHY, _CSE_XLA),
        Pass("dce", cleanup.dce, "drops what horizontal fusion left dead", _DCE_XLA),
    ])


def _legacy() -> PipelineSpec:
    from . import legacy

    return PipelineSpec(
        "gpu", "legacy", tuple(_built("LEGACY_FUSION").entries() + _built("LEGACY_HORIZONTAL").entries()),
        "XLA:GPU's fusion passes before priority fusion (XLA 76da7301, jaxlib 0.4.35 with "
        "xla_gpu_enable_priority_fusion=false): instruction fusion twice, fusion merger, multi-output "
        "fusion, then horizontal loop and input fusion, each list once — the pipeline of the paper",
        explain_boundary=legacy.explain_boundary,
    )


# ------------------------------------------------------------------------------------------
# 2. XLA:GPU priority (XLA 5a9e73cb, jaxlib 0.10.2): fusion_pipeline.cc FusionPipeline
#    (docs/xla/priority-fusion.md §1; no horizontal fusion follows at this commit)
# ------------------------------------------------------------------------------------------

def _priority() -> PipelineSpec:
    from . import cleanup, priority_fusion

    return PipelineSpec(
        "gpu", "priority", (
            Pass("variadic-op-splitter", cleanup.split_variadic_ops,
                 "splits concatenates of more than 128 operands so each fits one kernel's parameters",
                 "xla/backends/gpu/transforms/variadic_op_splitter.cc VariadicOpSplitter"),
            Pass("sort-iota-fusion", priority_fusion.sort_iota_fusion,
                 "wraps a sort and its iota operands into a kCustom fusion no later pass changes",
                 "xla/backends/gpu/transforms/sort_iota_fusion.cc SortIotaFusion"),
            Pass("priority-fusion", priority_fusion.priority_fusion,
                 "cost-model-driven vertical fusion, most profitable producer first",
                 "xla/backends/gpu/transforms/priority_fusion.cc PriorityFusion"),
            Pass("cse", cleanup.cse_fusion_computations, _CSE_WHY, _CSE_XLA),
            Pass("dce", cleanup.dce, "drops what priority fusion left dead", _DCE_XLA),
            Pass("multi_output_fusion", priority_fusion.multi_output_fusion,
                 "sibling and producer-consumer multi-output fusion (the 2026 cost model)",
                 "xla/backends/gpu/transforms/multi_output_fusion.cc MultiOutputFusion"),
            Pass("cse", cleanup.cse_fusion_computations, _CSE_WHY, _CSE_XLA),
            Pass("dce", cleanup.dce, "drops what multi-output fusion left dead", _DCE_XLA),
        ),
        "XLA:GPU of jaxlib 0.10.2 (XLA 5a9e73cb): cost-model-driven PriorityFusion, then MultiOutputFusion "
        "(docs/xla/priority-fusion.md)",
        explain_boundary=priority_fusion.explain_boundary,
    )


# ------------------------------------------------------------------------------------------
# 3. XLA:CPU (XLA 5a9e73cb, jaxlib 0.10.2): cpu_compiler.cc RunHloPassesAfterLayoutAssn
#    (docs/xla/cpu-fusion.md §1.1)
# ------------------------------------------------------------------------------------------

def _cpu() -> PipelineSpec:
    from . import cpu

    return PipelineSpec(
        "cpu", "cpu", (
            Pass("dot-library-rewriter", cpu.library_pass,
                 "makes YNNPACK library fusions of dots, convolutions and reductions before fusion (replayed only "
                 "with library_fusion=True on an input without them)",
                 "xla/backends/cpu/transforms/library_rewriter.cc LibraryRewriter"),
            Pass("fusion", cpu.fusion_pass,
                 "vertical fusion with duplication (no CPU multi-output fusion by default)",
                 "xla/service/cpu/cpu_instruction_fusion.cc CpuInstructionFusion(may_duplicate=true)"),
            Pass("fusion-wrapper", cpu.fusion_wrapper_pass,
                 "wraps each remaining op the fusion emitters handle in a one-instruction kLoop fusion",
                 "xla/service/cpu/fusion_wrapper.cc FusionWrapper"),
        ),
        "XLA:CPU (jaxlib 0.10.2): library (YNNPACK) fusions kept as the input has them (dot-library-rewriter "
        "replayed only with library_fusion=True), then fusion (CpuInstructionFusion), then fusion-wrapper",
        explain_boundary=cpu.explain_boundary,
    )


#: The module-level names of the lists and pipelines, each built on its first access.
_NAMED: dict[str, Callable[[], object]] = {
    "LEGACY_FUSION": _legacy_fusion, "LEGACY_HORIZONTAL": _legacy_horizontal,
    "LEGACY": _legacy, "PRIORITY": _priority, "CPU": _cpu}
_built_names: dict[str, object] = {}

#: (backend, pipeline name) → the name of the pipeline.
_PIPELINE_NAMES: dict[tuple[str, str], str] = {
    ("gpu", "legacy"): "LEGACY", ("gpu", "priority"): "PRIORITY", ("cpu", "cpu"): "CPU"}


def _built(name: str):
    """The list or pipeline `name`, built once (one object however it is reached)."""
    found = _built_names.get(name)
    if found is None:
        found = _built_names[name] = _NAMED[name]()
    return found


def __getattr__(name: str):
    if name in _NAMED:
        return _built(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Pipelines(Mapping[tuple[str, str], PipelineSpec]):
    """Read-only (backend, pipeline name) → pipeline; listing the keys imports no pass module,
    looking one up builds that pipeline alone."""

    def __getitem__(self, key: tuple[str, str]) -> PipelineSpec:
        return _built(_PIPELINE_NAMES[key])  # type: ignore[return-value]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(_PIPELINE_NAMES)

    def __len__(self) -> int:
        return len(_PIPELINE_NAMES)

    def __contains__(self, key: object) -> bool:
        return key in _PIPELINE_NAMES


#: (backend, pipeline name) → the pipeline.
PIPELINES: Mapping[tuple[str, str], PipelineSpec] = _Pipelines()
