"""The replay asks only the rules that can object to a pair, and walks post orders with an
iterator; neither may change a decision, a kernel or an order.  Each shortened rule list is
compared with the full list XLA's order gives, on the same inputs: the decisions must be the
same, Decision for Decision."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import hlofuse
from hlofuse.graph import Program
from hlofuse.pipeline import Options, replay
from hlofuse.rules.instruction_fusion import IN_PLACE_RULES

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from replay_speed import generate_for  # noqa: E402

from test_instruction_fusion import IN_PLACE_CASES  # noqa: E402

SAMPLES = ROOT / "sample_dumps"


def _decisions(result) -> list[dict]:
    return [d.to_dict() for d in result.decisions]


def _gpu_inputs() -> list:
    modules = [hlofuse.loads(generate_for("legacy", 1000))]
    modules += [hlofuse.loads(text) for text, _, _ in IN_PLACE_CASES.values()]
    return modules


def _cpu_inputs() -> list:
    modules = [hlofuse.loads(generate_for("cpu", 1000))]
    modules += [hlofuse.loads(text) for text, _, _ in IN_PLACE_CASES.values()]
    return modules


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
def test_cpu_in_place_rules_are_asked_only_of_consumers_that_update_in_place(monkeypatch):
    from hlofuse.rules import cpu as rc

    for text, producer, consumer in IN_PLACE_CASES.values():
        graph = Program.from_module(hlofuse.loads(text)).entry
        assert rc.should_fuse_after_output(graph[consumer]) == rc.CPU_SHOULD_FUSE_AFTER_OUTPUT
        plain = rc.should_fuse_after_output(graph[producer])  # none of the producers updates in place
        assert not set(IN_PLACE_RULES) & set(plain)
        assert [r for r in rc.CPU_SHOULD_FUSE_AFTER_OUTPUT if r not in IN_PLACE_RULES] == list(plain)
    options = Options(backend="cpu", pipeline="cpu")
    short = [_decisions(replay(m, options)) for m in _cpu_inputs()]
    monkeypatch.setattr(rc, "should_fuse_after_output", lambda consumer, *rest: rc.CPU_SHOULD_FUSE_AFTER_OUTPUT)
    full = [_decisions(replay(m, options)) for m in _cpu_inputs()]
    assert short == full
    assert any(d["rule"] in IN_PLACE_RULES for ds in full for d in ds)  # the in-place rules did decide


#: Pairs that reach every CPU rule the shortened lists leave out for other pairs: a constant
#: alone, a fusion producer, a concatenate of many operands, more than five reduces, an add a
#: dot is output-fused into; and the code-duplication count.
CPU_RULE_CASES = """HloModule m
add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
body {
  bp = f32[8] parameter(0)
  ROOT bn = f32[8] negate(bp)
}
ENTRY e {
  p = f32[8,16] parameter(0)
  v = f32[16] parameter(1)
  zero = f32[] constant(0)
  one = f32[] constant(1)
  big = f32[8,16] constant({...})
  d = f32[8] dot(p, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bias = f32[8] broadcast(one), dimensions={}
  a = f32[8] add(d, bias)
  na = f32[8] negate(a)
  f = f32[8] fusion(na), kind=kLoop, calls=body
  nf = f32[8] abs(f)
  e = f32[8,16] exponential(p)
  ab = f32[8,16] add(e, big)
  r1 = f32[8] reduce(e, zero), dimensions={1}, to_apply=add_f32
  r2 = f32[8] reduce(ab, zero), dimensions={1}, to_apply=add_f32
  r3 = f32[8] reduce(e, one), dimensions={1}, to_apply=add_f32
  r4 = f32[8] reduce(ab, one), dimensions={1}, to_apply=add_f32
  r5 = f32[8] reduce(p, zero), dimensions={1}, to_apply=add_f32
  r6 = f32[8] reduce(p, one), dimensions={1}, to_apply=add_f32
  r7 = f32[8] reduce(e, zero), dimensions={1}, to_apply=add_f32
  s12 = f32[8] add(r1, r2)
  s34 = f32[8] add(r3, r4)
  s56 = f32[8] add(r5, r6)
  s1234 = f32[8] add(s12, s34)
  s = f32[8] add(s1234, s56)
  s7 = f32[8] add(s, r7)
  c = f32[80] concatenate(s7, s7, s7, s7, s7, s7, s7, s7, s7, s7), dimensions={0}
  nc = f32[80] negate(c)
  ROOT t = (f32[80], f32[8]) tuple(nc, nf)
}
"""


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
def test_cpu_should_fuse_asks_only_rules_that_can_object_and_decides_the_same(monkeypatch):
    from hlofuse.rules import cpu as rc

    program = Program.from_module(hlofuse.loads(generate_for("cpu", 1000)))
    pairs = [(op, node) for node in program.entry.post_order() for op in node.operands]
    for p, c in pairs:  # every shortened list keeps XLA's order
        full = rc.should_fuse_after_output(c)
        short = rc.should_fuse_after_output(c, p, True)
        assert [r for r in full if r in short] == list(short)
        assert rc.should_fuse_before_output(p) == rc.CPU_SHOULD_FUSE_BEFORE_OUTPUT[:len(rc.should_fuse_before_output(p))]
    elementwise = next(rc.should_fuse_after_output(c, p, True) for p, c in pairs
                       if p.opcode == "multiply" and c.opcode not in ("fusion", "concatenate"))
    assert "CPU-CONSTANT-ALONE" not in elementwise and "CPU-CODE-DUPLICATION" not in elementwise
    options = Options(backend="cpu", pipeline="cpu", passes=("fusion",))
    inputs = [*_cpu_inputs(), hlofuse.loads(CPU_RULE_CASES)]
    short = [_decisions(replay(m, options)) for m in inputs]
    monkeypatch.setattr(rc, "may_object", lambda *args: True)
    monkeypatch.setattr(rc, "should_fuse_before_output", lambda producer: rc.CPU_SHOULD_FUSE_BEFORE_OUTPUT)
    rc._AFTER_OUTPUT.clear()
    try:
        full = [_decisions(replay(m, options)) for m in inputs]
    finally:
        rc._AFTER_OUTPUT.clear()
    assert short == full
    decided = {d["rule"] for ds in full for d in ds}
    for rule_id in ("CPU-NON-SCALAR-CONSTANT", "CPU-CONSTANT-ALONE", "CPU-FUSION-PRODUCER", "CPU-CONCATENATE",
                    "CPU-TOO-MANY-REDUCTIONS", "CPU-OUTPUT-FUSIBLE-ADD"):
        assert rule_id in decided, rule_id


def test_gpu_should_fuse_asks_only_rules_that_can_object_and_decides_the_same(monkeypatch):
    from hlofuse.rules import gpu_instruction_fusion as gif

    program = Program.from_module(hlofuse.loads(generate_for("legacy", 1000)))
    graph = program.entry
    pairs = [(op, node) for node in graph.post_order() for op in node.operands]
    asked = {gif.should_fuse_rules(p, c) for p, c in pairs}
    for p, c in pairs:  # every shortened list keeps XLA's order
        everything = gif.should_fuse_rules(p)
        short = gif.should_fuse_rules(p, c)
        assert [r for r in everything if r in short] == list(short)
    elementwise = next(gif.should_fuse_rules(p, c) for p, c in pairs
                       if p.opcode == "multiply" and c.opcode == "tanh")
    assert "GF-REDUCTION-NOT-RACE-FREE" not in elementwise and "GF-SCATTER-PRODUCER" not in elementwise
    assert len(asked) > 2
    options = Options(backend="gpu", pipeline="legacy", gpu="rtx2080ti")
    short = [_decisions(replay(m, options)) for m in _gpu_inputs()]
    monkeypatch.setattr(gif, "_may_object", lambda rule_id, producer, consumer: True)
    gif._SHOULD_FUSE.clear()
    try:
        full = [_decisions(replay(m, options)) for m in _gpu_inputs()]
    finally:
        gif._SHOULD_FUSE.clear()
    assert short == full
    assert any(d["rule"] == "GF-REDUCTION-EPILOGUE-NOT-ELEMENTWISE" for ds in full for d in ds)


def _recursive_post_order(graph) -> list[str]:
    """XLA's MakeInstructionPostOrder written recursively: from each user-less instruction in
    list order, control predecessors (last first) then operands, each visited once."""
    order: list[str] = []
    seen: set[int] = set()

    def visit(node):
        seen.add(node.uid)
        for child in graph.control_predecessors(node)[::-1] + node.operands:
            if child.uid not in seen:
                visit(child)
        order.append(node.name)

    for node in graph.nodes():
        if not node.users and node.uid not in seen:
            visit(node)
    return order


CONTROL = """HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  a = f32[4] negate(p0)
  b = f32[4] exponential(p0)
  c = f32[4] add(a, b), control-predecessors={b}
  d = f32[4] abs(p0), control-predecessors={c, a}
  ROOT t = (f32[4], f32[4]) tuple(c, d)
}
"""


@pytest.mark.parametrize("folder", sorted(p.name for p in SAMPLES.iterdir() if p.is_dir())[:3])
def test_post_order_is_the_recursive_search_on_samples(folder):
    files = sorted((SAMPLES / folder).glob("*/*before_optimizations.txt"))[:4]
    assert files
    for path in files:
        program = Program.from_module(hlofuse.loads(path.read_text()))
        for graph in program.graphs.values():
            assert [n.name for n in graph.post_order()] == _recursive_post_order(graph)


def test_post_order_visits_control_predecessors_last_first():
    program = Program.from_module(hlofuse.loads(CONTROL))
    assert program.has_control
    graph = program.entry
    assert [n.name for n in graph.post_order()] == _recursive_post_order(graph) == \
        ["p0", "b", "a", "c", "d", "t"]


def test_legacy_run_time_terms_are_the_verdicts_sums():
    """A legacy cost-model refusal names its terms from the verdict's own sums
    (estimate_run_time_terms): the totals are EstimateRunTimes' formula, the terms the sums it
    adds, priced once."""
    from hlofuse.cost.legacy import KERNEL_LAUNCH_OVERHEAD, LegacyPerformanceModel
    from hlofuse.cost.terms import CostTerms, legacy_terms
    from hlofuse.cost import durations as dur
    from hlofuse.gpu import gpu_config
    from hlofuse.passes.pipelines import LEGACY_FUSION
    from hlofuse.pipeline import make_context

    program = Program.from_module(hlofuse.loads(generate_for("legacy", 1000)))
    ctx = make_context(Options(backend="gpu", pipeline="legacy", gpu="rtx2080ti"))
    for stage in LEGACY_FUSION.stages[:3]:  # splitter, then both instruction fusions
        ctx.pass_name = stage.name
        stage.run(program, ctx)
    model = LegacyPerformanceModel(gpu_config(ctx))
    producers = [n for n in program.entry.post_order() if n.opcode == "fusion" and n.users]
    assert len(producers) > 20
    for producer in producers:
        users = list(producer.users)
        for multi_output in (False, True):
            found = model.estimate_run_time_terms(producer, users, multi_output)
            data = model.run_time(producer)
            reads = [model.unfused_read_time(data, producer, u) for u in users]
            parts = [model.fused_consumer_times(data, producer, u) for u in users]
            unfused = KERNEL_LAUNCH_OVERHEAD * (len(users) + 1) + data.exec_time + sum(reads)
            fused = KERNEL_LAUNCH_OVERHEAD * len(users) + sum(model.combine(*p) for p in parts) + (
                data.write_time if multi_output else 0)
            assert (found.times.unfused, found.times.fused) == pytest.approx((unfused, fused), rel=1e-12)
            assert model.estimate_run_times(producer, users, multi_output) == found.times
            terms = legacy_terms(found, multi_output)
            expected = CostTerms(len(users), dur.to_us(KERNEL_LAUNCH_OVERHEAD), dur.to_us(data.exec_time),
                                 dur.to_us(sum(reads)), dur.to_us(sum(p[0] for p in parts)),
                                 dur.to_us(sum(p[1] for p in parts)),
                                 dur.to_us(data.write_time if multi_output else 0),
                                 found.times.fused_us, found.times.unfused_us)
            assert terms.facts() == expected.facts()
