"""PriorityFusion (XLA 5a9e73cb, jaxlib 0.10.2): each rule refusing and allowing, the pass's
queue and fusing behaviour, its decisions, relaxation, and its whole log against real XLA logs.

Modules are small HLO texts; the device is XLA's unit-test A6000 unless a case says otherwise
(`hlofuse.gpu.test_device()`).  The corpus cases of priority_fusion_test.cc run through
tests/conformance/."""

from __future__ import annotations

from collections import Counter

import pytest

import hlofuse
from hlofuse.decision import Verdict
from hlofuse.errors import NotRelaxable
from hlofuse.gpu import GpuConfig
from hlofuse.gpu import test_device as xla_test_device
from hlofuse.graph import Program
from hlofuse.passes.priority_fusion import priority_fusion, sort_iota_fusion
from hlofuse.pipeline import Options, get_pipeline, make_context, replay
from hlofuse.rules import REGISTRY
from hlofuse.xla_log import FusionStep, ProducerIneligible, UpdatePriority

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def run(text: str, relax=(), device=None):
    """Run PriorityFusion alone on `text`; returns (program, ctx, changed)."""
    program = Program.from_module(hlofuse.loads(text))
    ctx = make_context(Options(backend="gpu", pipeline="priority", relax=tuple(relax)))
    ctx.pipeline, ctx.pass_name = "priority", "priority-fusion"
    ctx.gpu_config = GpuConfig(device or xla_test_device(), era="2026")
    changed = priority_fusion(program, ctx)
    return program, ctx, changed


def decision(ctx, producer: str, consumer: str | None = None):
    """The one decision about `producer` (and `consumer`, when given), by name or by the input
    instructions a kernel stands for (constants fused last rename their users).  Without a
    consumer: the producer's refusal."""

    def named(name, members, wanted):
        return name == wanted or wanted in members

    found = [d for d in ctx.decisions if named(d.producer, d.producer_members, producer)
             and (consumer is None or named(d.consumer, d.consumer_members, consumer))]
    if consumer is None:
        found = [d for d in found if d.verdict == Verdict.BLOCKED] or found
    assert len(found) == 1, (producer, consumer, [(d.producer, d.consumer, d.rule) for d in ctx.decisions])
    return found[0]


def entry_opcodes(program) -> Counter:
    return Counter(n.opcode for n in program.entry.nodes())


# ------------------------------------------------------------------------------------------
# CanFuse, rule by rule
# ------------------------------------------------------------------------------------------


def test_root_producer_is_not_fused_into_later_users():
    _, ctx, changed = run("""
ENTRY e {
  p = f32[64] parameter(0)
  ROOT r = f32[64] negate(p)
  n = f32[64] exponential(r)
  t = token[] after-all()
  o = token[] outfeed(n, t)
}""")
    d = decision(ctx, "r", "n")
    assert d.verdict == Verdict.BLOCKED and d.rule == "PF-ROOT-PRODUCER"
    assert d.xla_reason == "not fusing into the output of the root instruction"


def test_custom_call_producer_and_tuple_consumer_are_not_fusible():
    program, ctx, _ = run("""
ENTRY e {
  k = u32[2] parameter(0)
  r = u32[1024] custom-call(k), custom_call_target="cu_threefry2x32_ffi", api_version=API_VERSION_TYPED_FFI
  one = u32[1024] parameter(1)
  a = u32[1024] add(r, one)
  ROOT t = (u32[1024]) tuple(a)
}""")
    p = decision(ctx, "r", "a")
    assert p.rule == "PF-PRODUCER-NOT-FUSIBLE" and p.xla_reason == "the producer is not fusible"
    assert "custom call" in p.reason
    c = decision(ctx, "a", "t")
    assert c.rule == "PF-CONSUMER-NOT-FUSIBLE" and c.xla_reason == "the consumer is not fusible"
    assert entry_opcodes(program)["custom-call"] == 1


def test_library_fusion_is_not_fusible_but_an_elementwise_chain_fuses():
    program, ctx, changed = run("""
gemm {
  a = f32[64,64] parameter(0)
  b = f32[64,64] parameter(1)
  ROOT d = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY e {
  x = f32[64,64] parameter(0)
  y = f32[64,64] parameter(1)
  n = f32[64,64] negate(x)
  g = f32[64,64] fusion(n, y), kind=kCustom, calls=gemm, backend_config={"fusion_backend_config":{"kind":"__cublas"}}
  ROOT e = f32[64,64] exponential(g)
}""")
    assert decision(ctx, "n", "g").rule == "PF-CONSUMER-NOT-FUSIBLE"
    assert decision(ctx, "g", "e").rule == "PF-PRODUCER-NOT-FUSIBLE"


def test_bitcast_is_not_fused_into_a_bitcast():
    _, ctx, _ = run("""
ENTRY e {
  p = f32[8,4] parameter(0)
  b1 = f32[32] bitcast(p)
  b2 = f32[4,8] bitcast(b1)
  ROOT t = (f32[4,8]) tuple(b2)
}""")
    d = decision(ctx, "b1", "b2")
    assert d.rule == "PF-BITCAST-CONSUMER" and d.xla_reason == "not fusing into a single bitcast as consumer"


def test_scatter_in_place_operand_is_not_fused():
    program, ctx, _ = run(ADD + """
ENTRY e {
  p0 = f32[100,10] parameter(0)
  p1 = s32[10,1] parameter(1)
  p2 = f32[10,10] parameter(2)
  a = f32[100,10] add(p0, p0)
  ROOT s = f32[100,10] scatter(a, p1, p2), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}""")
    d = decision(ctx, "a", "s")
    assert d.rule == "GF-SCATTER-IN-PLACE-OPERAND" and d.xla_reason == "do not fuse into the in-place operand of scatter"


def test_reduce_is_not_fused_into_a_reduce():
    program, ctx, _ = run(ADD + """
ENTRY e {
  p = f32[8,16,32,64] parameter(0)
  z = f32[] constant(0)
  r1 = f32[8,16,32] reduce(p, z), dimensions={3}, to_apply=add
  ROOT r2 = f32[8,16] reduce(r1, z), dimensions={2}, to_apply=add
}""")
    d = decision(ctx, "r1")
    assert d.rule == "PF-REDUCE-INTO-REDUCE"
    assert d.xla_reason == "both the producer and the consumer contain a reduce"
    assert d.facts["producer_ratio"] == 64 and d.facts["consumer_ratio"] == 32


def test_reduction_epilogue_that_is_not_elementwise_chain_is_refused():
    text = ADD + """
ENTRY e {
  x = f32[4096,1024] parameter(0)
  y = f32[4096] parameter(1)
  z = f32[] constant(0)
  r = f32[4096] reduce(x, z), dimensions={1}, to_apply=add
  ROOT s = f32[4096] add(r, y)
}"""
    program, ctx, changed = run(text)
    d = decision(ctx, "r", "s")
    assert d.rule == "PF-REDUCTION-TO-LOOP"
    assert d.xla_reason == "fusion into output of a reduce fusion would create a loop fusion"
    assert next(r for r in REGISTRY.values() if r.id == "PF-REDUCTION-TO-LOOP").relaxable
    # relaxed: the add joins the reduction, which the loop emitter then computes
    program, ctx, changed = run(text, relax=["PF-REDUCTION-TO-LOOP"])
    relaxed = decision(ctx, "r", "s")
    assert relaxed.verdict == Verdict.RELAXED and relaxed.relaxed == ("PF-REDUCTION-TO-LOOP",)
    assert program.entry.root.opcode == "fusion" and program.entry.root.fusion_kind == "kLoop"


def test_unary_epilogue_keeps_the_reduction_kernel():
    program, ctx, changed = run(ADD + """
ENTRY e {
  x = f32[8,4,128,512] parameter(0)
  z = f32[] constant(0)
  r = f32[8,4,128] reduce(x, z), dimensions={3}, to_apply=add
  l1 = f32[8,4,128] log(r)
  ROOT l2 = f32[8,4,128] log(l1)
}""")
    root = program.entry.root
    assert changed and root.opcode == "fusion" and root.fusion_kind == "kInput"
    assert {"r", "l1", "l2"} <= set(root.members())
    assert all(d.verdict == Verdict.FUSED for d in ctx.decisions)


def test_operand_budget_of_96_is_enforced():
    params = "\n".join(f"  p{i} = f32[4] parameter({i})" for i in range(96))
    operands = ", ".join(f"p{i}" for i in range(96))
    _, ctx, _ = run(f"""
ENTRY e {{
{params}
  q = f32[384] parameter(96)
  c = f32[384] concatenate({operands}), dimensions={{0}}
  ROOT a = f32[384] add(c, q)
}}""")
    d = decision(ctx, "c", "a")
    assert d.rule == "GF-OPERAND-BUDGET"
    assert d.xla_reason == "Number of operands and output buffers is larger than allowed budget per fusion"


def test_code_duplication_limit():
    chain = "\n".join(f"  n{i} = f32[1024] negate(n{i - 1})" for i in range(1, 5001))
    _, ctx, _ = run(f"""
producer {{
  n0 = f32[1024] parameter(0)
{chain}
  ROOT r = f32[1024] negate(n5000)
}}
consumer {{
  q = f32[1024] parameter(0)
  s1 = f32[512] slice(q), slice={{[0:512]}}
  s2 = f32[512] slice(q), slice={{[512:1024]}}
  ROOT c = f32[1024] concatenate(s1, s2), dimensions={{0}}
}}
ENTRY e {{
  p = f32[1024] parameter(0)
  f = f32[1024] fusion(p), kind=kLoop, calls=producer
  ROOT g = f32[1024] fusion(f), kind=kLoop, calls=consumer
}}""")
    d = decision(ctx, "f", "g")
    assert d.rule == "PF-CODE-DUPLICATION"
    assert d.xla_reason == "the fusion would result in an overly large code duplication"
    assert d.facts["replication"] == 2 and d.facts["merged"] > 10000


def test_in_place_update_reading_its_buffer_twice_is_refused():
    _, ctx, _ = run("""
ENTRY e {
  p = f32[64] parameter(0)
  i = s32[] parameter(1)
  a = f32[64] exponential(p)
  ROOT d = f32[64] dynamic-update-slice(a, a, i)
}""")
    d = decision(ctx, "a", "d")
    assert d.rule == "IF-INPLACE-SHARED-BUFFER"
    assert d.xla_reason.startswith("The consumer is an in-place operation")


# ------------------------------------------------------------------------------------------
# Producer-level decisions
# ------------------------------------------------------------------------------------------


def test_all_users_or_none():
    program, ctx, changed = run("""
ENTRY e {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  ex = f32[1024] exponential(x)
  a = f32[1024] add(ex, y)
  ROOT t = (f32[1024], f32[1024]) tuple(ex, a)
}""")
    d = decision(ctx, "ex", "a")
    assert d.rule == "PF-ALL-USERS" and d.facts["blocking_user"] == "t"
    assert d.xla_reason == "the consumer is not fusible"  # what XLA logs for the producer
    assert decision(ctx, "ex", "t").facts.get("logged_for_producer") is True
    # relaxed: ex is computed inside a's kernel and stays a kernel for the tuple
    program, ctx, changed = run("""
ENTRY e {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  ex = f32[1024] exponential(x)
  a = f32[1024] add(ex, y)
  ROOT t = (f32[1024], f32[1024]) tuple(ex, a)
}""", relax=["PF-ALL-USERS"])
    assert changed
    assert decision(ctx, "ex", "a").verdict == Verdict.RELAXED
    assert program.entry.get("ex") is not None


def test_producer_with_a_bitcast_user_is_duplicated_for_it():
    program, ctx, changed = run("""
ENTRY e {
  p = f16[512] parameter(0)
  a = f16[512] add(p, p)
  c = f32[512] convert(a)
  m = f32[512] multiply(c, c)
  b = s32[512] bitcast(c)
  ROOT t = (f32[512], s32[512]) tuple(m, b)
}""")
    # XLA's FuseWideningConvertIntoConsumers: two fusions and the bitcast
    assert entry_opcodes(program)["fusion"] == 2 and entry_opcodes(program)["bitcast"] == 1
    d = [x for x in ctx.decisions if x.consumer == "b"]
    assert len(d) == 1 and d[0].rule == "PF-BITCAST-USER"
    assert d[0].xla_reason == "not fusing because there are only bitcast users"


def test_misaligned_concatenate_priced_by_xlas_tuning_constant_and_relax_concat():
    text = ADD + """
ENTRY e {
  a = f32[64,1023] parameter(0)
  b = f32[64,1023] parameter(1)
  c = f32[64,2046] concatenate(a, b), dimensions={1}
  z = f32[] constant(0)
  ROOT r = f32[64] reduce(c, z), dimensions={1}, to_apply=add
}"""
    program, ctx, changed = run(text)
    d = decision(ctx, "c", "r")
    assert d.rule == "PF-CONCAT-PENALTY" and d.facts["size"] == 1023 and "400 flops" in d.reason
    program, ctx, changed = run(text, relax=["concat"])
    d = decision(ctx, "c", "r")
    assert d.verdict == Verdict.RELAXED and d.relaxed == ("PF-CONCAT-PENALTY",)
    assert program.entry.root.opcode == "fusion" and "c" in program.entry.root.members()


def test_unprofitable_recomputation_keeps_the_modelled_times():
    text = """
ENTRY e {
  x = f32[1024] parameter(0)
  y = f32[1024,4096] parameter(1)
  s = f32[1024] sine(x)
  b = f32[1024,4096] broadcast(s), dimensions={0}
  ROOT m = f32[1024,4096] multiply(b, y)
}"""
    program, ctx, changed = run(text)
    # the broadcast joins the multiply; the sine, 662 cycles per element on sm_86, would then be
    # computed 4096 times per input element
    d = decision(ctx, "s")
    assert d.rule == "PF-UNPROFITABLE" and d.xla_reason is None
    assert d.facts["fused_us"] > d.facts["unfused_us"] > 0 and "µs" in d.reason
    program, ctx, changed = run(text, relax=["cost-model"])
    d = decision(ctx, "s")
    assert d.verdict == Verdict.RELAXED and "PF-UNPROFITABLE" in d.relaxed


def test_constants_small_fused_last_large_kept():
    program, ctx, changed = run("""
ENTRY e {
  p = f32[16] parameter(0)
  big = f32[16] constant({1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16})
  one = f32[] constant(1)
  b = f32[16] broadcast(one), dimensions={}
  a = f32[16] add(p, b)
  ROOT m = f32[16] multiply(a, big)
}""")
    root = program.entry.root
    assert root.opcode == "fusion"
    assert [op.opcode for op in root.operands] == ["constant", "parameter"] or \
        sorted(op.opcode for op in root.operands) == ["constant", "parameter"]
    inside = Counter(n.opcode for n in root.fused.nodes())
    assert inside["constant"] == 1 and inside["broadcast"] == 1
    assert decision(ctx, "big").rule == "PF-LARGE-CONSTANT"
    assert decision(ctx, "one").verdict == Verdict.FUSED
    # the fused scalar stays in the graph, without users, until dce (as XLA prints it)
    assert program.entry.get("one") is not None and not program.entry["one"].users


def test_constant_into_a_tuple_is_refused():
    _, ctx, _ = run("""
ENTRY e {
  c = f32[] constant(2)
  p = f32[] parameter(0)
  ROOT t = (f32[], f32[]) tuple(c, p)
}""")
    d = decision(ctx, "c", "t")
    assert d.rule == "PF-CONSTANT-USER-NOT-FUSIBLE" and d.xla_reason == "User is not fusible"


# ------------------------------------------------------------------------------------------
# Triton (generic Triton fusions of the input)
# ------------------------------------------------------------------------------------------

_TRITON_ROW_NORM = """
reduce_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
norm {
  x = f32[256,768] parameter(0)
  z = f32[] constant(0)
  r = f32[256] reduce(x, z), dimensions={1}, to_apply=reduce_add
  b = f32[256,768] broadcast(r), dimensions={0}
  ROOT d = f32[256,768] divide(x, b)
}
"""
_TRITON_CONFIG = ('backend_config={"fusion_backend_config":{"kind":"__triton","block_level_fusion_config":'
                  '{"num_warps":"4","output_tiles":[{"sizes":["2","768"]}]}}}')


def test_elementwise_epilogue_joins_a_triton_fusion():
    program, ctx, changed = run(_TRITON_ROW_NORM + f"""
ENTRY e {{
  x = f32[256,768] parameter(0)
  t = f32[256,768] fusion(x), kind=kCustom, calls=norm, {_TRITON_CONFIG}
  ROOT e = f32[256,768] exponential(t)
}}""", device=hlofuse_device("h100_sxm"))
    root = program.entry.root
    assert changed and root.opcode == "fusion" and root.fusion_kind == "kCustom"
    assert '"__triton"' in root.attr("backend_config")
    assert decision(ctx, "t", "e").verdict == Verdict.FUSED


def test_triton_refuses_what_it_cannot_emit_and_what_it_cannot_tile():
    program, ctx, changed = run(_TRITON_ROW_NORM + f"""
ENTRY e {{
  table = f32[1024,768] parameter(0)
  ids = s32[256,1] parameter(1)
  g = f32[256,768] gather(table, ids), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}},
      index_vector_dim=1, slice_sizes={{1,768}}
  t = f32[256,768] fusion(g), kind=kCustom, calls=norm, {_TRITON_CONFIG}
  z = f32[] constant(0)
  ROOT s = f32[768] reduce(t, z), dimensions={{0}}, to_apply=reduce_add
}}""")
    unsupported = decision(ctx, "g", "t")
    assert unsupported.rule == "PF-TRITON-UNSUPPORTED" and unsupported.xla_reason == "Unsupported opcode gather"
    untileable = decision(ctx, "t")
    assert untileable.rule == "PF-TRITON-NOT-TILEABLE"
    assert untileable.xla_reason == "Fusion can not be tiled with SymbolicTileAnalysis: No valid tilings found."


# ------------------------------------------------------------------------------------------
# The pass
# ------------------------------------------------------------------------------------------


def test_every_edge_left_has_one_decision_and_fused_pairs_are_recorded():
    program, ctx, changed = run(ADD + """
ENTRY e {
  x = f32[1024,512] parameter(0)
  y = f32[1024] parameter(1)
  e1 = f32[1024,512] exponential(x)
  z = f32[] constant(0)
  r = f32[1024] reduce(e1, z), dimensions={1}, to_apply=add
  a = f32[1024] add(r, y)
  ROOT t = (f32[1024], f32[1024,512]) tuple(a, e1)
}""")
    pairs = Counter((d.producer, d.consumer) for d in ctx.decisions if d.verdict == Verdict.BLOCKED)
    assert all(n == 1 for n in pairs.values())
    for node in program.entry.nodes():
        if node.opcode in ("parameter", "tuple", "get-tuple-element"):
            continue
        for user in node.users:
            assert pairs[(node.name, user.name)] == 1, (node.name, user.name)
    assert all(d.pass_name == "priority-fusion" for d in ctx.decisions)


def test_ties_pop_the_later_instruction_first_and_names_follow_xla():
    program, ctx, changed = run("""
ENTRY e {
  p = f32[128] parameter(0)
  a = f32[128] negate(p)
  b = f32[128] negate(p)
  ROOT m = f32[128] multiply(a, b)
}""")
    fusions = ctx.priority_fusion_log.fusions
    # a and b have equal priorities: b (defined later) is fused first, creating `fusion`
    assert [(s.fusion, s.producer, s.consumer) for s in fusions] == [
        ("fusion", "b", "m"), ("fusion", "a", "fusion")]
    root = program.entry.root
    assert root.name == "fusion" and root.fused.name == "fused_computation"
    assert {n.name for n in root.fused.nodes()} >= {"m.1", "b.1", "a.1"}


def test_sort_iota_fusion_makes_a_custom_fusion():
    program = Program.from_module(hlofuse.loads("""
compare {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[64,512] parameter(0)
  i = s32[64,512] iota(), iota_dimension=1
  s = (f32[64,512], s32[64,512]) sort(x, i), dimensions={1}, to_apply=compare
  ROOT g = s32[64,512] get-tuple-element(s), index=1
}"""))
    ctx = make_context(Options(backend="gpu", pipeline="priority"))
    assert sort_iota_fusion(program, ctx)
    fusion = program.entry.root.operands[0]
    assert fusion.opcode == "fusion" and fusion.fusion_kind == "kCustom" and fusion.attr("backend_config") is None
    assert Counter(n.opcode for n in fusion.fused.nodes()) == Counter({"parameter": 1, "iota": 1, "sort": 1})
    assert program.entry.get("i") is None


def test_pipeline_is_the_gpu_default_with_xlas_pass_names():
    spec = get_pipeline("gpu", None)
    assert spec.name == "priority"
    assert [name for name, _ in spec.passes] == [
        "variadic-op-splitter", "sort-iota-fusion", "priority-fusion", "cse", "dce", "multi_output_fusion", "cse",
        "dce"]
    assert spec.explain_boundary is not None


def test_not_relaxable_rules_cannot_be_relaxed():
    with pytest.raises(NotRelaxable):
        replay(hlofuse.loads("ENTRY e {\n  ROOT p = f32[] parameter(0)\n}"),
               Options(backend="gpu", pipeline="priority", relax=("PF-CONSUMER-NOT-FUSIBLE",)))


def test_rules_document_xla_and_are_pinned():
    from hlofuse.rules import XLA_COMMITS

    pf = [r for r in REGISTRY.values() if r.id.startswith("PF-")]
    assert len(pf) >= 14
    for r in pf:
        assert r.xla.commit == XLA_COMMITS["priority"], r.id
        for heading in ("What it checks:", "Why XLA does this:", "Example:", "Relaxing:"):
            assert heading in r.doc, (r.id, heading)
    legality = {"PF-ROOT-PRODUCER", "PF-PRODUCER-NOT-FUSIBLE", "PF-CONSUMER-NOT-FUSIBLE", "PF-TRITON-UNSUPPORTED",
                "PF-TRITON-NOT-TILEABLE", "PF-CONSTANT-USER-NOT-FUSIBLE"}
    for r in pf:
        assert r.relaxable == (r.id not in legality | {"PF-NOT-RECONSIDERED"}), r.id


def test_explain_boundary_on_a_fused_module():
    module = hlofuse.loads("""
fused {
  p = f32[1024] parameter(0)
  ROOT e = f32[1024] exponential(p)
}
ENTRY e {
  x = f32[1024] parameter(0)
  f = f32[1024] fusion(x), kind=kLoop, calls=fused
  ROOT t = (f32[1024], f32[1024]) tuple(f, x)
}""")
    program = Program.from_module(module)
    spec = get_pipeline("gpu", "priority")
    ctx = make_context(Options(backend="gpu", pipeline="priority"))
    d = spec.explain_boundary(program.entry["f"], program.entry["t"], ctx)
    assert d is not None and d.rule == "PF-CONSUMER-NOT-FUSIBLE"


# ------------------------------------------------------------------------------------------
# The whole log against XLA's (jaxlib 0.10.2, a6000.txtpb: 1.8 GHz, sm_86)
# ------------------------------------------------------------------------------------------

# (module, XLA's steps): "P producer unfused fused" | "I producer reason" | "F fusion producer consumer"
XLA_LOGS = {
    "widening convert with a bitcast user (incremental deltas of 1/1)": ("""
ENTRY main.1 {
  p.1 = f16[512]{0} parameter(0)
  add.1.0 = f16[512]{0} add(p.1, p.1)
  convert_element_type.1.0 = f32[512]{0} convert(add.1.0)
  mul.1.0 = f32[512]{0} multiply(convert_element_type.1.0, convert_element_type.1.0)
  bitcast.1 = s32[512]{0} bitcast(convert_element_type.1.0)
  ROOT tuple.1.0 = (f32[512]{0}, s32[512]{0}) tuple(mul.1.0, bitcast.1)
}""", """
P convert_element_type.1.0 3.028 2.01175
I mul.1.0 the consumer is not fusible
P add.1.0 2.0175 1.00725
F fusion convert_element_type.1.0 mul.1.0
I fusion the consumer is not fusible
P add.1.0 1.0 1.0
F fusion.1 add.1.0 convert_element_type.1.0
F fusion add.1.0 fusion
I fusion the consumer is not fusible
I fusion.1 not fusing because there are only bitcast users"""),
    "in-place dynamic-update-slice": ("""
ENTRY main.1 {
  x.1 = f32[1024,1024]{1,0} parameter(0)
  u.1 = f32[1,1024]{1,0} parameter(1)
  exp.1.0 = f32[1,1024]{1,0} exponential(u.1)
  i.1 = s32[] parameter(2)
  constant.3.0 = s32[] constant(0)
  lt.1.0 = pred[] compare(i.1, constant.3.0), direction=LT
  constant.2.0 = s32[] constant(1024)
  add.1.0 = s32[] add(i.1, constant.2.0)
  select_n.1.0 = s32[] select(lt.1.0, add.1.0, i.1)
  ROOT dynamic_update_slice.1.0 = f32[1024,1024]{1,0} dynamic-update-slice(x.1, exp.1.0, select_n.1.0, constant.3.0)
}""", """
P add.1.0 2.002 1.002
P select_n.1.0 2.01525 1.01425
P lt.1.0 2.002 1.002
P exp.1.0 2.039 1.02475
F fusion exp.1.0 dynamic_update_slice.1.0
P select_n.1.0 1.0105 1.0105
I fusion No users to fuse
F fusion select_n.1.0 fusion
I fusion No users to fuse
P add.1.0 1.02375 1.02275
P lt.1.0 1.02375 1.02275
F fusion add.1.0 fusion
I fusion No users to fuse
P lt.1.0 1.0 1.0
F fusion lt.1.0 fusion
I fusion No users to fuse"""),
    "transpose (negative incremental deltas)": ("""
ENTRY main.1 {
  x.1 = f32[1024,2048]{1,0} parameter(0)
  exponential.1 = f32[1024,2048]{1,0} exponential(x.1)
  transpose.5.0 = f32[2048,1024]{1,0} transpose(exponential.1), dimensions={1,0}
  constant.1.0 = f32[] constant(1)
  broadcast.2.0 = f32[2048,1024]{1,0} broadcast(constant.1.0), dimensions={}
  ROOT add.1.0 = f32[2048,1024]{1,0} add(transpose.5.0, broadcast.2.0)
}""", """
P broadcast.2.0 46.239 23.3965
P transpose.5.0 56.6142502 33.7717514
P exponential.1 45.918 23.0755
F fusion broadcast.2.0 add.1.0
P transpose.5.0 -9.37525 -9.37525
I fusion No users to fuse
F fusion transpose.5.0 fusion
I fusion No users to fuse
P exponential.1 1.554 1.554
F fusion exponential.1 fusion
I fusion No users to fuse"""),
}


def _batches(steps):
    """Steps grouped between fusion steps: within a batch XLA's thread pool orders freely."""
    out, current = [], []
    for s in steps:
        if s[0] == "F":
            out.append(sorted(current, key=lambda x: (x[0], x[1])))
            out.append([s])
            current = []
        else:
            current.append(s)
    out.append(sorted(current, key=lambda x: (x[0], x[1])))
    return out


def _same(a, b) -> bool:
    """Steps equal, times within 1.5 ns (XLA's ¼-ns ticks and float32 printing)."""
    if len(a) != len(b) or a[:2] != b[:2]:
        return False
    return all(x == y if not isinstance(x, float) else abs(x - y) <= 0.0015 for x, y in zip(a[2:], b[2:]))


def _ours(step):
    if isinstance(step, UpdatePriority):
        return ("P", step.producer, step.us_unfused, step.us_fused)
    if isinstance(step, ProducerIneligible):
        return ("I", step.producer, step.reason)
    assert isinstance(step, FusionStep)
    return ("F", step.fusion, step.producer, step.consumer)


def _xlas(line):
    kind, rest = line.split(" ", 1)
    if kind == "P":
        name, unfused, fused = rest.split()
        return ("P", name, float(unfused), float(fused))
    if kind == "I":
        name, reason = rest.split(" ", 1)
        return ("I", name, reason)
    return ("F", *rest.split())


@pytest.mark.parametrize("case", sorted(XLA_LOGS))
def test_whole_log_matches_xla(case):
    text, steps = XLA_LOGS[case]
    _, ctx, _ = run(text, device=hlofuse_device("a6000"))
    ours = _batches([_ours(s) for s in ctx.priority_fusion_log.steps])
    xla = _batches([_xlas(line) for line in steps.strip().splitlines()])
    assert len(ours) == len(xla), (ours, xla)
    for mine, theirs in zip(ours, xla):
        assert len(mine) == len(theirs) and all(_same(a, b) for a, b in zip(mine, theirs)), (mine, theirs)


def hlofuse_device(name):
    from hlofuse.device import load_gpu

    return load_gpu(name)


def test_a_bitcast_user_of_a_producer_refused_as_a_whole_gets_the_producers_verdict():
    """PriorityFusion never fuses into bitcasts; a producer fused into its other users stays a
    kernel for the bitcast alone (PF-BITCAST-USER).  Here the tuple refuses the producer, so
    it is fused into nothing: the bitcast's pair carries that verdict, as XLA's log does."""
    program, ctx, _ = run("""
HloModule m
ENTRY e {
  x = f32[64,64] parameter(0)
  e = f32[64,64] exponential(x)
  b = f32[4096] bitcast(e)
  ROOT t = (f32[64,64], f32[4096]) tuple(e, b)
}
""")
    into_bitcast = decision(ctx, "e", "b")
    assert into_bitcast.rule == "PF-ALL-USERS"
    assert into_bitcast.xla_reason == "the consumer is not fusible"
    assert decision(ctx, "e", "t").rule == "PF-CONSUMER-NOT-FUSIBLE"
    assert ProducerIneligible(0, "e", "the consumer is not fusible").reason in {
        s.reason for s in ctx.priority_fusion_log.ineligible if s.producer == "e"}
