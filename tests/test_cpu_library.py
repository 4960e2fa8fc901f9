"""XLA:CPU library (YNNPACK) fusion: dot-library-rewriter replayed on request, and checked against
real XLA:CPU: inlining the library fusions of XLA's before-fusion snapshots and rebuilding them
gives XLA's library fusions back."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import hlofuse
from hlofuse import graph as g
from hlofuse.passes.cpu import inline_library_fusions
from hlofuse.passes.cpu_library import dot_library_rewriter
from hlofuse.pipeline import Options, replay

REPO = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("cpu_agreement", REPO / "bench" / "cpu_agreement.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _library_kernels(table):
    return {c: Counter({s: n for s, n in cnt.items() if s[0] == "fusion" and s[1] == "kCustom"})
            for c, cnt in table.items()}


def test_rebuilds_xla_library_fusions_of_the_samples():
    bench = _bench()
    total = same = extra = 0
    for build, program, before, _ in bench.sample_programs(builds=("cpu",)):
        module = hlofuse.load(str(before))
        prog = g.Program.from_module(module)
        inline_library_fusions(prog)
        dot_library_rewriter(prog)
        theirs = _library_kernels(bench.kernel_table(module))
        ours = _library_kernels(bench.kernel_table(prog.to_module()))
        total += sum(sum(c.values()) for c in theirs.values())
        same += sum(sum((theirs[c] & ours.get(c, Counter())).values()) for c in theirs)
        extra += sum(sum((ours[c] - theirs.get(c, Counter())).values()) for c in ours)
    assert total >= 10
    assert same == total and extra == 0


DOT_EXP = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  x = f32[64,128] parameter(0)
  w = f32[128,32] parameter(1)
  ex = f32[64,128] exponential(x)
  d = f32[64,32] dot(ex, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[4,4] parameter(2)
  tiny = f32[4,4] dot(t, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  y = f32[256,256] parameter(3)
  two = f32[] constant(2)
  b = f32[256,256] broadcast(two), dimensions={}
  m = f32[256,256] multiply(y, b)
  e2 = f32[256,256] exponential(m)
  z = f32[] constant(0)
  r = f32[256] reduce(e2, z), dimensions={1}, to_apply=add
  ROOT out = (f32[64,32], f32[4,4], f32[256]) tuple(d, tiny, r)
}"""


def test_individual_dots_do_not_grow_reductions_do():
    prog = g.Program.from_module(hlofuse.loads(DOT_EXP))
    assert dot_library_rewriter(prog)
    fusions = {n.fused.root.opcode: n for n in prog.entry if n.opcode == "fusion"}
    assert set(fusions) == {"dot", "reduce"}  # the 4x4 dot is too small for YNNPACK
    assert sorted(n.opcode for n in fusions["dot"].fused.nodes()) == ["dot", "parameter", "parameter"]
    grown = Counter(n.opcode for n in fusions["reduce"].fused.nodes())
    assert grown["exponential"] == 1 and grown["multiply"] == 1 and grown["broadcast"] == 1
    assert all(f.name.startswith("ynn_fusion") and f.fusion_kind == "kCustom" for f in fusions.values())


def test_pipeline_replays_the_rewriter_only_when_asked():
    default = replay(hlofuse.loads(DOT_EXP), Options(backend="cpu"))
    assert not any(k.kind == "kCustom" for k in default.kernels)
    asked = replay(hlofuse.loads(DOT_EXP), Options(backend="cpu", library_fusion=True))
    assert sum(1 for k in asked.kernels if k.kind == "kCustom") == 2
    assert any("dot-library-rewriter" in n for n in asked.notes)
    # the exp stays outside the dot's library fusion: nothing is fused into library fusions
    assert any(d.rule == "CPU-CUSTOM-FUSION-CONSUMER" for d in asked.decisions if d.producer == "ex")
