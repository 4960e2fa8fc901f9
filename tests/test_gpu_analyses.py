"""XLA:GPU fusion analyses (hlofuse/gpu/): thresholds at their edges, layouts, heroes, the
budget, in-place safety, emitter kinds, and the differences between the 2024 and 2026 eras."""

from __future__ import annotations

import pytest

import hlofuse
from hlofuse.gpu import GpuConfig
from hlofuse.gpu import test_device as a6000_test_device
from hlofuse.gpu import budget, emitter, fusible, heroes, in_place, reductions, shapes, transposes
from hlofuse.graph import Program
from hlofuse.rules import instruction_facts
from hlofuse.parse import parse_shape

CFG = GpuConfig(a6000_test_device(), era="2024")
CFG26 = GpuConfig(a6000_test_device(), era="2026")

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }"


def entry(body: str, extra: str = "") -> Program:
    return Program.from_module(hlofuse.loads(f"HloModule t\n{ADD}\n{extra}\nENTRY e {{\n{body}\n}}"))


def reduce_node(shape: str, dims: str, out: str):
    prog = entry(f"p = {shape} parameter(0)\nc = f32[] constant(0)\n"
                 f"ROOT r = {out} reduce(p, c), dimensions={{{dims}}}, to_apply=add")
    return prog.entry["r"]


# -- reductions -----------------------------------------------------------------------------


@pytest.mark.parametrize("minor, contiguous", [(32, True), (64, True), (31, False), (4, True), (3, False)])
def test_row_reduction_threshold(minor, contiguous):
    r = reduce_node(f"f32[100,{minor}]{{1,0}}", "1", "f32[100]{0}")
    dims = reductions.reduction_dimensions(r)
    assert dims.is_row and dims.dims == (1, 100, minor)
    assert reductions.is_contiguous_reduction(r, CFG) is contiguous


def test_column_reduction_thresholds():
    # [major kept, reduced, minor kept]: reduced < 32 prefers the loop emitter
    assert not reductions.is_contiguous_reduction(reduce_node("f32[31,64]{1,0}", "0", "f32[64]{0}"), CFG)
    assert reductions.is_contiguous_reduction(reduce_node("f32[32,64]{1,0}", "0", "f32[64]{0}"), CFG)
    # reduced < 64 and kept minor < 32
    assert not reductions.is_contiguous_reduction(reduce_node("f32[40,16]{1,0}", "0", "f32[16]{0}"), CFG)


def test_contiguity_is_judged_on_the_physical_layout():
    # logical dims {0} reduced of a {0,1} layout: dim 0 is the minor one physically -> a row reduction
    r = reduce_node("f32[64,100]{0,1}", "0", "f32[100]{0}")
    assert reductions.reduction_dimensions(r) == reductions.ReductionDimensions(True, (1, 100, 64))


@pytest.mark.parametrize("minor, batch, race_free", [(16384, 1, True), (16385, 1, False), (1024, 8, True),
                                                     (1024, 9, False)])
def test_row_race_free_bounds(minor, batch, race_free):
    dims = reductions.ReductionDimensions(True, (batch, 10, minor))
    assert reductions.is_race_free(dims, CFG) is race_free


def test_race_free_bound_follows_the_ptxas_thread_count():
    dims = reductions.ReductionDimensions(True, (1, 10, 10000))
    assert reductions.is_race_free(dims, CFG)
    assert not reductions.is_race_free(dims, CFG.replace(row_reduction_min_threads=512))


def test_column_race_free_bound():
    assert reductions.is_race_free(reductions.ReductionDimensions(False, (1, 4096, 64)), CFG)
    assert not reductions.is_race_free(reductions.ReductionDimensions(False, (1, 4097, 64)), CFG)


# -- shapes and transposes ------------------------------------------------------------------


def test_bitcast_facts():
    assert shapes.reshape_is_bitcast(parse_shape("f32[4,8]{1,0}"), parse_shape("f32[32]{0}"))
    assert not shapes.reshape_is_bitcast(parse_shape("f32[4,8]{0,1}"), parse_shape("f32[32]{0}"))
    assert shapes.transpose_is_bitcast(parse_shape("f32[4,8]{1,0}"), parse_shape("f32[8,4]{0,1}"), [1, 0])
    assert not shapes.transpose_is_bitcast(parse_shape("f32[4,8]{1,0}"), parse_shape("f32[8,4]{1,0}"), [1, 0])
    assert shapes.subshape_count(parse_shape("(f32[2], (s32[], f32[3]))")) == 5


def transpose_of(shape: str, out: str, dims: str):
    prog = entry(f"p = {shape} parameter(0)\nROOT t = {out} transpose(p), dimensions={{{dims}}}")
    return prog.entry["t"]


def test_tiled_transpose_needs_large_minor_dimensions():
    assert transposes.tiled_transpose(transpose_of("f32[64,32]{1,0}", "f32[32,64]{1,0}", "1,0"), CFG)
    assert transposes.tiled_transpose(transpose_of("f32[8,4]{1,0}", "f32[4,8]{1,0}", "1,0"), CFG) is None


def test_copy_is_never_a_tiled_transpose_but_always_physically_transposing():
    prog = entry("p = f32[64,32]{1,0} parameter(0)\nROOT c = f32[64,32]{0,1} copy(p)")
    c = prog.entry["c"]
    assert transposes.tiled_transpose(c, CFG) is None
    assert transposes.is_physically_transposing(c)
    assert transposes.transposes_minor_dimension(c)
    assert fusible.is_universally_loop_fusible(c, CFG)


def test_2026_transposes_need_default_layouts_and_compare_bit_widths():
    t = transpose_of("f32[64,32]{0,1}", "f32[32,64]{1,0}", "1,0")
    assert transposes.tiled_transpose(t, CFG) is not None  # 2024: logical dimensions only
    assert transposes.tiled_transpose(t, CFG26) is None  # 2026: normalisation needs default layouts
    a = transposes.TransposeDescription((32, 64), (1, 0), 32)
    b = transposes.TransposeDescription((32, 64), (1, 0), 16)
    assert a.is_equivalent(b) and not a.is_equivalent(b, era_2026=True)


# -- heroes, fusibility, budget -------------------------------------------------------------

EPILOGUE = """
fr {
  p = f32[128,64]{1,0} parameter(0)
  c = f32[] constant(0)
  r = f32[128]{0} reduce(p, c), dimensions={1}, to_apply=add
  ROOT n = f32[128]{0} negate(r)
}
fa {
  p = f32[128,64]{1,0} parameter(0)
  q = f32[128]{0} parameter(1)
  c = f32[] constant(0)
  r = f32[128]{0} reduce(p, c), dimensions={1}, to_apply=add
  ROOT a = f32[128]{0} add(r, q)
}
"""


def test_hero_looks_through_single_operand_epilogues_only():
    prog = entry("p = f32[128,64]{1,0} parameter(0)\nq = f32[128]{0} parameter(1)\n"
                 "f = f32[128]{0} fusion(p), kind=kInput, calls=fr\n"
                 "g = f32[128]{0} fusion(p, q), kind=kLoop, calls=fa\n"
                 "ROOT t = (f32[128]{0}, f32[128]{0}) tuple(f, g)", EPILOGUE)
    f, g = prog.entry["f"], prog.entry["g"]
    assert heroes.find_non_trivial_hero(f.fused.root, CFG).opcode == "reduce"
    assert heroes.find_non_trivial_hero(g.fused.root, CFG).opcode == "add"  # add(reduce, q) stops the walk
    assert fusible.is_reduce_input_fusion(f, CFG) and not fusible.is_reduce_input_fusion(g, CFG)
    assert fusible.choose_fusion_kind(prog.entry["p"], f, CFG) == "kInput"


def test_hero_cache_follows_changes_of_the_computation():
    prog = entry("p = f32[128,64]{1,0} parameter(0)\nf = f32[128]{0} fusion(p), kind=kInput, calls=fr\n"
                 "ROOT t = (f32[128]{0}) tuple(f)", EPILOGUE)
    f = prog.entry["f"]
    assert heroes.find_non_trivial_hero(f.fused.root, CFG).opcode == "reduce"
    from hlofuse.graph import Node, add_operand

    body = f.fused
    extra = Node("e", "exponential", f.fused.root.shape)
    body.add(extra)
    add_operand(extra, body.root)
    body.root = extra
    assert heroes.find_non_trivial_hero(body.root, CFG).opcode == "reduce"
    mixed = Node("m", "maximum", body.root.shape)
    body.add(mixed)
    add_operand(mixed, body.root)
    add_operand(mixed, body["n"])
    body.root = mixed
    assert heroes.find_non_trivial_hero(body.root, CFG).opcode == "maximum"


def test_shared_memory_estimates_per_era():
    row = reduce_node("f32[100,64]{1,0}", "1", "f32[100]{0}")
    col = reduce_node("f32[64,100]{1,0}", "0", "f32[100]{0}")
    assert budget.shared_memory_usage(row, CFG) == 32 * 4
    assert budget.shared_memory_usage(col, CFG) == 4 * 32 * 33 * 4
    assert budget.shared_memory_usage(col, CFG26) == 32 * 129 * 4


def test_a_fusions_shared_memory_and_reductions_are_its_instructions_sums():
    """A fused body's estimate is the sum over every instruction of it, though only the kinds
    that can need shared memory or be reductions are asked (the others count 0)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from replay_speed import generate_for
    from hlofuse.pipeline import Options, replay

    result = replay(hlofuse.loads(generate_for("legacy", 1000)), Options(backend="gpu", pipeline="legacy"))
    fused = Program.from_module(result.module)
    fusions = [n for g in fused.graphs.values() for n in g if n.opcode == "fusion" and n.fused is not None]
    for cfg in (CFG, CFG26):
        using = [f for f in fusions if budget.shared_memory_usage(f, cfg)]
        reducing = [f for f in fusions if budget.unnested_reductions(f, cfg)]
        assert using and reducing and any(n.opcode == "transpose" and budget.shared_memory_usage(n, cfg)
                                          for f in using for n in f.fused.nodes())
        for f in fusions:
            nodes = list(f.fused.nodes())
            assert budget.shared_memory_usage(f, cfg) == sum(budget.shared_memory_usage(n, cfg) for n in nodes)
            assert budget.unnested_reductions(f, cfg) == sum(budget.unnested_reductions(n, cfg) for n in nodes)


def test_input_fusible_answers_of_fusions_without_a_reduce_or_transpose_are_the_hero_searches():
    """is_reduce_input_fusion and is_input_fusible_transpose answer False for a body without a
    reduce (a transpose) without searching heroes: the same answer as the search."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from replay_speed import generate_for
    from hlofuse.gpu.properties import fusion_roots
    from hlofuse.pipeline import Options, replay

    seen = set()
    for pipeline in ("legacy", "priority"):
        result = replay(hlofuse.loads(generate_for(pipeline, 1000)), Options(backend="gpu", pipeline=pipeline))
        fused = Program.from_module(result.module)
        for f in (n for g in fused.graphs.values() for n in g if n.opcode == "fusion" and n.fused is not None):
            for cfg in (CFG, CFG26):
                roots = fusion_roots(f.fused)
                heroes_ = [heroes.find_non_trivial_hero(r, cfg) for r in roots]
                searched = any(reductions.is_real_reduction_hero(r, h, cfg) for r, h in zip(roots, heroes_))
                assert fusible.is_reduce_input_fusion(f, cfg) == searched
                tiled = any(transposes.tiled_transpose(h, cfg) is not None for h in heroes_)
                assert fusible.is_input_fusible_transpose(f, cfg) == (tiled and not f.fusion_kind == "kCustom")
                seen.add((searched, tiled, "reduce" in heroes.body_opcodes(f.fused)))
    # reduction fusions, tiled-transpose fusions, and fusions answered without a search
    assert {(True, False, True), (False, True, False), (False, False, False)} <= seen


def _hero_from_tables(node, cfg):
    """FindNonTrivialHero answered from the whole-body tables (heroes._hero_tables)."""
    graph = node.graph
    hero = node
    while heroes.is_intermediate(hero, 1) and heroes._inside(hero.operands[0], graph):
        hero = hero.operands[0]
    transposes, concats, nontrivial_below = heroes._hero_tables(graph, cfg)
    for table in (transposes, concats):
        candidates = table.get(hero.uid, ())
        if len(candidates) == 1 and not nontrivial_below[candidates[0].uid]:
            return candidates[0]
    return hero if hero.opcode == "reduce" else node


def test_the_hero_search_asked_per_instruction_answers_as_the_whole_body_tables():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from replay_speed import generate_for
    from hlofuse.pipeline import Options, replay

    found = set()
    for pipeline in ("legacy", "priority"):
        result = replay(hlofuse.loads(generate_for(pipeline, 1000)), Options(backend="gpu", pipeline=pipeline))
        fused = Program.from_module(result.module)
        bodies = [n.fused for g in fused.graphs.values() for n in g if n.opcode == "fusion" and n.fused is not None]
        for cfg in (CFG, CFG26):
            for body in bodies:
                transposes, concats, below = heroes._hero_tables(body, cfg)
                search = heroes._HeroSearch(cfg)
                for node in reversed(body.post_order()):  # users first: entries asked in every order
                    assert search.heroes(heroes._TRANSPOSES, node, body) == transposes.get(node.uid, ())
                    assert search.heroes(heroes._CONCATS, node, body) == concats.get(node.uid, ())
                    assert search.nontrivial_below(node, body) == below[node.uid]
                for node in body.post_order():
                    hero = heroes.find_non_trivial_hero(node, cfg)
                    assert hero is _hero_from_tables(node, cfg)
                    found.add(hero.opcode)
    assert {"transpose", "reduce"} <= found


def test_operand_budget_counts_distinct_operands_and_tuple_outputs():
    params = "\n".join(f"p{i} = f32[8]{{0}} parameter({i})" for i in range(100))
    concat = f"c = f32[800]{{0}} concatenate({', '.join(f'p{i}' for i in range(100))}), dimensions={{0}}"
    prog = entry(f"{params}\n{concat}\nROOT n = f32[800]{{0}} negate(c)")
    c, n = prog.entry["c"], prog.entry["n"]
    # consumer n has one operand: fusing c in adds 100 operands -> over the cap of 96
    assert budget.over_operand_budget(n, c, True) == {"operands": 100, "outputs": 2, "limit": 96}
    assert budget.over_operand_budget(c, prog.entry["p0"], True) is None  # adds nothing new


def test_in_place_refusal_of_a_mismatched_slice():
    prog = entry("p = f32[16]{0} parameter(0)\ni = s32[] constant(4)\n"
                 "s = f32[4]{0} slice(p), slice={[0:4]}\nn = f32[4]{0} negate(s)\n"
                 "ROOT d = f32[16]{0} dynamic-update-slice(p, s, i)")
    d = prog.entry["d"]
    reason, facts = instruction_facts.in_place_refusal(prog.entry["s"], d)
    assert reason == "IF-INPLACE-SLICE-INDEX" and facts == {"slice": "s", "dimension": 0}
    assert in_place.in_place_pairs(d) == [(0, (), ())]


def test_emitter_kinds():
    prog = entry("p = f32[128,64]{1,0} parameter(0)\nf = f32[128]{0} fusion(p), kind=kInput, calls=fr\n"
                 "t = f32[64,128]{1,0} transpose(p), dimensions={1,0}\n"
                 "ROOT r = (f32[128]{0}, f32[64,128]{1,0}) tuple(f, t)", EPILOGUE)
    assert emitter.fusion_emitter_kind(prog.entry["f"], CFG) == emitter.REDUCTION
    assert emitter.fusion_emitter_kind(prog.entry["t"], CFG) == emitter.TRANSPOSE


def test_merged_heroes_match_the_built_pair():
    from hlofuse.cost.legacy import _merged_shape, preview_fusion

    text = """
ft {
  p = f32[64,32]{1,0} parameter(0)
  ROOT t = f32[32,64]{1,0} transpose(p), dimensions={1,0}
}
fe {
  p = f32[32,64]{1,0} parameter(0)
  ROOT e = f32[32,64]{1,0} exponential(p)
}
"""
    prog = entry("p = f32[64,32]{1,0} parameter(0)\nt = f32[32,64]{1,0} fusion(p), kind=kInput, calls=ft\n"
                 "ROOT e = f32[32,64]{1,0} fusion(t), kind=kLoop, calls=fe", text)
    t, e = prog.entry["t"], prog.entry["e"]
    merged = _merged_shape(t, e, CFG)
    built = emitter.analyse(preview_fusion(t, e, CFG), CFG)
    assert emitter.emitter_kind(merged, CFG) == emitter.emitter_kind(built, CFG) == emitter.TRANSPOSE
    assert [h.opcode for h in merged.heroes] == [h.opcode for h in built.heroes] == ["transpose"]


def test_fusible_computations_exclude_reducers_and_calls():
    text = """
body { p = f32[8]{0} parameter(0) ROOT n = f32[8]{0} negate(p) }
"""
    prog = entry("p = f32[8]{0} parameter(0)\nc = f32[8]{0} call(p), to_apply=body\n"
                 "z = f32[] constant(0)\nROOT r = f32[] reduce(c, z), dimensions={0}, to_apply=add", text)
    names = [g.name for g in fusible.fusible_computations(prog, CFG)]
    assert names == ["e"]
