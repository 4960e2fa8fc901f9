"""The legacy XLA:GPU rules one by one: each refuses the minimal pair its docstring describes
and lets a near miss through, so a rule that stops firing (or fires too widely) fails here.

Most rules are asked directly (`evaluate` on one Candidate); the ones that read a pass's
state (the indexing evaluation, the consumer MOF picks) run their pass.  The corpus
conformance tests and the sample dumps cover the rest; the last test checks that every
legacy GPU rule is named in one of these tests."""

from __future__ import annotations

from pathlib import Path

import pytest

import hlofuse
from hlofuse.cost.legacy import LegacyPerformanceModel
from hlofuse.gpu import GpuConfig
from hlofuse.gpu import test_device as a6000_test_device
from hlofuse.graph import Program
from hlofuse.pipeline import Options, make_context
from hlofuse.rules import Candidate, evaluate, load_all
from hlofuse.rules.candidates import HorizontalCandidate, MofCandidate, SpanCandidate

load_all()  # the rule modules register themselves on import

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }"


def program(entry: str, computations: str = "") -> Program:
    return Program.from_module(hlofuse.loads(f"HloModule t\n{ADD}\n{computations}\nENTRY e {{\n{entry}\n}}"))


def context(era: str = "2024", **changes):
    ctx = make_context(Options(backend="gpu", pipeline="legacy"))
    ctx.pipeline = "legacy"
    ctx.gpu_config = GpuConfig(a6000_test_device(), era=era).replace(**changes)
    return ctx


def ask(rule_id: str, prog: Program, producer: str, consumer: str, ctx=None, **facts):
    """The rule's objection facts for (producer, consumer), or None when it lets them fuse."""
    ctx = ctx or context()
    g = prog.entry
    outcome = evaluate((rule_id,), _candidate(rule_id, g[producer], g[consumer], ctx, facts))
    if outcome.allowed:
        return None
    assert outcome.blocked_by.id == rule_id
    return outcome.facts


def _candidate(rule_id: str, producer, consumer, ctx, facts: dict) -> Candidate:
    """The candidate the pass asking `rule_id` makes, with `facts`."""
    if rule_id.startswith("HF-") and "left" in facts:
        span = {"max_batch": 64, "accum_outputs": 0, "accum_io": 0, "accum_cost": 0, **facts}
        return SpanCandidate(producer, consumer, ctx, None, span.pop("sliced", False), **span)
    if rule_id.startswith("HF-"):
        return HorizontalCandidate(producer, consumer, ctx, **facts)
    if rule_id.startswith("MOF-") and facts:
        return MofCandidate(producer, consumer, ctx, reachable=None, **facts)
    return Candidate(producer, consumer, ctx, **facts)


def decided(prog: Program, passes: list[str], producer: str, consumer: str):
    """Replays `passes` of the legacy pipeline and returns the Decision for the pair."""
    from hlofuse.pipeline import replay

    result = replay(prog.to_module(), Options(backend="gpu", pipeline="legacy", passes=passes))
    found = [d for d in result.decisions if d.producer == producer and d.consumer == consumer]
    assert found, [(d.producer, d.consumer, d.rule) for d in result.decisions]
    return found[-1]


# -- GpuFusible: reductions as producers ----------------------------------------------------


def reduce_then(consumer: str, reduced: str = "f32[64,128]{1,0}", out: str = "f32[64]{0}",
                dims: str = "1", extra_root: bool = False) -> Program:
    root = "ROOT t = (f32[64]{0}, f32[64]{0}) tuple(n, r)" if extra_root else ""
    n_prefix = "" if extra_root else "ROOT "
    return program(f"""
  x = {reduced} parameter(0)
  z = f32[] constant(0)
  r = {out} reduce(x, z), dimensions={{{dims}}}, to_apply=add
  {n_prefix}n = {out} {consumer}(r)
  {root}""")


def test_reduction_epilogue_disabled_only_when_the_option_is_off():
    prog = reduce_then("negate")
    assert ask("GF-REDUCTION-EPILOGUE-DISABLED", prog, "r", "n") is None
    off = context(reduction_epilogue_fusion=False)
    assert ask("GF-REDUCTION-EPILOGUE-DISABLED", prog, "r", "n", off) == {"producer": "r"}


def test_reduction_not_race_free_above_16384_row_elements():
    big = reduce_then("sqrt", reduced="f32[100000]{0}", out="f32[]", dims="0")
    facts = ask("GF-REDUCTION-NOT-RACE-FREE", big, "r", "n")
    assert facts is not None and "100000" in facts["dims"]
    small = reduce_then("sqrt", reduced="f32[16384]{0}", out="f32[]", dims="0")
    assert ask("GF-REDUCTION-NOT-RACE-FREE", small, "r", "n") is None


def test_reduction_with_two_users_takes_no_epilogue():
    shared = reduce_then("negate", extra_root=True)
    assert ask("GF-REDUCTION-MULTIPLE-USERS", shared, "r", "n") == {"producer": "r", "users": 2}
    assert ask("GF-REDUCTION-MULTIPLE-USERS", reduce_then("negate"), "r", "n") is None


TWO_OUTPUTS = """
two {
  p = f32[8]{0} parameter(0)
  a = f32[8]{0} negate(p)
  b = f32[8]{0} exponential(p)
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(a, b)
}
one {
  p = f32[8]{0} parameter(0)
  ROOT a = f32[8]{0} negate(p)
}
"""


def test_multi_output_producer_is_never_fused_into_a_consumer():
    prog = program("""
  x = f32[8]{0} parameter(0)
  f = (f32[8]{0}, f32[8]{0}) fusion(x), kind=kLoop, calls=two
  g = f32[8]{0} get-tuple-element(f), index=0
  s = f32[8]{0} fusion(x), kind=kLoop, calls=one
  ROOT n = f32[8]{0} add(g, s)""", TWO_OUTPUTS)
    assert ask("GF-PRODUCER-MULTI-OUTPUT", prog, "f", "g") == {"producer": "f"}
    assert ask("GF-PRODUCER-MULTI-OUTPUT", prog, "s", "n") is None


def test_nothing_is_fused_into_the_output_of_a_scatter():
    prog = program("""
  a = f32[8]{0} parameter(0)
  i = s32[2,1]{1,0} parameter(1)
  u = f32[2]{0} parameter(2)
  s = f32[8]{0} scatter(a, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  ROOT n = f32[8]{0} negate(s)""")
    assert ask("GF-SCATTER-PRODUCER", prog, "s", "n") == {"producer": "s"}
    assert ask("GF-SCATTER-PRODUCER", prog, "a", "s") is None


# -- FusionFitsInBudget ---------------------------------------------------------------------


def concat_of(count: int) -> Program:
    params = "\n".join(f"  p{i} = f32[2]{{0}} parameter({i})" for i in range(count))
    names = ", ".join(f"p{i}" for i in range(count))
    return program(f"{params}\n  c = f32[{2 * count}]{{0}} concatenate({names}), dimensions={{0}}\n"
                   f"  ROOT n = f32[{2 * count}]{{0}} negate(c)")


def test_operand_budget_counts_the_operands_a_fusion_would_take():
    facts = ask("GF-OPERAND-BUDGET", concat_of(100), "c", "n")
    assert facts["operands"] == 100 and facts["limit"] == 96
    assert ask("GF-OPERAND-BUDGET", concat_of(90), "c", "n") is None  # 90 operands + 2 outputs fit


# -- FusionHeroesAreCompatible --------------------------------------------------------------

HEROES = """
tiled {
  p = f32[128,64]{1,0} parameter(0)
  ROOT t = f32[64,128]{1,0} transpose(p), dimensions={1,0}
}
row_reduce {
  p = f32[64,128]{1,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[64]{0} reduce(p, z), dimensions={1}, to_apply=add
}
small_transpose {
  p = f32[4,8]{1,0} parameter(0)
  ROOT t = f32[8,4]{1,0} transpose(p), dimensions={1,0}
}
combine {
  p = f32[64,128]{1,0} parameter(0)
  a = f32[64,128]{1,0} add(p, p)
  ROOT n = f32[64,128]{1,0} negate(a)
}
elementwise {
  p = f32[64,128]{1,0} parameter(0)
  ROOT n = f32[64,128]{1,0} negate(p)
}
"""


def heroes_program() -> Program:
    return program("""
  x = f32[128,64]{1,0} parameter(0)
  y = f32[64,128]{1,0} parameter(1)
  s = f32[4,8]{1,0} parameter(2)
  t = f32[64,128]{1,0} fusion(x), kind=kInput, calls=tiled
  r = f32[64]{0} fusion(y), kind=kInput, calls=row_reduce
  u = f32[8,4]{1,0} fusion(s), kind=kLoop, calls=small_transpose
  c = f32[64,128]{1,0} fusion(t), kind=kLoop, calls=combine
  e = f32[64,128]{1,0} fusion(t), kind=kLoop, calls=elementwise
  ROOT out = (f32[64,128]{1,0}, f32[64]{0}, f32[8,4]{1,0}, f32[64,128]{1,0}, f32[64,128]{1,0}) tuple(t, r, u, c, e)""",
                   HEROES)


def test_a_tiled_transpose_and_a_reduction_share_no_kernel():
    prog = heroes_program()
    for era in ("2024", "2026"):
        facts = ask("GF-TRANSPOSE-AND-REDUCTION", prog, "t", "r", context(era))
        assert facts is not None and "transpose" in facts["first_hero"] and "reduce" in facts["second_hero"]
    assert ask("GF-TRANSPOSE-AND-REDUCTION", prog, "t", "e") is None


def test_a_nested_transpose_beside_a_reduction_is_refused_from_2026_on():
    prog = heroes_program()
    assert ask("GF-NESTED-TRANSPOSE", prog, "r", "u", context("2026")) is not None
    assert ask("GF-NESTED-TRANSPOSE", prog, "r", "u", context("2024")) is None


def test_a_tiled_transpose_read_by_non_elementwise_work_would_become_untiled():
    prog = heroes_program()
    # (XLA looks at the parameter's user's users: an add at the root itself would pass)
    facts = ask("GF-TRANSPOSE-WOULD-UNTILE", prog, "t", "c")
    assert facts is not None and (facts["first"], facts["second"]) == ("t", "c")
    assert ask("GF-TRANSPOSE-WOULD-UNTILE", prog, "t", "e") is None  # a negate keeps the tile


# -- GpuInstructionFusion -------------------------------------------------------------------


def slices_of(count: int) -> str:
    lines = ["sum_of_slices {", "  p = f32[64]{0} parameter(0)"]
    for i in range(count):
        lines.append(f"  s{i} = f32[48]{{0}} slice(p), slice={{[{i}:{i + 48}]}}")
    acc = "s0"
    for i in range(1, count):
        lines.append(f"  a{i} = f32[48]{{0}} add({acc}, s{i})")
        acc = f"a{i}"
    lines[-1] = lines[-1].replace(f"  a{count - 1} =", f"  ROOT a{count - 1} =")
    return "\n".join(lines) + "\n}"


@pytest.mark.parametrize("slices, blocked", [(16, True), (15, False)])
def test_code_duplication_counts_the_indices_a_producer_is_read_at(slices, blocked):
    prog = program("""
  x = f32[64]{0} parameter(0)
  two = f32[] constant(2)
  b = f32[64]{0} broadcast(two), dimensions={}
  y = f32[64]{0} multiply(x, b)
  ROOT s = f32[48]{0} fusion(y), kind=kLoop, calls=sum_of_slices""", slices_of(slices))
    d = decided(prog, ["fusion"], "y", "s")
    if blocked:
        assert d.rule == "IF-GPU-CODE-DUPLICATION" and d.facts["emitted"] == slices
    else:
        assert d.rule is None


@pytest.mark.parametrize("reads, blocked", [("twice", True), ("once", False)])
def test_a_concatenate_is_emitted_once_per_kernel(reads, blocked):
    body = {"twice": """  s1 = f32[4]{0} slice(p), slice={[0:4]}
  s2 = f32[4]{0} slice(p), slice={[4:8]}
  ROOT a = f32[4]{0} add(s1, s2)""", "once": """  s1 = f32[4]{0} slice(p), slice={[0:4]}
  ROOT a = f32[4]{0} negate(s1)"""}[reads]
    prog = program("""
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  c = f32[8]{0} concatenate(x, y), dimensions={0}
  ROOT f = f32[4]{0} fusion(c), kind=kLoop, calls=reads_c""", "reads_c {\n  p = f32[8]{0} parameter(0)\n" + body + "\n}")
    d = decided(prog, ["fusion"], "c", "f")
    if blocked:
        assert d.rule == "IF-GPU-CONCAT-DUPLICATION" and d.facts["emitted"] == 2
    else:
        assert d.rule is None


# -- FusionMerger ---------------------------------------------------------------------------


def test_nothing_is_merged_into_a_custom_fusion():
    prog = program("""
  x = f32[64,128]{1,0} parameter(0)
  f = f32[64,128]{1,0} fusion(x), kind=kLoop, calls=elementwise
  g = f32[64,128]{1,0} fusion(f), kind=kCustom, calls=combine
  ROOT h = f32[64,128]{1,0} fusion(f), kind=kLoop, calls=combine""", HEROES)
    assert ask("FM-CUSTOM-FUSION-USER", prog, "f", "g") == {"producer": "f", "user": "g"}
    assert ask("FM-CUSTOM-FUSION-USER", prog, "f", "h") is None


# -- MultiOutputFusion ----------------------------------------------------------------------


def chain_with_slices(chain: int, slices: int) -> str:
    lines = ["long_chain {", "  p = f32[4096]{0} parameter(0)"]
    prev = "p"
    for i in range(chain):
        lines.append(f"  n{i} = f32[4096]{{0}} negate({prev})")
        prev = f"n{i}"
    lines[-1] = "  ROOT" + lines[-1][1:]
    lines.append("}")
    lines += ["many_slices {", "  p = f32[4096]{0} parameter(0)"]
    acc = None
    for i in range(slices):
        lines.append(f"  s{i} = f32[2048]{{0}} slice(p), slice={{[{i}:{i + 2048}]}}")
        if acc is None:
            acc = f"s{i}"
        else:
            lines.append(f"  a{i} = f32[2048]{{0}} add({acc}, s{i})")
            acc = f"a{i}"
    lines[-1] = "  ROOT" + lines[-1][1:]
    lines.append("}")
    return "\n".join(lines)


def test_multi_output_fusion_needs_a_loop_fusible_producer_that_writes_no_buffer_in_place():
    prog = program("""
  x = f32[8]{0} parameter(0)
  u = f32[2]{0} parameter(1)
  i = s32[] parameter(2)
  d = f32[8]{0} dynamic-update-slice(x, u, i)
  n = f32[8]{0} negate(d)
  k = u32[2]{0} parameter(3)
  r = u32[8]{0} custom-call(k), custom_call_target="cu_threefry2x32_ffi"
  b = u32[8]{0} add(r, r)
  e = f32[8]{0} exponential(x)
  m = f32[8]{0} multiply(e, x)
  ROOT t = (f32[8]{0}, f32[8]{0}, u32[8]{0}, f32[8]{0}, f32[8]{0}) tuple(d, n, b, e, m)""")
    assert ask("MOF-PRODUCER-IN-PLACE", prog, "d", "n") == {"producer": "d", "operand": 0}
    assert ask("MOF-PRODUCER-IN-PLACE", prog, "e", "m") is None
    assert ask("MOF-PRODUCER-NOT-LOOP-FUSIBLE", prog, "r", "b") == {"producer": "r", "opcode": "custom-call"}
    assert ask("MOF-PRODUCER-NOT-LOOP-FUSIBLE", prog, "e", "m") is None


@pytest.mark.parametrize("chain, too_large", [(200, True), (20, False)])
def test_multi_output_fusion_refuses_a_merge_that_emits_too_much_ir(chain, too_large):
    prog = program("""
  x = f32[4096]{0} parameter(0)
  f = f32[4096]{0} fusion(x), kind=kLoop, calls=long_chain
  g = f32[2048]{0} fusion(f), kind=kLoop, calls=many_slices
  ROOT t = (f32[4096]{0}, f32[2048]{0}) tuple(f, g)""", chain_with_slices(chain, 60))
    ctx = context()
    model = LegacyPerformanceModel(ctx.gpu_config)
    facts = ask("MOF-TOO-LARGE-IR", prog, "f", "g", ctx, model=model)
    assert (facts is not None) is too_large
    if too_large:
        assert facts["merged"] > 10000


def test_a_producer_joins_the_preferred_consumer_only():
    prog = program("""
  x = f32[64,128]{1,0} parameter(0)
  y = f32[64,128]{1,0} parameter(1)
  p = f32[64,128]{1,0} exponential(x)
  a = f32[64,128]{1,0} negate(p)
  b = f32[64,128]{1,0} add(p, y)
  ROOT t = (f32[64,128]{1,0}, f32[64,128]{1,0}) tuple(a, b)""")
    chosen = decided(prog, ["multi_output_fusion"], "p", "a")
    other = decided(prog, ["multi_output_fusion"], "p", "b")
    assert chosen.rule is None
    assert other.rule == "MOF-OTHER-CONSUMER-PREFERRED" and other.facts["chosen"] == "a"


# -- horizontal fusion ----------------------------------------------------------------------


def siblings(a: str, b: str, shapes: str = "f32[8]{0}, f32[8]{0}", computations: str = "") -> Program:
    return program(f"""
  x = f32[8]{{0}} parameter(0)
  y = f32[8]{{0}} parameter(1)
  {a}
  {b}
  ROOT t = ({shapes}) tuple(a, b)""", computations)


def test_a_kernel_that_fills_the_gpu_is_not_fused_horizontally():
    big = 8192 * 8192 + 1
    prog = program(f"""
  x = f32[{big}]{{0}} parameter(0)
  a = f32[{big}]{{0}} negate(x)
  ROOT t = (f32[{big}]{{0}}) tuple(a)""")
    assert ask("HF-TOO-LARGE", prog, "a", "t")["elements"] == big
    assert ask("HF-TOO-LARGE", siblings("a = f32[8]{0} negate(x)", "b = f32[8]{0} negate(y)"), "a", "t") is None
    # sliced-input mode: 128x2048 elements at most
    assert ask("HF-TOO-LARGE", program("""
  x = f32[262145]{0} parameter(0)
  a = f32[262145]{0} negate(x)
  ROOT t = (f32[262145]{0}) tuple(a)"""), "a", "t", sliced=True) is not None


def negates(count: int) -> str:
    lines = ["negates {", "  p = f32[8]{0} parameter(0)"]
    prev = "p"
    for i in range(count):
        lines.append(f"  n{i} = f32[8]{{0}} negate({prev})")
        prev = f"n{i}"
    lines[-1] = "  ROOT" + lines[-1][1:]
    return "\n".join(lines + ["}"])


def test_big_fusions_stay_out_of_sliced_horizontal_fusion():
    prog = siblings("a = f32[8]{0} fusion(x), kind=kLoop, calls=negates", "b = f32[8]{0} negate(y)",
                    computations=negates(40))
    facts = ask("HF-TOO-MANY-INSTRUCTIONS", prog, "a", "t", sliced=True)
    assert facts["count"] == 41 and facts["limit"] == 30
    assert ask("HF-TOO-MANY-INSTRUCTIONS", prog, "a", "t") is None  # kLoop mode allows 128


def test_span_rules_compare_each_candidate_with_the_first_of_its_span():
    prog = siblings("a = (f32[8]{0}, f32[8]{0}) fusion(x), kind=kLoop, calls=two",
                    "b = f32[8]{0} negate(y)", "(f32[8]{0}, f32[8]{0}), f32[8]{0}", TWO_OUTPUTS)
    g = prog.entry
    facts = ask("HF-DIFFERENT-OUTPUT-COUNT", prog, "b", "t", left=g["a"])
    assert facts["count"] == 1 and facts["left_count"] == 2

    sized = siblings("a = f32[8]{0} fusion(x), kind=kLoop, calls=one", "b = f32[16]{0} broadcast(y), dimensions={0}",
                     "f32[8]{0}, f32[16]{0}", TWO_OUTPUTS)
    g = sized.entry
    facts = ask("HF-DIFFERENT-SIZE", sized, "b", "t", left=g["a"])
    assert facts["count"] == 1 and facts["left_count"] == 2  # param + negate vs a bare op
    facts = ask("HF-DIFFERENT-SHAPES", sized, "b", "t", left=g["a"])
    assert facts["shape"].startswith("f32[16]") and facts["left_shape"].startswith("f32[8]")
    # sliced-input mode flattens and concatenates: different shapes are fine there
    assert ask("HF-DIFFERENT-SHAPES", sized, "b", "t", left=g["a"], sliced=True) is None
    same = siblings("a = f32[8]{0} negate(x)", "b = f32[8]{0} negate(y)")
    g = same.entry
    for rule_id in ("HF-DIFFERENT-OUTPUT-COUNT", "HF-DIFFERENT-SIZE", "HF-DIFFERENT-SHAPES"):
        assert ask(rule_id, same, "b", "t", left=g["a"]) is None, rule_id


@pytest.mark.parametrize("rule_id, key, limit_key, at_limit, below", [
    ("HF-BATCH-FULL", "accum_outputs", "max_batch", 32, 31),
    ("HF-PARAMETER-SIZE", "accum_io", None, 500, 499),  # 8 bytes each, 4000 bytes at most
    ("HF-UNROLL-COST", "accum_cost", None, 100, 99),
])
def test_span_budgets_stop_a_span_at_their_limit(rule_id, key, limit_key, at_limit, below):
    prog = siblings("a = f32[8]{0} negate(x)", "b = f32[8]{0} negate(y)")
    g = prog.entry
    extra = {"left": g["a"], "max_batch": 32, "accum_outputs": 0, "accum_io": 0, "accum_cost": 0}
    assert ask(rule_id, prog, "b", "t", **{**extra, key: at_limit}) is not None
    assert ask(rule_id, prog, "b", "t", **{**extra, key: below}) is None


# -- coverage -------------------------------------------------------------------------------


def test_every_legacy_gpu_rule_is_named_by_a_test_or_fires_on_the_corpus(corpus_dir):  # skips without it
    """Each GF-/IF-GPU-/FM-/MOF-/HF- rule of the legacy pipeline is exercised by name in the
    GPU tests (test_horizontal_fusion.py for horizontal loop fusion's P and N variants), or
    refuses some pair when the corpus cases of the legacy passes are replayed."""
    from hlofuse.rules import load_all
    from tests.conformance import runner

    here = Path(__file__).resolve().parent
    text = "".join(p.read_text() for p in [here / "test_gpu_rules.py", here / "test_legacy_pipeline.py",
                                            here / "test_horizontal_fusion.py"])
    seen: set[str] = set()
    make_ctx = runner.make_ctx

    def remembering(pass_runner, case):
        ctx = make_ctx(pass_runner, case)
        contexts.append(ctx)
        return ctx

    contexts: list = []
    legacy_passes = {"gpu_instruction_fusion", "fusion_merger", "multi_output_fusion", "horizontal_loop_fusion"}
    runner.make_ctx = remembering
    try:
        runner.run_all([c for c in runner.load_manifest() if c["pass"] in legacy_passes])
    finally:
        runner.make_ctx = make_ctx
    for ctx in contexts:
        seen.update(d.rule for d in ctx.decisions if d is not None and d.rule)
    mine = [r for r in load_all().values() if "legacy" in r.pipelines
            and r.id.startswith(("GF-", "IF-GPU-", "FM-", "MOF-", "HF-"))]
    assert len(mine) >= 55
    missing = [r.id for r in mine if r.id not in text and r.id not in seen]
    assert not missing, missing
