"""Explaining kernel boundaries of an already fused XLA:CPU module (the cpu pipeline's
explain_boundary): the answer is the CPU rule that kept the two kernels apart."""

from __future__ import annotations

from pathlib import Path

import hlofuse
from hlofuse.decision import Verdict
from hlofuse.graph import Program
from hlofuse.pipeline import Options, get_pipeline, make_context

REPO = Path(__file__).resolve().parent.parent


def _explainer(text_or_path):
    module = hlofuse.load(str(text_or_path)) if isinstance(text_or_path, Path) else hlofuse.loads(text_or_path)
    program = Program.from_module(module)
    spec = get_pipeline("cpu", None)
    ctx = make_context(Options(backend="cpu"))
    return program, (lambda p, c: spec.explain_boundary(program.entry[p], program.entry[c], ctx))


def test_library_dot_and_its_epilogue():
    after = next((REPO / "sample_dumps" / "cpu" / "mlp").glob("*cpu_after_optimizations.txt"))
    program, why = _explainer(after)
    d = why("ynn_fusion.2", "broadcast_maximum_fusion.1")
    assert d.verdict == Verdict.BLOCKED
    # XLA's first reason: the dot's fusion is in the do-not-duplicate set because it cannot be
    # fused anywhere (a library fusion); the facts say so
    assert d.rule == "IF-DO-NOT-DUPLICATE" and "library fusion" in d.reason
    d = why("broadcast_maximum_fusion.1", "ynn_fusion.1")
    assert d.rule == "CPU-CUSTOM-FUSION-CONSUMER"


def test_expensive_producer_with_two_users_and_reuse():
    program, why = _explainer("""HloModule m
f1 {
  p = f32[64] parameter(0)
  ROOT e = f32[64] exponential(p)
}
f2 {
  q = f32[64] parameter(0)
  ROOT b = f32[64,100] broadcast(q), dimensions={0}
}
f3 {
  r = f32[64] parameter(0)
  ROOT n = f32[64] negate(r)
}
ENTRY e {
  x = f32[64] parameter(0)
  ex = f32[64] fusion(x), kind=kLoop, calls=f1
  bb = f32[64,100] fusion(ex), kind=kLoop, calls=f2
  nn = f32[64] fusion(ex), kind=kLoop, calls=f3
  ROOT t = (f32[64,100], f32[64]) tuple(bb, nn)
}""")
    assert why("ex", "bb").rule == "CPU-EXPENSIVE-REUSE"
    assert why("ex", "nn").rule == "IF-EXPENSIVE-DUPLICATION"


def test_view_through_get_tuple_element():
    after = next((REPO / "sample_dumps" / "cpu" / "argsort_rows").glob("*cpu_after_optimizations.txt"))
    program, why = _explainer(after)
    d = why("sort.0", "broadcast_select_fusion")
    assert d is not None and d.rule == "CPU-NOT-LOOP-FUSIBLE"


def test_what_would_fuse_has_no_reason():
    program, why = _explainer("""HloModule m
f1 {
  p = f32[64] parameter(0)
  ROOT n = f32[64] negate(p)
}
f2 {
  q = f32[64] parameter(0)
  ROOT s = f32[64] sine(q)
}
ENTRY e {
  x = f32[64] parameter(0)
  a = f32[64] fusion(x), kind=kLoop, calls=f1
  ROOT b = f32[64] fusion(a), kind=kLoop, calls=f2
}""")
    assert why("a", "b") is None  # XLA:CPU would have fused them: nothing to blame
