"""What the legacy XLA:GPU cost model remembers by structure (hlofuse.cost.structure) must be
the answer computed afresh for the very nodes asked about: each test asks the shortcut and the
long way and compares them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import hlofuse
from hlofuse.cost import legacy as cost_legacy
from hlofuse.cost.analysis import GpuHloCostAnalysis
from hlofuse.cost.profiles import profile_for
from hlofuse.gpu import gpu_config
from hlofuse.graph import Program
from hlofuse.pipeline import Options, make_context, replay

REPO = Path(__file__).resolve().parent.parent
LEGACY = Options(backend="gpu", pipeline="legacy", gpu="rtx2080ti")


def _generated(instructions: int):
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import replay_speed
    finally:
        sys.path.remove(str(REPO / "bench"))
    return hlofuse.loads(replay_speed.generate_for("legacy", instructions))


def _samples(*programs: str):
    import json

    manifest = json.loads((REPO / "sample_dumps" / "MANIFEST.json").read_text())
    for entry in manifest["programs"]:
        if entry["build"] == "gpu-legacy" and entry["gpu"] == "rtx2080ti" and entry["program"] in programs \
                and entry["files"].get("before_fusion"):
            yield hlofuse.load(str(REPO / "sample_dumps" / entry["path"] / entry["files"]["before_fusion"]))


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
def test_run_time_terms_remembered_by_structure_equal_the_ones_computed_afresh(monkeypatch):
    """Every EstimateRunTimes answer of FusionMerger and MultiOutputFusion during legacy replays
    (a generated module of repeated layers, real dumps) equals the one a fresh model computes
    for that very producer and those consumers, and most are answered from the memo."""
    model_class = cost_legacy.LegacyPerformanceModel
    terms = model_class.estimate_run_time_terms
    seen = {"asked": 0, "remembered": 0}

    def checked(self, producer, consumers, multi_output=False):
        before = len(self._terms)
        found = terms(self, producer, consumers, multi_output)
        seen["asked"] += 1
        seen["remembered"] += len(self._terms) == before
        fresh = model_class(self.cfg)  # its own analysis: nothing remembered
        assert found == fresh._estimate_run_time_terms(producer, list(consumers), multi_output), \
            (producer.name, [c.name for c in consumers], multi_output)
        return found

    monkeypatch.setattr(model_class, "estimate_run_time_terms", checked)
    for module in [_generated(2000), *_samples("cartpole_a_rng", "adam_update", "attention", "layer_norm")]:
        replay(module, LEGACY)
    assert seen["asked"] > 200 and seen["remembered"] > seen["asked"] // 2, seen


#: Two fusions of the same structure reading a tuple parameter through get-tuple-element: the
#: legacy analysis prices such a parameter by the leaves it reads (LegacyCostAnalysis).
_TUPLE_READERS = """
HloModule tuple_readers

first {
  t = (f32[256]{0}, f32[256,4]{1,0}) parameter(0)
  a = f32[256]{0} get-tuple-element(t), index=0
  ROOT n = f32[256]{0} negate(a)
}

second {
  t = (f32[256]{0}, f32[256,4]{1,0}) parameter(0)
  a = f32[256]{0} get-tuple-element(t), index=0
  ROOT n = f32[256]{0} negate(a)
}

ENTRY e {
  x = f32[256]{0} parameter(0)
  y = f32[256,4]{1,0} parameter(1)
  t = (f32[256]{0}, f32[256,4]{1,0}) tuple(x, y)
  f1 = f32[256]{0} fusion(t), kind=kLoop, calls=first
  f2 = f32[256]{0} fusion(t), kind=kLoop, calls=second
  ROOT r = (f32[256]{0}, f32[256]{0}) tuple(f1, f2)
}
"""


def test_legacy_analysis_by_structure_shares_a_tuple_parameter_priced_by_its_leaves():
    program = Program.from_module(hlofuse.loads(_TUPLE_READERS))
    cfg = gpu_config(make_context(LEGACY))
    shared = cost_legacy.LegacyCostAnalysis(profile_for(cfg.device))
    f1, f2 = program.entry.get("f1"), program.entry.get("f2")
    first, second = shared.properties(f1), shared.properties(f2)
    assert second is first  # one structure, analysed once
    plain = GpuHloCostAnalysis(profile_for(cfg.device)).properties(f1)
    assert first.operand_bytes != plain.operand_bytes  # the tuple parameter priced the legacy way
    for fusion in (f1, f2):
        alone = cost_legacy.LegacyCostAnalysis(profile_for(cfg.device))
        alone._by_structure = None  # analysed for itself
        assert alone.properties(fusion) == shared.properties(fusion)
        assert alone._fusion_info(fusion) == shared._fusion_info(fusion)
        assert alone.fused_ir_size(fusion, 0) == shared.fused_ir_size(fusion, 0)


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
def test_merger_ir_sizes_by_structure_equal_the_ones_computed_afresh(monkeypatch):
    """Every ProducerConsumerMergedTooLarge answer of legacy replays (merged IR size, basic-block
    splits) equals the one a model analysing each fusion for itself computes, and the IR sizes
    of fusions found by structure are read without unpacking their utilisations."""
    model_class = cost_legacy.LegacyPerformanceModel
    too_large = model_class.merged_too_large
    seen = {"asked": 0, "packed": 0}

    def checked(self, producer, consumer):
        found = too_large(self, producer, consumer)
        seen["asked"] += 1
        seen["packed"] += consumer.opcode == "fusion" and consumer.uid not in self.analysis._fusions
        fresh = model_class(self.cfg)
        fresh.analysis._by_structure = None  # every fusion analysed for itself
        assert found == too_large(fresh, producer, consumer), (producer.name, consumer.name)
        assert self.basic_block_splits(consumer) == fresh.basic_block_splits(consumer)
        return found

    monkeypatch.setattr(model_class, "merged_too_large", checked)
    for module in [_generated(2000), *_samples("cartpole_a_rng", "adam_update", "attention", "layer_norm")]:
        replay(module, LEGACY)
    assert seen["asked"] > 200 and seen["packed"] > seen["asked"] // 2, seen


_REDUCE = """
HloModule reduce_rows

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

body {
  x = f32[64,128]{1,0} parameter(0)
  n = f32[64,128]{1,0} negate(x)
  z = f32[] constant(0)
  ROOT r = f32[64]{0} reduce(n, z), dimensions={1}, to_apply=add
}

ENTRY e {
  p = f32[64,128]{1,0} parameter(0)
  z = f32[] constant(0)
  r = f32[64]{0} reduce(p, z), dimensions={1}, to_apply=add
  f = f32[64]{0} fusion(p), kind=kInput, calls=body
  ROOT t = (f32[64]{0}, f32[64]{0}) tuple(r, f)
}
"""


def test_shape_answers_are_keyed_by_the_shape_value():
    """The reduction facts and the structure keys are found by the shape itself (a Shape keeps
    its hash): an equal shape that is another object gets the same answers, and no
    module-level table keyed by id(shape) is left."""
    import pickle

    from hlofuse.cost import structure
    from hlofuse.gpu import reductions

    program = Program.from_module(hlofuse.loads(_REDUCE))
    cfg = gpu_config(make_context(LEGACY))
    reduce, fusion = program.entry.get("r"), program.entry.get("f")
    shape = reduce.operands[0].shape
    twin = pickle.loads(pickle.dumps(shape))  # equal, another object
    assert twin is not shape and twin == shape
    found = reductions.reduction_dimensions(reduce)
    assert reductions._reduction_dimensions(twin, "{1}") is found
    assert reductions._is_contiguous(twin, "{1}", cfg.warp_size) is reductions.is_contiguous_reduction(reduce, cfg)
    key = structure.node_key(reduce)
    assert key[1] is reduce.shape and key[5][0][1] is shape  # the shapes themselves
    assert structure.spelled_out_body_key(fusion.fused)[0][0] == ("parameter", 0, twin)
    for module in (structure, reductions):
        assert not [name for name in vars(module) if "BY_ID" in name or name == "_SHAPE_NUMBERS"]


def test_fusible_computations_read_again_only_the_computations_that_changed():
    """GetFusibleComputations reads every instruction of every computation (fused ones too): each
    computation's calls are remembered until it changes, and the answer after an edit is the
    one read afresh."""
    from hlofuse.gpu import fusible
    from hlofuse.graph import graph_cache

    program = Program.from_module(hlofuse.loads(_REDUCE))
    cfg = gpu_config(make_context(LEGACY))
    names = [g.name for g in fusible.fusible_computations(program, cfg)]
    assert names == [program.entry.name]  # not the reducer (called by reduces), not the fused body
    key = ("called apart", cfg.legacy)
    assert graph_cache(program.graphs["body"])[key] == ("add",)
    assert graph_cache(program.entry)[key] == ("add",)
    entry = program.entry
    entry.get("r").set_attr("metadata", "{op_name=\"edited\"}")  # an edit of the entry alone
    assert key not in graph_cache(entry) and graph_cache(program.graphs["body"])[key] == ("add",)
    assert fusible.fusible_computations(program, cfg) == fusible._fusible_computations(program, cfg)


def test_real_hero_remembered_per_body_version():
    """GetRealHeroForMultiOutputFusion of a fusion is asked by every hero rule of every pair: it
    is remembered until the body changes, and found again after."""
    from hlofuse.gpu.heroes import _real_hero, real_hero
    from hlofuse.graph import graph_cache

    program = Program.from_module(hlofuse.loads(_REDUCE))
    cfg = gpu_config(make_context(LEGACY))
    fusion = program.entry.get("f")
    hero = real_hero(fusion, cfg)
    assert hero.opcode == "reduce" and hero is _real_hero(fusion, cfg)
    assert ("real hero", cfg.token, fusion.fused.root.uid) in graph_cache(fusion.fused)
    before = fusion.fused.version
    program.entry.get("f").fused.root.set_attr("metadata", "{}")  # the body changes
    assert fusion.fused.version != before
    assert ("real hero", cfg.token, fusion.fused.root.uid) not in graph_cache(fusion.fused)
    assert real_hero(fusion, cfg) is hero
    assert real_hero(program.entry.get("r"), cfg) is program.entry.get("r")  # unfused: itself


def test_tiled_transpose_remembered_by_shapes_and_permutation():
    """GetDescriptionForTiledTransposeEmitter is asked by every hero, budget and kind question:
    answered from what it depends on (both shapes, the permutation, the config), as afresh, in
    both eras."""
    from hlofuse.gpu import transposes

    program = Program.from_module(hlofuse.loads("""
HloModule t
ENTRY e {
  x = f32[64,128]{1,0} parameter(0)
  ROOT t = f32[128,64]{1,0} transpose(x), dimensions={1,0}
}"""))
    node = program.entry.get("t")
    for options in (LEGACY, Options(backend="gpu", pipeline="priority", gpu="h100_sxm")):
        cfg = gpu_config(make_context(options))
        found = transposes.tiled_transpose(node, cfg)
        fresh = transposes._tiled_transpose_2024(node, cfg) if cfg.legacy else transposes._tiled_transpose_2026(node)
        assert found is not None and found == fresh
        key = (node.shape, node.operands[0].shape, "{1,0}", cfg.token)
        assert transposes._TILED[key] is found and transposes.tiled_transpose(node, cfg) is found
