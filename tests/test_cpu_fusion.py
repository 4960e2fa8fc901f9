"""XLA:CPU fusion (jaxlib 0.10.2): every CPU rule with a case it refuses and a case it lets
through, kinds and names as XLA makes them, fusion-wrapper, library fusions, and XLA's own
unit-test cases (shared/corpus/fusion, cpu_instruction_fusion_test.cc).

Expectations come from docs/xla/cpu-fusion.md (XLA 5a9e73cb, checked against real jax 0.10.2
compilations), never from running hlofuse."""

from __future__ import annotations

from collections import Counter

import pytest

import hlofuse
from hlofuse.decision import Verdict
from hlofuse.graph import Program
from hlofuse.pipeline import Options, make_context, replay

YNN = '{"outer_dimension_partitions":[],"fusion_config":{"kind":"__ynn_fusion"}}'


def fuse(text: str, passes=("fusion",), **options):
    return replay(hlofuse.loads(text), Options(backend="cpu", passes=passes, **options))


def decision(result, producer: str, consumer: str):
    """The one decision about `producer` (an input instruction) and the kernel holding `consumer`."""
    found = [d for d in result.decisions
             if d.producer == producer and (d.consumer == consumer or consumer in d.consumer_members)]
    assert len(found) == 1, f"expected one decision for {producer} -> {consumer}, got {found}"
    return found[0]


def kernel_with(result, name: str):
    """The kernel computing input instruction `name` (or the kernel of that name)."""
    return next(k for k in result.kernels if name in k.instructions or k.name == name)


def assert_blocked(result, producer, consumer, rule):
    d = decision(result, producer, consumer)
    assert d.verdict == Verdict.BLOCKED and d.rule == rule, (d.rule, d.reason)
    return d


def assert_fused(result, producer, consumer):
    d = decision(result, producer, consumer)
    assert d.verdict == Verdict.FUSED, (d.rule, d.reason)
    assert producer in kernel_with(result, consumer).instructions
    return d


# ------------------------------------------------------------------------------------------
# CpuInstructionFusion::ShouldFuse, rule by rule (C0–C15)
# ------------------------------------------------------------------------------------------

DOT_BODY = """
dot_body {
  p0 = f32[64,128] parameter(0)
  p1 = f32[128,32] parameter(1)
  ROOT d = f32[64,32] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
neg_body {
  q0 = f32[64,128] parameter(0)
  ROOT n = f32[64,128] negate(q0)
}
"""


def test_c0_nothing_is_fused_into_a_library_fusion():
    r = fuse(f"""HloModule m
{DOT_BODY}
ENTRY e {{
  x = f32[64,128] parameter(0)
  w = f32[128,32] parameter(1)
  ex = f32[64,128] exponential(x)
  ROOT f = f32[64,32] fusion(ex, w), kind=kCustom, calls=dot_body, backend_config={YNN}
}}""")
    d = assert_blocked(r, "ex", "f", "CPU-CUSTOM-FUSION-CONSUMER")
    assert d.xla_reason == "Don't fuse instructions from custom fusions/calls ; multi-output fusion not supported by this pass"
    assert "YNNPACK library fusion (dot)" in d.reason
    assert kernel_with(r, "d").kind == "kCustom"


def test_c0_lets_a_loop_fusion_consumer_take_producers():
    r = fuse(f"""HloModule m
{DOT_BODY}
ENTRY e {{
  x = f32[64,128] parameter(0)
  ex = f32[64,128] exponential(x)
  ROOT f = f32[64,128] fusion(ex), kind=kLoop, calls=neg_body
}}""")
    assert_fused(r, "ex", "f")


def test_c1_non_scalar_constants_stay_outside_effective_scalars_fuse():
    r = fuse("""HloModule m
ENTRY e {
  x = f32[10,10] parameter(0)
  c = f32[10,10] constant({...})
  one = f32[1,1] constant({{1}})
  b = f32[1,10,1,10] broadcast(one), dimensions={0,2}
  r = f32[10,10] reshape(b)
  a = f32[10,10] add(x, c)
  ROOT m = f32[10,10] multiply(a, r)
}""")
    assert_blocked(r, "c", "a", "CPU-NON-SCALAR-CONSTANT")
    assert_fused(r, "one", "b")  # f32[1,1] is an effective scalar


def test_c2_matrix_vector_dot_output_fuses_into_add_and_c3_keeps_that_add():
    r = fuse("""HloModule m
ENTRY e {
  m = f32[8,16] parameter(0)
  v = f32[16] parameter(1)
  s = f32[] parameter(2)
  b = f32[8] broadcast(s), dimensions={}
  d = f32[8] dot(m, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  a = f32[8] add(b, d)
  ROOT n = f32[8] negate(a)
}""")
    assert_blocked(r, "a", "n", "CPU-OUTPUT-FUSIBLE-ADD")
    assert_fused(r, "d", "a")
    assert kernel_with(r, "a").kind == "kOutput"
    # a kOutput fusion is no loop fusion: the broadcast cannot join it (C13 and C14 fail)
    assert_blocked(r, "b", "a", "CPU-NO-FUSIBLE-CASE")


def test_c4_producer_must_be_loop_fusible():
    r = fuse("""HloModule m
cmp {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT lt = pred[] compare(l, r), direction=LT
}
ENTRY e {
  x = f32[64] parameter(0)
  s = f32[64] sort(x), dimensions={0}, to_apply=cmp
  n = f32[64] negate(s)
  ROOT t = f32[64] tanh(n)
}""")
    d = assert_blocked(r, "s", "n", "CPU-NOT-LOOP-FUSIBLE")
    assert d.xla_reason.startswith("Producer is not loop-fusible.")
    assert_fused(r, "n", "t")
    # the comparator is an embedded computation: never fused
    assert not any(d.computation == "cmp" for d in r.decisions)


MINOR_CONCAT = """HloModule m
ENTRY e {{
  x = f32[16,{n}]{{1,0}} parameter(0)
  y = f32[16,{n}]{{1,0}} parameter(1)
  one = f32[] constant(1)
  b = f32[16,{n}]{{1,0}} broadcast(one), dimensions={{}}
  a1 = f32[16,{n}]{{1,0}} add(x, b)
  a2 = f32[16,{n}]{{1,0}} add(y, b)
  ROOT c = f32[16,{m}]{{1,0}} concatenate(a1, a2), dimensions={{1}}
}}"""


def test_c5_concatenate_along_a_large_minor_dimension_is_not_fused():
    r = fuse(MINOR_CONCAT.format(n=100, m=200))
    d = assert_blocked(r, "a2", "c", "CPU-CONCATENATE")
    assert "minor-most dimension 1 of size 200" in d.reason
    assert len(r.kernels) == 3  # two broadcast_add fusions and the concatenate


def test_c5_small_minor_concatenate_fuses():
    r = fuse(MINOR_CONCAT.format(n=10, m=20))
    assert [k.name for k in r.kernels] == ["add_concatenate_fusion"]


def test_c5_concatenate_of_more_than_eight_operands_is_not_fused():
    params = "\n".join(f"  x{i} = f32[4,8] parameter({i})\n  a{i} = f32[4,8] negate(x{i})" for i in range(9))
    r = fuse(f"""HloModule m
ENTRY e {{
{params}
  ROOT c = f32[36,8] concatenate({", ".join(f"a{i}" for i in range(9))}), dimensions={{0}}
}}""")
    d = assert_blocked(r, "a0", "c", "CPU-CONCATENATE")
    assert "9 operands" in d.reason


def test_c6_expensive_producer_not_fused_into_a_reusing_consumer():
    r = fuse("""HloModule m
ENTRY e {
  x = f32[64] parameter(0)
  ex = f32[64] exponential(x)
  b = f32[64,100] broadcast(ex), dimensions={0}
  y = f32[64] parameter(1)
  ey = f32[64] exponential(y)
  n = f32[64] negate(ey)
  ROOT t = (f32[64,100], f32[64]) tuple(b, n)
}""")
    assert_blocked(r, "ex", "b", "CPU-EXPENSIVE-REUSE")
    assert_fused(r, "ey", "n")  # negate reads each element once


def test_c7_expensive_producer_is_not_duplicated_cheap_and_widening_ones_are():
    r = fuse("""HloModule m
ENTRY e {
  x = f32[8,16] parameter(0)
  ex = f32[8,16] exponential(x)
  one = f32[] constant(1)
  b1 = f32[8,16] broadcast(one), dimensions={}
  a = f32[8,16] add(ex, b1)
  m = f32[8,16] multiply(ex, b1)
  h = bf16[8,16] parameter(1)
  w = f32[8,16] convert(h)
  s = f32[8,16] subtract(w, a)
  d = f32[8,16] divide(w, m)
  ROOT t = (f32[8,16], f32[8,16]) tuple(s, d)
}""")
    assert_blocked(r, "ex", "a", "IF-EXPENSIVE-DUPLICATION")
    assert_blocked(r, "ex", "m", "IF-EXPENSIVE-DUPLICATION")
    assert_fused(r, "w", "s")  # bf16 -> f32 widens: always duplicable
    assert_fused(r, "w", "d")


def test_c8_a_fusion_holds_at_most_six_reductions():
    lines = ["  x = f32[8,16] parameter(0)", "  zero = f32[] constant(0)"]
    total = None
    for k in range(1, 8):
        lines += [f"  c{k} = f32[] constant({k})", f"  b{k} = f32[8,16] broadcast(c{k}), dimensions={{}}",
                  f"  m{k} = f32[8,16] multiply(x, b{k})",
                  f"  r{k} = f32[8] reduce(m{k}, zero), dimensions={{1}}, to_apply=sum"]
        if total is None:
            total = f"r{k}"
        else:
            lines.append(f"  s{k} = f32[8] add({total}, r{k})")
            total = f"s{k}"
    text = "HloModule m\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n" \
           "ENTRY e {\n" + "\n".join(lines) + f"\n  ROOT out = f32[8] negate({total})\n}}"
    r = fuse(text)
    reduces = [sum(1 for n in k.instructions if n.startswith("r") and n[1:].isdigit()) for k in r.kernels]
    assert max(reduces) == 6
    blocked = [d for d in r.decisions if d.rule == "CPU-TOO-MANY-REDUCTIONS"]
    assert blocked and all(d.facts["reductions"] == 6 for d in blocked)


def test_c9_constant_only_joins_an_existing_fusion():
    r = fuse("""HloModule m
ENTRY e {
  p = f32[] parameter(0)
  two = f32[] constant(2)
  ROOT a = f32[] add(p, two)
}""")
    assert_blocked(r, "two", "a", "CPU-CONSTANT-ALONE")
    assert r.kernels[0].name == "a"  # nothing fused: the add stays bare for fusion-wrapper


def test_c10_a_fusion_is_never_a_producer():
    r = fuse("""HloModule m
body {
  p = f32[8] parameter(0)
  ROOT n = f32[8] negate(p)
}
ENTRY e {
  x = f32[8] parameter(0)
  f = f32[8] fusion(x), kind=kLoop, calls=body
  ROOT ex = f32[8] exponential(f)
}""")
    assert_blocked(r, "f", "ex", "CPU-FUSION-PRODUCER")


def _slices(count: int) -> str:
    lines = ["  x = f32[64] parameter(0)", "  two = f32[] constant(2)",
             "  b = f32[64] broadcast(two), dimensions={}", "  y = f32[64] multiply(x, b)"]
    total = None
    for k in range(count):
        lines.append(f"  s{k} = f32[48] slice(y), slice={{[{k}:{k + 48}]}}")
        if total is None:
            total = f"s{k}"
        else:
            lines.append(f"  t{k} = f32[48] add({total}, s{k})")
            total = f"t{k}"
    lines[-1] = "  ROOT " + lines[-1].strip()
    return "HloModule m\nENTRY e {\n" + "\n".join(lines) + "\n}"


def test_c11_code_duplication_limit_is_fifteen_index_computations():
    r16 = fuse(_slices(16))
    d = assert_blocked(r16, "y", "s0", "CPU-CODE-DUPLICATION")
    assert d.facts["emitted"] == 16
    assert len(r16.kernels) == 2
    r15 = fuse(_slices(15))
    assert len(r15.kernels) == 1 and "y" in r15.kernels[0].instructions


def test_c15_tuple_consumer_is_no_fusible_case():
    r = fuse("""HloModule m
ENTRY e {
  x = f32[8] parameter(0)
  n = f32[8] negate(x)
  ROOT t = (f32[8], f32[8]) tuple(n, x)
}""")
    d = assert_blocked(r, "n", "t", "CPU-NO-FUSIBLE-CASE")
    assert d.xla_reason.startswith("Not fusing: not found a fusible case")


# ------------------------------------------------------------------------------------------
# The generic pass as XLA:CPU runs it
# ------------------------------------------------------------------------------------------


def test_do_not_duplicate_set_precedes_every_other_rule():
    # docs/xla/cpu-fusion.md §9 observation 14: z cannot be fused into the sort, so it is not
    # duplicated into tanh either
    r = fuse("""HloModule m
cmp {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT lt = pred[] compare(l, r), direction=LT
}
ENTRY e {
  a = f32[8,16] parameter(0)
  b = f32[8,16] parameter(1)
  z = f32[8,16] add(a, b)
  s = f32[8,16] sort(z), dimensions={1}, to_apply=cmp
  t = f32[8,16] tanh(z)
  ROOT r = (f32[8,16], f32[8,16]) tuple(s, t)
}""")
    d = assert_blocked(r, "z", "t", "IF-DO-NOT-DUPLICATE")
    assert d.xla_reason.startswith("operand can not be duplicated")
    assert d.facts["operand_elements"] == 256 and d.facts["output_elements"] == 128
    assert "sort" in d.facts["blocker"]


def test_effectively_unary_producer_is_duplicated():
    r = fuse("""HloModule m
cmp {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT lt = pred[] compare(l, r), direction=LT
}
ENTRY e {
  a = f32[8,16] parameter(0)
  c = f32[] parameter(1)
  b = f32[8,16] broadcast(c), dimensions={}
  z = f32[8,16] add(a, b)
  s = f32[8,16] sort(z), dimensions={1}, to_apply=cmp
  t = f32[8,16] tanh(z)
  ROOT r = (f32[8,16], f32[8,16]) tuple(s, t)
}""")
    assert_fused(r, "z", "t")
    assert sum(1 for k in r.kernels if "z" in k.instructions) == 2  # and still computed for the sort


def test_may_duplicate_false_refuses_shared_producers():
    from hlofuse.passes.cpu import CpuPolicy
    from hlofuse.passes.instruction_fusion import InstructionFusion

    text = """HloModule m
ENTRY e {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  a = f32[8] add(x, y)
  b = f32[8] negate(a)
  c = f32[8] multiply(a, b)
  ROOT t = (f32[8], f32[8]) tuple(c, a)
}"""
    program = Program.from_module(hlofuse.loads(text))
    ctx = make_context(Options(backend="cpu"))
    ctx.pass_name = "fusion"
    InstructionFusion(CpuPolicy(may_duplicate=False)).run(program, ctx)
    refused = [d for d in ctx.decisions if d.producer == "a" and "c" in d.consumer_members]
    assert [d.rule for d in refused] == ["IF-CANNOT-DUPLICATE"]
    assert refused[0].xla_reason.startswith("fusion pass cannot duplicate")
    # with duplication allowed (XLA:CPU's default), `a` is in the do-not-duplicate set instead
    r = fuse(text)
    assert_blocked(r, "a", "c", "IF-DO-NOT-DUPLICATE")


def test_fusion_names_kinds_and_operand_order_follow_xla():
    r = fuse("""HloModule m
ENTRY e {
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  ex = f32[8] exponential(p0)
  ROOT m = f32[8] multiply(ex, p1)
}""")
    fusion = r.module.entry.root
    assert fusion.name == "exponential_multiply_fusion" and fusion.fusion_kind == "kLoop"
    assert fusion.operands == ("p1", "p0")  # the producer's operands are appended
    body = r.module[fusion.fused_computation]
    assert body.name == "fused_computation"
    assert [p.name for p in body.parameters] == ["param_0.1", "param_1.1"]  # renumbered, fresh names


def test_root_add_of_broadcast_is_named_after_the_first_fused_producer():
    # the broadcast sits later in post order than the dot's library fusion, so it fuses first
    r = fuse(f"""HloModule m
{DOT_BODY}
ENTRY e {{
  x = f32[64,128] parameter(0)
  w = f32[128,32] parameter(1)
  f = f32[64,32] fusion(x, w), kind=kCustom, calls=dot_body, backend_config={YNN}
  b = f32[32] parameter(2)
  bb = f32[64,32] broadcast(b), dimensions={{1}}
  ROOT a = f32[64,32] add(f, bb)
}}""")
    assert r.module.entry.root.name == "broadcast_add_fusion"
    assert_blocked(r, "f", "a", "IF-DO-NOT-DUPLICATE")  # the dot cannot be fused: XLA's first reason


def test_while_body_is_fused_reducers_are_not():
    r = fuse("""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
cond {
  p = (s32[], f32[8,16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[8,16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8,16] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  s = f32[8,16] sine(x)
  two = f32[] constant(2)
  b = f32[8,16] broadcast(two), dimensions={}
  y = f32[8,16] multiply(s, b)
  ROOT t = (s32[], f32[8,16]) tuple(i2, y)
}
ENTRY e {
  x = f32[8,16] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[8,16]) tuple(zero, x)
  w = (s32[], f32[8,16]) while(t), condition=cond, body=body
  r = f32[8,16] get-tuple-element(w), index=1
  z = f32[] constant(0)
  ROOT s = f32[8] reduce(r, z), dimensions={1}, to_apply=add
}""")
    body = [k for k in r.kernels if k.computation == "body"]
    assert {k.name for k in body} == {"i2", "broadcast_multiply_fusion"}
    assert_blocked(r, "one", "i2", "CPU-CONSTANT-ALONE")
    assert_blocked(r, "t", "w", "IF-CONSUMER-NOT-FUSIBLE")
    assert not any(d.computation == "add" for d in r.decisions)


def test_every_considered_pair_has_exactly_one_decision():
    import pathlib

    from tests.conftest import REPO

    folder = pathlib.Path(REPO) / "sample_dumps" / "cpu" / "cartpole_b_concat"
    before = next(folder.glob("*before_fusion.txt"))
    r = replay(hlofuse.load(str(before)), Options(backend="cpu", passes=("fusion",)))
    keys = Counter((d.computation, d.producer_members, d.consumer_members) for d in r.decisions)
    assert r.decisions and all(d is not None for d in r.decisions)
    assert max(keys.values()) == 1
    blocked = [d for d in r.decisions if d.verdict == Verdict.BLOCKED]
    assert all(d.rule for d in blocked)


# ------------------------------------------------------------------------------------------
# Relaxing CPU rules
# ------------------------------------------------------------------------------------------


def test_relax_concat_fuses_the_minor_concatenate():
    r = fuse(MINOR_CONCAT.format(n=100, m=200), relax=("concat",))
    assert len(r.kernels) == 1
    d = decision(r, "a2", "c")
    assert d.verdict == Verdict.RELAXED and d.relaxed == ("CPU-CONCATENATE",)


def test_correctness_rules_cannot_be_relaxed():
    from hlofuse.errors import NotRelaxable

    with pytest.raises(NotRelaxable):
        fuse(MINOR_CONCAT.format(n=10, m=20), relax=("CPU-NOT-LOOP-FUSIBLE",))


# ------------------------------------------------------------------------------------------
# fusion-wrapper and library fusions
# ------------------------------------------------------------------------------------------


def test_fusion_wrapper_wraps_what_the_new_emitters_handle():
    r = fuse("""HloModule m
ENTRY e {
  x = f32[8,16]{1,0} parameter(0)
  s = f32[8,16]{1,0} sine(x)
  t = f32[16,8]{1,0} transpose(s), dimensions={1,0}
  c = f32[16,8]{0,1} copy(t)
  u = u32[16,8]{1,0} parameter(1)
  cu = u32[16,8]{0,1} copy(u)
  same = f32[8,16]{1,0} copy(x)
  ROOT r = (f32[16,8]{0,1}, u32[16,8]{0,1}, f32[8,16]{1,0}, f32[8,16]{1,0}) tuple(c, cu, same, s)
}""", passes=("fusion", "fusion-wrapper"))
    kinds = {k.name: k.kind for k in r.kernels}
    assert "wrapped_sine" in kinds and kinds["wrapped_sine"] == "kLoop"
    assert "wrapped_sine_computation" in r.module
    assert "transpose_copy_fusion" in kinds  # fusion made this one
    assert kinds.get("cu") == "copy" and kinds.get("same") == "copy"  # unsigned / same-layout copies stay


def test_fusion_wrapper_descends_into_loops_and_leaves_transposes():
    r = fuse("""HloModule m
cond {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  y = f32[8] sine(x)
  ROOT t = (s32[], f32[8]) tuple(i2, y)
}
ENTRY e {
  x = f32[8] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[8]) tuple(zero, x)
  w = (s32[], f32[8]) while(t), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}""", passes=("fusion", "fusion-wrapper"))
    names = {k.name for k in r.kernels if k.computation == "body"}
    assert names == {"wrapped_add", "wrapped_sine"}
    assert any(k.name == "wrapped_compare" for k in r.kernels if k.computation == "cond")


def test_no_library_mode_inlines_library_fusions_first():
    text = f"""HloModule m
body {{
  p0 = f32[64,128] parameter(0)
  c = f32[] constant(2)
  b = f32[64,128] broadcast(c), dimensions={{}}
  ROOT m = f32[64,128] multiply(p0, b)
}}
ENTRY e {{
  x = f32[64,128] parameter(0)
  f = f32[64,128] fusion(x), kind=kCustom, calls=body, backend_config={YNN}
  ROOT n = f32[64,128] exponential(f)
}}"""
    with_library = fuse(text)
    assert {k.kind for k in with_library.kernels} == {"kCustom", "exponential"}
    without = fuse(text, library_fusion=False)
    assert [k.kind for k in without.kernels] == ["kLoop"]
    assert any("no-library mode" in n for n in without.notes)


# ------------------------------------------------------------------------------------------
# XLA's own cases (shared/corpus/fusion), through the shared conformance runner
# ------------------------------------------------------------------------------------------


def _cpu_cases():
    from tests.conformance import runner

    try:
        cases = runner.load_manifest()
    except FileNotFoundError:
        return []
    return [c for c in cases if c["pass"] in ("cpu_instruction_fusion", "transpose_folding")]


@pytest.mark.parametrize("case", _cpu_cases(), ids=lambda c: c["test"])
def test_corpus_case(case, corpus_dir):
    from tests.conformance import runner

    result = runner.run_case(case)
    known = runner.load_known_failures()
    if result.name in known:
        assert not result.ok, f"{result.name} now passes: remove it from known_failures.tsv"
        assert known[result.name].startswith("stale label")
    else:
        assert result.ok, (result.problems, result.error)


def test_corpus_covers_every_non_manual_cpu_case(corpus_dir):
    cases = _cpu_cases()  # the corpus_dir fixture skips this test where the corpus is missing
    assert len(cases) == 15 and all(not c["expect"].get("manual") for c in cases)


def _corpus_program(corpus_dir, test):
    path = corpus_dir / "fusion" / f"cpu_instruction_fusion__{test}.hlo"
    program = Program.from_module(hlofuse.loads(path.read_text()))
    ctx = make_context(Options(backend="cpu"))
    ctx.pass_name = "fusion"
    from hlofuse.passes.cpu import CpuPolicy
    from hlofuse.passes.instruction_fusion import InstructionFusion

    changed = InstructionFusion(CpuPolicy()).run(program, ctx)
    return program, ctx, changed


def test_stale_label_small_constant_in_fusion_xla_0_10_2_behaviour(corpus_dir):
    program, ctx, changed = _corpus_program(corpus_dir, "SmallConstantInFusion")
    root = program.entry.root
    assert changed and root.fusion_kind == "kLoop"
    assert Counter(n.opcode for n in root.fused.nodes()) == Counter(add=2, parameter=3)
    assert {d.rule for d in ctx.decisions if d.producer in ("b", "c")} == {"CPU-NON-SCALAR-CONSTANT"}


def test_stale_label_no_fuse_reduce_major_xla_0_10_2_behaviour(corpus_dir):
    program, ctx, changed = _corpus_program(corpus_dir, "NoFuseReduceMajor")
    root = program.entry.root
    assert changed and root.opcode == "fusion"
    assert Counter(n.opcode for n in root.fused.nodes())["reduce"] == 1


def test_every_cpu_rule_has_a_test():
    """Each rule the cpu pipeline asks is exercised by name in these tests (refused cases;
    the allowed cases sit beside them)."""
    from pathlib import Path

    from hlofuse.rules import load_all

    here = Path(__file__).resolve().parent
    text = "".join((here / f).read_text() for f in ("test_cpu_fusion.py", "test_instruction_fusion.py"))
    mine = [r for r in load_all().values() if "cpu" in r.pipelines and r.id.startswith(("CPU-", "IF-"))]
    missing = [r.id for r in mine if r.id not in text
               and not r.id.startswith("IF-INPLACE-")]  # the in-place ones are listed in IN_PLACE_RULES
    assert len(mine) >= 25
    assert not missing
