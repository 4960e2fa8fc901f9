"""The shortcuts of the cleanup passes and of horizontal loop fusion's candidate lists change
no answer: CSE still merges, DCE still removes chains, and the shared-parameter rule answers
the same with or without the pass's precomputed candidate ids."""

from __future__ import annotations

from hlofuse import loads
from hlofuse.graph import Program
from hlofuse.passes.cleanup import cse_graph, dce_graph
from hlofuse.rules import REGISTRY
from hlofuse.rules.candidates import HorizontalCandidate
from hlofuse.rules import horizontal_fusion  # noqa: F401  (registers the HF- rules)

FUSED = """
HloModule m
fused {
  a = f32[8]{0} parameter(0)
  n1 = f32[8]{0} negate(a)
  n2 = f32[8]{0} negate(a)
  ROOT s = f32[8]{0} add(n1, n2)
}
ENTRY e {
  p = f32[8]{0} parameter(0)
  ROOT f = f32[8]{0} fusion(p), kind=kLoop, calls=fused
}
"""


def _program(text: str) -> Program:
    return Program.from_module(loads(text))


def test_cse_merges_duplicates_and_leaves_a_clean_body_alone():
    body = _program(FUSED).graphs["fused"]
    assert cse_graph(body)
    assert sorted(n.name for n in body.nodes()) == ["a", "n1", "s"]
    version = body.version
    assert not cse_graph(body)  # nothing left to merge: no edit
    assert body.version == version


def test_cse_tells_layouts_apart():
    text = FUSED.replace("n2 = f32[8]{0} negate(a)", "n2 = f32[8]{0} negate(a), metadata={op_name=\"x\"}")
    assert cse_graph(_program(text).graphs["fused"])  # metadata is ignored
    two_d = """
HloModule m
fused {
  a = f32[2,4]{1,0} parameter(0)
  t1 = f32[2,4]{1,0} copy(a)
  t2 = f32[2,4]{0,1} copy(a)
  ROOT s = (f32[2,4]{1,0}, f32[2,4]{0,1}) tuple(t1, t2)
}
ENTRY e {
  p = f32[2,4]{1,0} parameter(0)
  ROOT f = (f32[2,4]{1,0}, f32[2,4]{0,1}) fusion(p), kind=kLoop, calls=fused
}
"""
    assert not cse_graph(_program(two_d).graphs["fused"])


def test_dce_removes_a_dead_chain_and_nothing_when_all_is_used():
    text = """
HloModule m
ENTRY e {
  p = f32[8]{0} parameter(0)
  d1 = f32[8]{0} negate(p)
  d2 = f32[8]{0} exponential(d1)
  ROOT r = f32[8]{0} abs(p)
}
"""
    graph = _program(text).entry
    assert dce_graph(graph)
    assert sorted(n.name for n in graph.nodes()) == ["p", "r"]
    assert not dce_graph(graph)


def test_shared_parameter_same_with_precomputed_ids():
    text = """
HloModule m
ENTRY e {
  p = f32[8]{0} parameter(0)
  q = f32[8]{0} parameter(1)
  a = f32[8]{0} multiply(p, p)
  b = f32[8]{0} add(q, p)
  c = f32[8]{0} negate(q)
  ROOT t = (f32[8]{0}, f32[8]{0}, f32[8]{0}) tuple(a, b, c)
}
"""
    graph = _program(text).entry
    a, b, c, t = (graph[n] for n in ("a", "b", "c", "t"))
    check = REGISTRY["HF-SHARED-PARAMETER"].check
    for candidates in ([a, b, c], [a, c]):
        plain = check(HorizontalCandidate(a, t, None, candidates=candidates))
        fast = check(HorizontalCandidate(a, t, None, candidates=candidates,
                                         candidate_ids=frozenset(id(n) for n in candidates)))
        assert plain == fast
    assert check(HorizontalCandidate(a, t, None, candidates=[a, b, c]))["other"] == "b"
    assert check(HorizontalCandidate(a, t, None, candidates=[a, c])) is None
