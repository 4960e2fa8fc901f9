"""The replay context (pipeline.Context): what passes hand to each other is a typed field of
the context, set by the pass that owns it, and the explainers of a fused module's boundaries
belong to the graph or program they explain."""

from __future__ import annotations

import dataclasses

import hlofuse
from hlofuse.gpu import gpu_config
from hlofuse.gpu import config as gpu_configs
from hlofuse.gpu.config import GpuConfig
from hlofuse.graph import Program
from hlofuse.pipeline import Context, Options, get_pipeline, make_context

# an exponential with two users: instruction fusion duplicates it, priority fusion fuses it
# into both, and multi-output fusion sees the two kernels as siblings
TEXT = """HloModule m
ENTRY e {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  ex = f32[1024] exponential(x)
  a = f32[1024] add(ex, y)
  n = f32[1024] negate(ex)
  ROOT t = (f32[1024], f32[1024]) tuple(a, n)
}"""


def _run_pipeline(options: Options) -> tuple[Program, Context]:
    """Every pass of the options' pipeline over TEXT, with the context kept for inspection."""
    spec = get_pipeline(options.backend, options.pipeline)
    program = Program.from_module(hlofuse.loads(TEXT))
    ctx = make_context(options)
    ctx.pipeline = spec.name
    for name, fn in spec.passes:
        ctx.pass_name = name
        fn(program, ctx)
    return program, ctx


def test_the_context_has_no_untyped_cache():
    names = {f.name for f in dataclasses.fields(Context)}
    assert "cache" not in names
    assert {"gpu_config", "priority_fusion_log", "mof_model", "legacy_performance_model",
            "legacy_instruction_fusion", "pass_list_starts", "fusion_decision_slots"} <= names


def test_priority_passes_fill_their_fields():
    _, ctx = _run_pipeline(Options(backend="gpu", pipeline="priority"))
    assert isinstance(ctx.gpu_config, GpuConfig) and ctx.gpu_config.era == "2026"
    assert ctx.priority_fusion_log is not None
    assert any(step.producer == "ex" for step in ctx.priority_fusion_log.fusions)
    assert ctx.mof_model is not None  # the 2026 model multi-output fusion asked
    assert ctx.legacy_instruction_fusion is None and ctx.legacy_performance_model is None


def test_legacy_passes_fill_their_fields():
    _, ctx = _run_pipeline(Options(backend="gpu", pipeline="legacy"))
    assert ctx.gpu_config.era != "2026"
    first, second = ctx.legacy_instruction_fusion
    assert (first.policy.may_duplicate, second.policy.may_duplicate) == (False, True)
    assert ctx.legacy_performance_model is not None and ctx.legacy_performance_model.cfg == ctx.gpu_config
    assert set(ctx.pass_list_starts) == {"legacy-fusion-pipeline", "legacy-horizontal-pipeline"}
    assert ctx.pass_list_starts["legacy-fusion-pipeline"] == 0
    assert "fusion" in ctx.fusion_decision_slots
    assert ctx.priority_fusion_log is None and ctx.mof_model is None


def test_a_callers_gpu_config_is_the_one_passes_read():
    ctx = make_context(Options(backend="gpu", pipeline="priority"))
    mine = GpuConfig(gpu_configs.test_device(), era="2026")
    ctx.gpu_config = mine
    assert gpu_config(ctx) is mine
    built = gpu_config(make_context(Options(backend="gpu", pipeline="priority")))
    assert built is not mine and built.device != mine.device  # the A6000 of XLA's tests differs


FUSED = """HloModule m
fused {
  p = f32[1024] parameter(0)
  ROOT e = f32[1024] exponential(p)
}
ENTRY e {
  x = f32[1024] parameter(0)
  f = f32[1024] fusion(x), kind=kLoop, calls=fused
  ROOT t = (f32[1024], f32[1024]) tuple(f, x)
}"""


def test_priority_explainer_belongs_to_the_graph_and_its_context():
    program = Program.from_module(hlofuse.loads(FUSED))
    spec = get_pipeline("gpu", "priority")
    ctx = make_context(Options(backend="gpu", pipeline="priority"))
    graph = program.entry
    assert graph.boundary_explainer is None
    assert spec.explain_boundary(graph["f"], graph["t"], ctx).rule == "PF-CONSUMER-NOT-FUSIBLE"
    made = graph.boundary_explainer
    assert made is not None and made.ctx is ctx
    spec.explain_boundary(graph["f"], graph["t"], ctx)
    assert graph.boundary_explainer is made  # asked again: the same replay answers
    other = make_context(Options(backend="gpu", pipeline="priority"))
    assert spec.explain_boundary(graph["f"], graph["t"], other).rule == "PF-CONSUMER-NOT-FUSIBLE"
    assert graph.boundary_explainer is not made and graph.boundary_explainer.ctx is other
    program.dispose()
    assert graph.boundary_explainer is None


def test_cpu_explainer_belongs_to_the_program_and_its_context():
    program = Program.from_module(hlofuse.loads(FUSED))
    spec = get_pipeline("cpu", None)
    ctx = make_context(Options(backend="cpu"))
    spec.explain_boundary(program.entry["f"], program.entry["t"], ctx)
    made = program.boundary_explainer
    assert made is not None and made.asked_by is ctx
    spec.explain_boundary(program.entry["f"], program.entry["t"], ctx)
    assert program.boundary_explainer is made
    other = make_context(Options(backend="cpu"))
    spec.explain_boundary(program.entry["f"], program.entry["t"], other)
    assert program.boundary_explainer is not made and program.boundary_explainer.asked_by is other
    program.dispose()
    assert program.boundary_explainer is None
