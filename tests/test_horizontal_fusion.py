"""HorizontalLoopFusion at its two replayed XLA commits: P (76da7301, jaxlib 0.4.35, the legacy
pipeline's default) and N (84d72608, 2025-01-15, the commit shared/corpus/fusion comes from).

Each test runs one HLO module through both variants and asserts both outcomes, so mixing the
variants up (a P-only rule asked at N, an N switch leaking into P) fails here.  The differences
are listed in docs/xla/legacy-gpu-pipeline.md §0.4 and §11.4."""

from __future__ import annotations

import pytest

import hlofuse
from hlofuse.gpu import GpuConfig
from hlofuse.gpu import test_device as a6000_test_device
from hlofuse.graph import Program
from hlofuse.passes.horizontal_fusion import run_loop
from hlofuse.pipeline import Options, make_context
from hlofuse.rules import REGISTRY, XLA_COMMITS, load_all
from hlofuse.rules.horizontal_fusion import LOOP_N, LOOP_P, loop_fusion_xla

load_all()


def program(text: str) -> Program:
    return Program.from_module(hlofuse.loads("HloModule t\n" + text))


def replay(text: str, xla: str, **options):
    """(changed, program after the pass, {(producer, consumer): Decision}) for one variant."""
    prog = program(text)
    ctx = make_context(Options(backend="gpu", pipeline="legacy"))
    ctx.pipeline = "legacy"
    ctx.pass_name = "horizontal_loop_fusion"
    ctx.gpu_config = GpuConfig(a6000_test_device())
    changed = run_loop(prog, ctx, xla=xla, **options)
    decisions = {(d.producer, d.consumer): d for d in ctx.decisions if d is not None}
    return changed, prog, decisions


def horizontal_fusions(prog: Program) -> list:
    return [n for g in prog.non_fusion_graphs() for n in g
            if n.opcode == "fusion" and n.fused.name.endswith("horizontally_fused_computation")]


# -- the variants themselves ----------------------------------------------------------------


def test_the_variants_are_pinned_and_p_is_the_default():
    assert LOOP_P.commit == XLA_COMMITS["legacy"] and LOOP_N.commit == XLA_COMMITS["corpus"]
    assert loop_fusion_xla("P") is LOOP_P and loop_fusion_xla("n") is LOOP_N and loop_fusion_xla(LOOP_N) is LOOP_N
    with pytest.raises(ValueError, match="unknown HorizontalLoopFusion variant"):
        loop_fusion_xla("T")
    assert _default_of(run_loop, "xla") == "P"


def _default_of(function, parameter: str):
    """A parameter's default as the source spells it (a compiled function keeps no
    __defaults__ or signature: hlofuse.native)."""
    import ast

    from hlofuse.native import source_path

    source = source_path(function.__module__).read_text()
    found = next(node for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.FunctionDef) and node.name == function.__name__)
    args = found.args.posonlyargs + found.args.args
    defaults = dict(zip([a.arg for a in args][len(args) - len(found.args.defaults):], found.args.defaults))
    defaults.update((a.arg, d) for a, d in zip(found.args.kwonlyargs, found.args.kw_defaults) if d is not None)
    return ast.literal_eval(defaults[parameter])


def test_rules_dropped_at_n_are_not_asked_there_and_n_only_rules_not_at_p():
    p_rules = set(LOOP_P.fusible_rules + LOOP_P.candidate_rules + LOOP_P.span_rules)
    n_rules = set(LOOP_N.fusible_rules + LOOP_N.candidate_rules + LOOP_N.span_rules)
    assert p_rules - n_rules == {"HF-NOT-ROW-MAJOR", "HF-SHARED-PARAMETER", "HF-DIFFERENT-SIZE", "HF-UNROLL-COST"}
    assert n_rules - p_rules == {"HF-NON-DEFAULT-MEMORY-SPACE", "HF-DUS-SHARED-OPERAND"}
    for rule_id in n_rules - p_rules:
        assert REGISTRY[rule_id].xla.commit == XLA_COMMITS["corpus"] and "(N only)" in REGISTRY[rule_id].summary
    for rule_id in p_rules - n_rules:
        assert REGISTRY[rule_id].xla.commit == XLA_COMMITS["legacy"] and "P only" in REGISTRY[rule_id].doc


# -- candidates -----------------------------------------------------------------------------

SHARED_PARAMETER = """
mul { a = f16[123]{0} parameter(0) b = f16[123]{0} parameter(1) ROOT m = f16[123]{0} multiply(a, b) }
add { a = f16[123]{0} parameter(0) b = f16[123]{0} parameter(1) ROOT s = f16[123]{0} add(a, b) }
ENTRY e {
  p0 = f16[123]{0} parameter(0)
  p1 = f16[123]{0} parameter(1)
  p2 = f16[123]{0} parameter(2)
  f1 = f16[123]{0} fusion(p0, p1), kind=kLoop, calls=mul
  f2 = f16[123]{0} fusion(p2, p1), kind=kLoop, calls=add
  ROOT t = (f16[123]{0}, f16[123]{0}) tuple(f1, f2)
}"""


def test_a_shared_parameter_blocks_at_p_only():
    changed, _, decisions = replay(SHARED_PARAMETER, "P")
    assert not changed
    assert decisions[("f1", "t")].rule == decisions[("f2", "t")].rule == "HF-SHARED-PARAMETER"
    assert decisions[("f1", "t")].facts["parameter"] == "p1"

    changed, prog, decisions = replay(SHARED_PARAMETER, "N")
    assert changed and decisions[("f1", "t")].rule is None and decisions[("f2", "t")].rule is None
    (fusion,) = horizontal_fusions(prog)
    assert fusion.fusion_kind == "kLoop"
    assert [op.opcode for op in fusion.fused.root.operands] == ["multiply", "add"]


DUS = """
dus1 { a = f32[8]{0} parameter(0) u = f32[2]{0} parameter(1) i = s32[] parameter(2)
       ROOT d = f32[8]{0} dynamic-update-slice(a, u, i) }
dus2 { a = f32[8]{0} parameter(0) u = f32[2]{0} parameter(1) i = s32[] parameter(2)
       ROOT d = f32[8]{0} dynamic-update-slice(a, u, i) }
ENTRY e {
  x = f32[8]{0} parameter(0)
  u = f32[2]{0} parameter(1)
  v = f32[2]{0} parameter(2)
  i = s32[] parameter(3)
  n = f32[8]{0} negate(x)
  a = f32[8]{0} fusion(n, u, i), kind=kLoop, calls=dus1
  b = f32[8]{0} fusion(n, v, i), kind=kLoop, calls=dus2
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(a, b)
}"""


def test_dus_fusions_sharing_a_computed_operand_fuse_at_p_only():
    # P bans shared *parameters* only (i is one: it is shared, so P refuses); with i made distinct
    # P's ban no longer applies while N's DUS ban (any shared operand: n) still does.
    distinct = DUS.replace("b = f32[8]{0} fusion(n, v, i)", "b = f32[8]{0} fusion(n, v, j)").replace(
        "i = s32[] parameter(3)", "i = s32[] parameter(3)\n  j = s32[] parameter(4)")
    changed, prog, decisions = replay(distinct, "P")
    assert changed and decisions[("a", "t")].rule is None and len(horizontal_fusions(prog)) == 1

    changed, _, decisions = replay(distinct, "N")
    assert not changed
    assert decisions[("a", "t")].rule == decisions[("b", "t")].rule == "HF-DUS-SHARED-OPERAND"
    assert decisions[("a", "t")].facts["operand"] == "n"


BITCAST_OPERANDS = """
one { p = f32[4]{0} parameter(0) ROOT n = f32[4]{0} negate(p) }
two { p = f32[4]{0} parameter(0) ROOT e = f32[4]{0} exponential(p) }
ENTRY e {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  a = f32[4]{0} fusion(x), kind=kLoop, calls=one
  b = f32[4]{0} fusion(y), kind=kLoop, calls=two
  ab = f32[2,2]{1,0} bitcast(a)
  bb = f32[2,2]{1,0} bitcast(b)
  ROOT t = (f32[2,2]{1,0}, f32[2,2]{1,0}) tuple(ab, bb)
}"""


def test_candidates_are_found_through_bitcasts_at_n_only():
    changed, prog, decisions = replay(BITCAST_OPERANDS, "P")
    assert not changed and not horizontal_fusions(prog)
    assert ("a", "t") not in decisions  # P's LatestNonGteAncestor stops at the bitcast
    changed, prog, decisions = replay(BITCAST_OPERANDS, "N")
    assert changed and decisions[("a", "t")].rule is None and len(horizontal_fusions(prog)) == 1


CONCAT_INPUT = """
c1 { p = f32[1]{0} parameter(0) q = f32[2]{0} parameter(1) ROOT c = f32[3]{0} concatenate(p, q), dimensions={0} }
c2 { p = f32[4]{0} parameter(0) q = f32[5]{0} parameter(1) ROOT c = f32[9]{0} concatenate(p, q), dimensions={0} }
ENTRY e {
  p = f32[1]{0} parameter(0)
  q = f32[2]{0} parameter(1)
  r = f32[4]{0} parameter(2)
  s = f32[5]{0} parameter(3)
  x = f32[3]{0} fusion(p, q), kind=kInput, calls=c1
  y = f32[9]{0} fusion(r, s), kind=kInput, calls=c2
  ROOT t = (f32[3]{0}, f32[9]{0}) tuple(x, y)
}"""


def test_concatenation_input_fusions_are_candidates_at_n_only():
    assert replay(CONCAT_INPUT, "P")[0] is False
    changed, prog, _ = replay(CONCAT_INPUT, "N")
    (fusion,) = horizontal_fusions(prog)
    assert changed and fusion.fusion_kind == "kInput"  # different shapes: the sliced mode


MEMORY_SPACES = """
ENTRY e {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0:S(5)} parameter(1)
  a = f32[4]{0} copy(x)
  b = f32[4]{0} copy(y)
  ROOT t = (f32[4]{0}, f32[4]{0}) tuple(a, b)
}"""


def test_an_operand_in_another_memory_space_blocks_at_n_only():
    changed, _, decisions = replay(MEMORY_SPACES, "P")
    assert changed and decisions[("b", "t")].rule is None
    changed, _, decisions = replay(MEMORY_SPACES, "N")
    assert not changed
    blocked = decisions[("b", "t")]
    assert blocked.rule == "HF-NON-DEFAULT-MEMORY-SPACE" and blocked.facts["space"] == 5
    assert "its operand y" in blocked.reason
    assert decisions[("a", "t")].rule == "HF-NO-PARTNER"


NON_ROW_MAJOR = """
one { p = s32[2,3]{0,1} parameter(0) ROOT n = s32[2,3]{0,1} negate(p) }
two { p = s32[3,4]{1,0} parameter(0) ROOT n = s32[3,4]{1,0} negate(p) }
ENTRY e {
  x = s32[2,3]{0,1} parameter(0)
  y = s32[3,4]{1,0} parameter(1)
  a = s32[2,3]{0,1} fusion(x), kind=kLoop, calls=one
  b = s32[3,4]{1,0} fusion(y), kind=kLoop, calls=two
  ROOT t = (s32[2,3]{0,1}, s32[3,4]{1,0}) tuple(a, b)
}"""


def test_non_row_major_kernels_are_bitcast_before_flattening_at_n_and_refused_at_p():
    changed, _, decisions = replay(NON_ROW_MAJOR, "P")
    assert not changed and decisions[("a", "t")].rule == "HF-NOT-ROW-MAJOR"
    changed, prog, _ = replay(NON_ROW_MAJOR, "N")
    (fusion,) = horizontal_fusions(prog)
    assert changed and fusion.fusion_kind == "kInput"
    reshapes = [n for n in fusion.fused if n.opcode == "reshape"]
    first = next(r for r in reshapes if r.operands[0].opcode == "bitcast")
    bitcast = first.operands[0]
    # same bytes as s32[2,3]{0,1}, listed major to minor with the default layout
    assert bitcast.shape.dims == (3, 2) and tuple(bitcast.shape.minor_to_major) == (1, 0)
    assert bitcast.operands[0].opcode == "negate"
    assert sum(1 for r in reshapes if r.operands[0].opcode == "negate") == 1  # the row-major one


# -- spans ----------------------------------------------------------------------------------

SQRT3 = "{ p = f32[8]{0} parameter(0) a = f32[8]{0} sqrt(p) b = f32[8]{0} sqrt(a) ROOT c = f32[8]{0} sqrt(b) }"
UNROLL = f"s1 {SQRT3}\ns2 {SQRT3}" + """
ENTRY e {
  x = f32[8]{0} parameter(0)
  y = f32[8]{0} parameter(1)
  a = f32[8]{0} fusion(x), kind=kLoop, calls=s1
  b = f32[8]{0} fusion(y), kind=kLoop, calls=s2
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(a, b)
}"""


def test_the_unroll_cost_limit_applies_at_p_only():
    changed, _, decisions = replay(UNROLL, "P")
    assert not changed
    assert {d.rule for d in decisions.values()} == {"HF-UNROLL-COST", "HF-NO-PARTNER"}
    changed, _, decisions = replay(UNROLL, "N")
    assert changed and decisions[("a", "t")].rule is None and decisions[("b", "t")].rule is None


SIZES = """
two_ops { p = f32[8]{0} parameter(0) n = f32[8]{0} negate(p) ROOT e = f32[8]{0} exponential(n) }
ENTRY e {
  x = f32[8]{0} parameter(0)
  y = f32[8]{0} parameter(1)
  a = f32[8]{0} fusion(x), kind=kLoop, calls=two_ops
  b = f32[8]{0} negate(y)
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(a, b)
}"""


def test_unequal_instruction_counts_split_spans_at_p_only():
    changed, _, decisions = replay(SIZES, "P")
    assert not changed and decisions[("a", "t")].rule == "HF-DIFFERENT-SIZE"
    changed, prog, _ = replay(SIZES, "N")
    assert changed and len(horizontal_fusions(prog)) == 1


TIE = """
ENTRY e {
  x = f32[8]{0} parameter(0)
  y = f32[8]{0} parameter(1)
  a = f32[8]{0} negate(x)
  b = f32[8]{0} negate(y)
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(b, a)
}"""


def test_ties_are_broken_by_operand_order_at_p_and_by_unique_id_at_n():
    """Equal sort keys: P's stable sort keeps the consumer's operand order (b first); N's key
    ends in the unique id, so the instruction defined first (a) comes first."""
    for xla, first in (("P", "y"), ("N", "x")):
        changed, prog, _ = replay(TIE, xla)
        (fusion,) = horizontal_fusions(prog)
        assert changed and fusion.operands[0].name == first, xla


# -- which computations ---------------------------------------------------------------------

WHILE = """
body {
  a = (s8[]) parameter(0)
  b = s8[] get-tuple-element(a), index=0
  c = s8[] add(b, b)
  d = s8[] multiply(b, b)
  e = s8[] subtract(c, d)
  ROOT t = (s8[]) tuple(e)
}
cond { p = (s8[]) parameter(0) ROOT r = pred[] constant(true) }
ENTRY e {
  p = (s8[]) parameter(0)
  ROOT r = (s8[]) while(p), condition=cond, body=body
}"""


def test_n_fuses_inside_while_bodies_unless_told_entry_only():
    assert replay(WHILE, "P")[0] is False  # P: the entry computation only
    changed, prog, decisions = replay(WHILE, "N")
    assert changed and decisions[("c", "e")].rule is None and decisions[("c", "e")].computation == "body"
    assert replay(WHILE, "N", only_entry=True)[0] is False  # N's only_entry_computation


def test_consumers_with_one_operand_are_skipped_at_n():
    text = """
ENTRY e {
  x = f32[8]{0} parameter(0)
  a = f32[8]{0} negate(x)
  ROOT t = (f32[8]{0}) tuple(a)
}"""
    assert replay(text, "P")[2][("a", "t")].rule == "HF-NO-PARTNER"
    assert replay(text, "N")[2] == {}
