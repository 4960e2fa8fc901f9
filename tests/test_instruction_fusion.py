"""The generic InstructionFusion driver with the base policy (XLA's InstructionFusion without a
backend override): queue order, the one-fusion-per-pop rule, decisions, and every in-place
safety rule of ShouldFuseInPlaceOp with a refused and an allowed case.

Expectations come from xla/service/instruction_fusion.cc (docs/xla/cpu-fusion.md §2)."""

from __future__ import annotations

import pytest

import hlofuse
from hlofuse.decision import Verdict
from hlofuse.graph import Program
from hlofuse.passes.instruction_fusion import FusionPolicy, InstructionFusion, generic_is_expensive
from hlofuse.pipeline import Options, make_context
from hlofuse.rules import instruction_fusion as rif


def run_base(text: str, policy: FusionPolicy | None = None):
    program = Program.from_module(hlofuse.loads(text))
    ctx = make_context(Options(backend="cpu"))
    ctx.pass_name = "fusion"
    changed = InstructionFusion(policy or FusionPolicy()).run(program, ctx)
    return program, ctx, changed


def decision(ctx, producer: str, consumer: str):
    found = [d for d in ctx.decisions
             if d.producer == producer and (d.consumer == consumer or consumer in d.consumer_members)]
    assert len(found) == 1, found
    return found[0]


def rule_of(ctx, producer, consumer):
    d = decision(ctx, producer, consumer)
    return d.rule if d.verdict == Verdict.BLOCKED else "fused"


# ------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------


def test_operands_latest_in_post_order_fuse_first_and_the_fusion_is_reexamined():
    # XLA's comment: for C = op(A, B) with B = op(A), B must be fused before A so that A is
    # cloned once, not twice.
    program, ctx, changed = run_base("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  a = f32[8] negate(p)
  b = f32[8] exponential(a)
  ROOT c = f32[8] add(a, b)
}""")
    assert changed
    root = program.entry.root
    assert root.name == "exponential_add_fusion"  # named after the first fused producer, b
    assert sorted(n.opcode for n in root.fused.nodes()) == ["add", "exponential", "negate", "parameter"]
    assert [op.name for op in root.operands] == ["p"]


def test_fusion_kind_and_name_of_the_base_policy():
    policy = FusionPolicy()
    program, ctx, _ = run_base("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  n = f32[8] negate(p)
  ROOT s = f32[8] sine(n)
}""", policy)
    assert program.entry.root.fusion_kind == "kLoop"
    assert program.entry.root.name == "negate_sine_fusion"


def test_silent_xla_skips_still_yield_decisions():
    program, ctx, _ = run_base("""HloModule m
cond {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  bx = f32[8] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT bt = (s32[], f32[8]) tuple(i2, bx)
}
ENTRY e {
  x = f32[8] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[8]) tuple(zero, x)
  ROOT w = (s32[], f32[8]) while(t), condition=cond, body=body
}""")
    assert rule_of(ctx, "t", "w") == "IF-CONSUMER-NOT-FUSIBLE"
    assert rule_of(ctx, "x", "t") == "IF-PRODUCER-NOT-FUSIBLE"
    d = decision(ctx, "x", "t")
    assert d.xla_reason is None  # XLA gives no reason string for these
    assert "parameter" in d.reason


def test_multi_output_reason_is_appended_as_xla_reports_it():
    program, ctx, _ = run_base("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  ROOT r = f32[8] exponential(p)
  n = f32[8] negate(r)
}""")
    d = decision(ctx, "r", "n")
    assert d.rule == "IF-ROOT-PRODUCER"
    assert d.xla_reason == "not fusing into the output of the root instruction ; multi-output fusion not supported by this pass"


def test_expensive_duplication_uses_the_policys_cost_function():
    text = """HloModule m
both {
  a = f32[8] parameter(0)
  b = f32[8] parameter(1)
  ROOT t = (f32[8], f32[8]) tuple(a, b)
}
ENTRY e {
  x = f32[8] parameter(0)
  e = f32[8] exponential(x)
  n = f32[8] negate(e)
  s = f32[8] sine(e)
  ROOT c = (f32[8], f32[8]) call(n, s), to_apply=both
}"""
    program, ctx, _ = run_base(text)
    assert rule_of(ctx, "e", "n") == "IF-EXPENSIVE-DUPLICATION"

    class Cheap(FusionPolicy):
        def is_expensive(self, node):
            return False

    program, ctx, _ = run_base(text, Cheap())
    assert rule_of(ctx, "e", "n") == "fused"


def test_generic_is_expensive_matches_xla_lists():
    nodes = Program.from_module(hlofuse.loads("""HloModule m
ENTRY e {
  x = s32[8] parameter(0)
  c = s32[] constant(3)
  b = s32[8] broadcast(c), dimensions={}
  d1 = s32[8] divide(x, b)
  d2 = s32[8] divide(b, x)
  f = f32[8] parameter(1)
  e = f32[8] exponential(f)
  s = f32[8] sine(f)
  ROOT t = (s32[8], s32[8], f32[8], f32[8]) tuple(d1, d2, e, s)
}""")).entry
    assert not generic_is_expensive(nodes["d1"])  # integer divide by a constant: shifts
    assert generic_is_expensive(nodes["d2"])
    assert generic_is_expensive(nodes["e"]) and not generic_is_expensive(nodes["s"])


def test_reuse_analysis_through_fusions():
    program = Program.from_module(hlofuse.loads("""HloModule m
body {
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  b = f32[8,4] broadcast(p0), dimensions={0}
  n = f32[8] negate(p1)
  nb = f32[8,4] broadcast(n), dimensions={0}
  ROOT a = f32[8,4] add(b, nb)
}
ENTRY e {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  ROOT f = f32[8,4] fusion(x, y), kind=kLoop, calls=body
}"""))
    f = program.entry.root
    assert rif.reuses_operand_elements(f, 0) and rif.reuses_operand_elements(f, 1)
    assert not rif.is_elementwise(f)


def test_fusion_parameter_uses_found_in_one_walk_per_body_version():
    """FusionReusesParamElements for every parameter at once: reused (through a broadcast),
    used once (elementwise, and a reused path met with a used one), unused; remembered until
    the body changes."""
    from hlofuse.graph import graph_cache
    from hlofuse.rules import instruction_facts as facts

    program = Program.from_module(hlofuse.loads("""HloModule m
body {
  p0 = f32[8] parameter(0)
  p1 = f32[8,4] parameter(1)
  p2 = f32[8,4] parameter(2)
  p3 = f32[8] parameter(3)
  b = f32[8,4] broadcast(p0), dimensions={0}
  n = f32[8,4] negate(p1)
  s = f32[8,4] add(b, n)
  ROOT a = f32[8,4] add(s, p1)
}
ENTRY e {
  x = f32[8] parameter(0)
  y = f32[8,4] parameter(1)
  z = f32[8,4] parameter(2)
  w = f32[8] parameter(3)
  ROOT f = f32[8,4] fusion(x, y, z, w), kind=kLoop, calls=body
}"""))
    f = program.entry.root
    uses = [facts.operand_element_use(f, i) for i in range(4)]
    assert uses == [facts.REUSE, facts.USE, facts.NO_USE, facts.NO_USE]
    assert uses == [facts._fusion_param_use(i, f.fused.root, {}) for i in range(4)]
    assert graph_cache(f.fused)["parameter element use"] == tuple(uses)


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
def test_fusion_parameter_uses_in_one_walk_equal_the_walk_per_parameter(monkeypatch):
    """Every fusion whose operand reuse the GPU and CPU replays ask (generated modules of
    repeated layers): the one-walk answer equals FusionReusesParamElements parameter by
    parameter."""
    import sys
    from pathlib import Path

    from hlofuse.pipeline import replay
    from hlofuse.rules import instruction_facts as facts

    one_walk = facts._fusion_param_uses
    seen = {"fusions": 0, "reuse": 0, "use": 0}

    def checked(fusion):
        found = one_walk(fusion)
        root = fusion.fused.root
        assert found == tuple(facts._fusion_param_use(i, root, {}) for i in range(len(fusion.fused.parameters)))
        seen["fusions"] += 1
        seen["reuse"] += facts.REUSE in found
        seen["use"] += facts.USE in found
        return found

    monkeypatch.setattr(facts, "_fusion_param_uses", checked)
    bench = str(Path(__file__).resolve().parent.parent / "bench")
    sys.path.insert(0, bench)
    try:
        import replay_speed
    finally:
        sys.path.remove(bench)
    for pipeline in ("legacy", "cpu"):
        replay(hlofuse.loads(replay_speed.generate_for(pipeline, 2000)), Options(**replay_speed.PIPELINES[pipeline]))
    assert seen["fusions"] > 100 and seen["reuse"] > 10 and seen["use"] > 10, seen


# ------------------------------------------------------------------------------------------
# In-place safety (ShouldFuseInPlaceOp): a refused and an allowed case per reason
# ------------------------------------------------------------------------------------------

IN_PLACE_CASES = {
    "IF-INPLACE-SHARED-BUFFER": ("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  x = f32[8] negate(p)
  i = s32[] parameter(1)
  ROOT d = f32[8] dynamic-update-slice(x, x, i)
}""", "x", "d"),
    "IF-INPLACE-PRODUCER-NON-ELEMENTWISE": ("""HloModule m
fb {
  p0 = f32[8] parameter(0)
  s = f32[4] slice(p0), slice={[0:4]}
  ROOT r = f32[4] reverse(s), dimensions={0}
}
ENTRY e {
  a = f32[8] parameter(0)
  i = s32[] parameter(1)
  f = f32[4] fusion(a), kind=kLoop, calls=fb
  ROOT d = f32[8] dynamic-update-slice(a, f, i)
}""", "f", "d"),
    "IF-INPLACE-CONSUMER-CONFLICT": ("""HloModule m
cb {
  p0 = f32[8] parameter(0)
  p1 = f32[4] parameter(1)
  p2 = s32[] parameter(2)
  r = f32[8] reverse(p0), dimensions={0}
  s = f32[4] slice(r), slice={[0:4]}
  u = f32[4] add(p1, s)
  ROOT d = f32[8] dynamic-update-slice(p0, u, p2)
}
ENTRY e {
  a = f32[8] parameter(0)
  c = f32[] parameter(1)
  b = f32[8] broadcast(c), dimensions={}
  m = f32[8] multiply(a, b)
  v = f32[4] parameter(2)
  i = s32[] parameter(3)
  ROOT f = f32[8] fusion(m, v, i), kind=kLoop, calls=cb
}""", "m", "f"),
    "IF-INPLACE-MULTIPLE-DUS": ("""HloModule m
cb {
  p0 = f32[8] parameter(0)
  p1 = f32[4] parameter(1)
  p2 = f32[8] parameter(2)
  p3 = s32[] parameter(3)
  d1 = f32[8] dynamic-update-slice(p0, p1, p3)
  d2 = f32[8] dynamic-update-slice(p2, p1, p3)
  ROOT t = (f32[8], f32[8]) tuple(d1, d2)
}
ENTRY e {
  a = f32[8] parameter(0)
  s = f32[4] slice(a), slice={[0:4]}
  b = f32[8] parameter(1)
  i = s32[] parameter(2)
  ROOT f = (f32[8], f32[8]) fusion(a, s, b, i), kind=kLoop, calls=cb
}""", "s", "f"),
    "IF-INPLACE-SLICE-SHAPE": ("""HloModule m
cb {
  p0 = f32[8] parameter(0)
  p1 = f32[2] parameter(1)
  p2 = s32[] parameter(2)
  c = f32[4] concatenate(p1, p1), dimensions={0}
  ROOT d = f32[8] dynamic-update-slice(p0, c, p2)
}
ENTRY e {
  a = f32[8] parameter(0)
  s = f32[2] slice(a), slice={[0:2]}
  i = s32[] parameter(1)
  ROOT f = f32[8] fusion(a, s, i), kind=kLoop, calls=cb
}""", "s", "f"),
    "IF-INPLACE-SLICE-INDEX": ("""HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  s = f32[4] slice(a), slice={[2:6]}
  z = s32[] constant(0)
  ROOT d = f32[8] dynamic-update-slice(a, s, z)
}""", "s", "d"),
    "IF-INPLACE-SLICE-SHARED": ("""HloModule m
cb {
  p0 = f32[8] parameter(0)
  p1 = f32[4] parameter(1)
  c0 = s32[] constant(0)
  r = f32[4] reverse(p1), dimensions={0}
  u = f32[4] add(p1, r)
  ROOT d = f32[8] dynamic-update-slice(p0, u, c0)
}
ENTRY e {
  a = f32[8] parameter(0)
  s = f32[4] slice(a), slice={[0:4]}
  ROOT f = f32[8] fusion(a, s), kind=kLoop, calls=cb
}""", "s", "f"),
    "IF-INPLACE-DS-SHAPE": ("""HloModule m
cb {
  p0 = f32[8] parameter(0)
  p1 = f32[2] parameter(1)
  p2 = s32[] parameter(2)
  c = f32[4] concatenate(p1, p1), dimensions={0}
  ROOT d = f32[8] dynamic-update-slice(p0, c, p2)
}
ENTRY e {
  a = f32[8] parameter(0)
  i = s32[] parameter(1)
  s = f32[2] dynamic-slice(a, i), dynamic_slice_sizes={2}
  ROOT f = f32[8] fusion(a, s, i), kind=kLoop, calls=cb
}""", "s", "f"),
    "IF-INPLACE-DS-INDEX": ("""HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  s = f32[4] dynamic-slice(a, i), dynamic_slice_sizes={4}
  ROOT d = f32[8] dynamic-update-slice(a, s, j)
}""", "s", "d"),
    "IF-INPLACE-DS-SHARED": ("""HloModule m
cb {
  p0 = f32[8] parameter(0)
  p1 = f32[4] parameter(1)
  p2 = s32[] parameter(2)
  r = f32[4] reverse(p1), dimensions={0}
  u = f32[4] add(p1, r)
  ROOT d = f32[8] dynamic-update-slice(p0, u, p2)
}
ENTRY e {
  a = f32[8] parameter(0)
  i = s32[] parameter(1)
  s = f32[4] dynamic-slice(a, i), dynamic_slice_sizes={4}
  ROOT f = f32[8] fusion(a, s, i), kind=kLoop, calls=cb
}""", "s", "f"),
    "IF-INPLACE-UNRECOGNIZED": ("""HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  i = s32[] parameter(1)
  r = f32[8] reverse(a), dimensions={0}
  ROOT d = f32[8] dynamic-update-slice(a, r, i)
}""", "r", "d"),
}

#: The same programs changed just enough for the fusion to be safe (and allowed).
IN_PLACE_SAFE = {
    "IF-INPLACE-SHARED-BUFFER": ("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  x = f32[8] negate(p)
  u = f32[8] parameter(2)
  i = s32[] parameter(1)
  ROOT d = f32[8] dynamic-update-slice(x, u, i)
}""", "x", "d"),
    "IF-INPLACE-SLICE-INDEX": ("""HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  s = f32[4] slice(a), slice={[0:4]}
  z = s32[] constant(0)
  ROOT d = f32[8] dynamic-update-slice(a, s, z)
}""", "s", "d"),
    "IF-INPLACE-DS-INDEX": ("""HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  i = s32[] parameter(1)
  s = f32[4] dynamic-slice(a, i), dynamic_slice_sizes={4}
  ROOT d = f32[8] dynamic-update-slice(a, s, i)
}""", "s", "d"),
    "IF-INPLACE-CONSUMER-CONFLICT": ("""HloModule m
cb {
  p0 = f32[8] parameter(0)
  p1 = f32[4] parameter(1)
  p2 = s32[] parameter(2)
  ROOT d = f32[8] dynamic-update-slice(p0, p1, p2)
}
ENTRY e {
  a = f32[8] parameter(0)
  c = f32[] parameter(1)
  b = f32[8] broadcast(c), dimensions={}
  m = f32[8] multiply(a, b)
  v = f32[4] parameter(2)
  i = s32[] parameter(3)
  ROOT f = f32[8] fusion(m, v, i), kind=kLoop, calls=cb
}""", "m", "f"),
    "IF-INPLACE-UNRECOGNIZED": ("""HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  i = s32[] parameter(1)
  r = f32[8] reverse(a), dimensions={0}
  ROOT n = f32[8] negate(r)
}""", "r", "n"),
}


@pytest.mark.parametrize("rule_id", sorted(IN_PLACE_CASES))
def test_in_place_rule_refuses(rule_id):
    text, producer, consumer = IN_PLACE_CASES[rule_id]
    _, ctx, _ = run_base(text)
    d = decision(ctx, producer, consumer)
    assert d.verdict == Verdict.BLOCKED and d.rule == rule_id, (d.rule, d.reason)
    from hlofuse.rules import REGISTRY

    assert d.xla_reason.startswith(REGISTRY[rule_id].xla.message)
    assert not REGISTRY[rule_id].relaxable


@pytest.mark.parametrize("rule_id", sorted(IN_PLACE_SAFE))
def test_in_place_rule_allows_the_safe_variant(rule_id):
    text, producer, consumer = IN_PLACE_SAFE[rule_id]
    _, ctx, _ = run_base(text)
    assert rule_of(ctx, producer, consumer) == "fused"


def test_every_in_place_rule_has_a_refused_case():
    assert set(IN_PLACE_CASES) == set(rif.IN_PLACE_RULES)


def test_in_place_pairs_trace_through_fusion_roots():
    program = Program.from_module(hlofuse.loads(IN_PLACE_CASES["IF-INPLACE-MULTIPLE-DUS"][0]))
    f = program.entry.root
    assert rif.in_place_pairs(f) == [(0, (0,)), (2, (1,))]


def test_wide_consumer_reachability_sweep_matches_the_search(monkeypatch):
    """The do-not-duplicate set is the same whether reachability through a many-operand
    consumer is answered by one backward sweep or by a forward search per producer."""
    from hlofuse.passes import instruction_fusion as driver
    from hlofuse.passes.cpu import CpuPolicy

    lines = ["HloModule m", "ENTRY e {", "  x = f32[8] parameter(0)", "  y = f32[8] parameter(1)"]
    outs = []
    for k in range(40):
        prev = f"s{k - 1}" if k else "x"
        lines += [f"  a{k} = f32[8] add({prev}, y)", f"  s{k} = f32[8] sine(a{k})"]
        outs += [f"a{k}", f"s{k}"]
    lines += [f"  ROOT t = ({', '.join(['f32[8]'] * len(outs))}) tuple({', '.join(outs)})", "}"]
    text = "\n".join(lines)

    def sets():
        program = Program.from_module(hlofuse.loads(text))
        ctx = make_context(Options(backend="cpu"))
        ctx.pass_name = "fusion"
        run = driver.FusionRun(InstructionFusion(CpuPolicy()), program, ctx)
        CpuPolicy().start_run(run)
        run.skipped = set()
        run.graph = program.entry
        post = program.entry.post_order()
        run._post_position = {n.uid: i for i, n in enumerate(post)}
        run._post_list = post
        refused = run._globally_unfusible(post)
        return {n.name for n in post if n.uid in refused}

    swept = sets()
    monkeypatch.setattr(driver, "_WIDE", 10**9)
    searched = sets()
    assert swept == searched and len(swept) > 10


@pytest.mark.parametrize("rule_id", ["IF-INPLACE-SHARED-BUFFER", "IF-INPLACE-SLICE-INDEX", "IF-INPLACE-DS-INDEX",
                                     "IF-INPLACE-UNRECOGNIZED"])
def test_gpu_in_place_rules_are_asked_only_of_consumers_that_update_in_place(rule_id):
    """GpuInstructionFusion's rule list leaves the in-place rules out for a consumer with no
    in-place operand (they cannot object there) and keeps them, in XLA's places, otherwise:
    an in-place refusal still decides the pair on the GPU."""
    from hlofuse.passes import gpu_instruction_fusion
    from hlofuse.rules.gpu_instruction_fusion import should_fuse_rules
    from hlofuse.rules.instruction_fusion import IN_PLACE_RULES

    text, producer, consumer = IN_PLACE_CASES[rule_id]
    program = Program.from_module(hlofuse.loads(text))
    graph = program.entry
    p, c = graph[producer], graph[consumer]
    everything = should_fuse_rules(p)
    in_place = should_fuse_rules(p, c)  # an in-place consumer: every in-place rule, in XLA's places
    assert [r for r in everything if r in in_place] == list(in_place)
    assert set(IN_PLACE_RULES) <= set(in_place)
    plain = should_fuse_rules(p, graph[p.operands[0].name])  # a parameter updates nothing in place
    assert not set(IN_PLACE_RULES) & set(plain)
    assert [r for r in everything if r in plain] == list(plain)
    ctx = make_context(Options(backend="gpu", pipeline="legacy"))
    ctx.pass_name = "fusion"
    gpu_instruction_fusion.run_once(program, ctx)
    assert [d.rule for d in ctx.decisions if d.producer == producer and consumer in d.consumer_members] == [rule_id]


def test_updates_in_place_answers_as_in_place_pairs_does_before_and_after_fusion():
    """updates_in_place remembers a fusion's answer per body version: the same answer as
    in_place_pairs on every instruction of real dumps, and a new one once the body changes."""
    from pathlib import Path

    from hlofuse.fusion_primitives import create_fusion, fuse_instruction
    from hlofuse.graph import graph_cache
    from hlofuse.rules.instruction_facts import _fusion_in_place_pairs, in_place_pairs, updates_in_place

    folder = Path(__file__).resolve().parents[1] / "sample_dumps" / "gpu-legacy-rtx2080ti"
    files = sorted(folder.glob("*/*sm_7.5_gpu_after_optimizations.txt"))
    assert files
    seen = 0
    for path in files:
        program = Program.from_module(hlofuse.loads(path.read_text()))
        for graph in program.graphs.values():
            for node in graph:
                assert updates_in_place(node) == bool(in_place_pairs(node)), (path.name, node.name)
                seen += updates_in_place(node)
                if node.fused is not None:  # what both remember is the body's answer afresh
                    assert graph_cache(node.fused)["in-place-pairs"] == tuple(_fusion_in_place_pairs(node))
    assert seen  # the dumps hold in-place fusions (dynamic-update-slice loops, scatters)
    program = Program.from_module(hlofuse.loads("""HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  u = f32[4] parameter(1)
  i = s32[] parameter(2)
  n = f32[8] negate(a)
  ROOT d = f32[8] dynamic-update-slice(n, u, i)
}"""))
    fusion = create_fusion(program.entry["d"], "kLoop")
    assert in_place_pairs(fusion) == [(0, ())] and "in-place-pairs" in graph_cache(fusion.fused)
    assert updates_in_place(fusion)  # the body's root updates parameter 0 in place
    fuse_instruction(fusion, program.entry["n"])  # the buffer is now computed inside
    assert not updates_in_place(fusion) and not in_place_pairs(fusion)


def test_candidates_are_queued_operands_latest_first_and_a_repeated_one_in_operand_order():
    """GetInstructionsToFuse's order: the operands still queued, latest in post order first;
    an operand used twice keeps its operand order (the two-operand case is answered without a
    sort, and must answer as the sort does)."""
    from hlofuse.passes.instruction_fusion import FusionRun

    program = Program.from_module(hlofuse.loads("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  a = f32[8] negate(p)
  b = f32[8] exponential(a)
  ab = f32[8] add(a, b)
  ba = f32[8] add(b, a)
  aa = f32[8] add(a, a)
  abp = f32[8] clamp(a, b, p)
  ROOT t = (f32[8], f32[8], f32[8], f32[8]) tuple(ab, ba, aa, abp)
}"""))
    ctx = make_context(Options(backend="cpu"))
    run = FusionRun(InstructionFusion(FusionPolicy()), program, ctx)
    nodes = {n.name: n for n in program.entry}
    queued = ["p", "a", "b"]
    run._position = {nodes[name].uid: i for i, name in enumerate(queued)}
    assert run._candidates(nodes["ab"]) == [1, 0]
    assert run._candidates(nodes["ba"]) == [0, 1]
    assert run._candidates(nodes["aa"]) == [0, 1]
    assert run._candidates(nodes["abp"]) == [1, 0, 2]
    del run._position[nodes["b"].uid]
    assert run._candidates(nodes["ab"]) == [0]
    assert run._candidates(nodes["ba"]) == [1]
    del run._position[nodes["a"].uid]
    assert run._candidates(nodes["ab"]) == []
