"""The legacy XLA:GPU pipeline (jaxlib 0.4.35's XLA): registration and pass selection, one
Decision per candidate pair, each pass run once, and the paper's cart-pole boundaries on the
real legacy sample dumps."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import hlofuse
from hlofuse.decision import Verdict
from hlofuse.pipeline import Options, get_pipeline, replay

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"
LEGACY = Options(backend="gpu", pipeline="legacy", gpu="rtx2080ti")


def _sample(program: str, stage: str = "before_fusion"):
    manifest = json.loads((SAMPLES / "MANIFEST.json").read_text())
    entry = next((e for e in manifest["programs"] if e["build"] == "gpu-legacy" and e["gpu"] == "rtx2080ti"
                  and e["program"] == program), None)
    if entry is None or not entry["files"].get(stage):
        pytest.skip(f"no legacy sample dump for {program}")
    return hlofuse.load(str(SAMPLES / entry["path"] / entry["files"][stage]))


def _replay(text_or_module, **options):
    module = hlofuse.loads(text_or_module) if isinstance(text_or_module, str) else text_or_module
    return replay(module, Options(**{**LEGACY.__dict__, **options}))


SIMPLE = """
HloModule simple
ENTRY e {
  p0 = f32[128]{0} parameter(0)
  p1 = f32[128]{0} parameter(1)
  a = f32[128]{0} add(p0, p1)
  n = f32[128]{0} negate(a)
  ROOT m = f32[128]{0} multiply(n, p1)
}
"""


def test_pipeline_is_registered_with_xla_pass_names():
    spec = get_pipeline("gpu", "legacy")
    names = [n for n, _ in spec.passes]
    for name in ("variadic-op-splitter", "fusion", "fusion_merger", "cse", "dce", "multi_output_fusion",
                 "horizontal_loop_fusion", "horizontal_input_fusion"):
        assert name in names
    assert names.count("fusion") == 2  # without, then with duplication
    assert names.index("fusion_merger") < names.index("multi_output_fusion") < names.index("horizontal_loop_fusion")
    assert spec.explain_boundary is not None


def test_elementwise_chain_becomes_one_loop_kernel():
    result = _replay(SIMPLE)
    assert [k.kind for k in result.kernels] == ["kLoop"]
    assert set(result.kernels[0].instructions) == {"a", "n", "m"}
    fused = {(d.producer, d.verdict) for d in result.decisions if d.pass_name == "fusion"}
    assert ("n", Verdict.FUSED) in fused


def test_passes_option_runs_only_the_named_passes():
    result = _replay(SIMPLE, passes=("fusion_merger",))
    # no instruction fusion ran: nothing to merge, every instruction is its own kernel
    assert len(result.kernels) == 3
    assert result.passes == ("fusion_merger",)


def test_one_decision_per_candidate_pair():
    result = _replay(_sample("cartpole_b_concat_vecdone"))
    pairs = Counter((d.pass_name, d.computation, d.producer, d.consumer) for d in result.decisions)
    repeated = {k: v for k, v in pairs.items() if v > 1}
    assert not repeated
    assert all(d.verdict in (Verdict.FUSED, Verdict.BLOCKED, Verdict.RELAXED) for d in result.decisions)
    blocked = [d for d in result.decisions if d.verdict == Verdict.BLOCKED]
    assert blocked and all(d.rule and d.reason for d in blocked)


def test_fusion_merger_merges_into_all_users_or_none():
    text = """
HloModule m
ENTRY e {
  p0 = f32[1024]{0} parameter(0)
  f = f32[1024]{0} fusion(p0), kind=kLoop, calls=neg
  a = f32[1024]{0} add(f, p0)
  b = f32[1024]{0} multiply(f, p0)
  ROOT t = (f32[1024]{0}, f32[1024]{0}) tuple(a, b)
}
neg {
  x = f32[1024]{0} parameter(0)
  ROOT n = f32[1024]{0} negate(x)
}
"""
    result = _replay(text, passes=("fusion_merger",))
    merger = [d for d in result.decisions if d.pass_name == "fusion_merger" and d.producer == "f"]
    assert len(merger) == 2 and len({d.verdict for d in merger}) == 1
    if merger[0].verdict == Verdict.FUSED:
        assert not any(k.name == "f" for k in result.kernels)
        assert sum("n" in k.instructions for k in result.kernels) == 2  # computed in both users


# ------------------------------------------------------------------------------------------
# The paper's three boundaries (Snider & Liang, Fig. 3(c)) on the legacy sample dumps
# ------------------------------------------------------------------------------------------


def _body_root_tuple(module):
    body = next(c for c in module.computations if c.root.opcode == "tuple" and "while" not in c.root.name
                and any(i.opcode == "get-tuple-element" for i in c.instructions) and c.name != module.entry_name)
    return body.name, body.root_name


def test_tuple_at_the_loop_output_is_named():
    module = _sample("cartpole_b_concat_vecdone")
    body, root = _body_root_tuple(module)
    result = _replay(module)
    into_tuple = [d for d in result.decisions if d.consumer == root and d.computation == body
                  and d.rule == "GF-CONSUMER-NOT-FUSIBLE"]
    assert into_tuple, "the loop body's output tuple should be named as a boundary"
    assert into_tuple[0].xla_reason.startswith("the consumer is not input-fusible and not loop-fusible")
    assert into_tuple[0].source is not None and into_tuple[0].source.file == "sample_dumps/programs.py"


def test_rng_custom_call_is_named():
    module = _sample("cartpole_a_rng_customcall")
    calls = [i.name for _, i in module.instructions() if i.opcode == "custom-call" and "threefry" in
             (i.custom_call_target or "")]
    assert calls
    result = _replay(module)
    as_producer = {d.rule for d in result.decisions if d.producer in calls}
    as_consumer = {d.rule for d in result.decisions if d.consumer in calls}
    assert "MOF-PRODUCER-NOT-LOOP-FUSIBLE" in as_producer  # nothing computes the library call inside
    assert None not in as_producer and None not in as_consumer  # and nothing fused it either way
    assert "GF-CONSUMER-NOT-FUSIBLE" in as_consumer        # it takes no producer in
    kinds = Counter(k.kind for k in result.kernels)
    assert kinds["library"] == len(calls)


def test_concatenate_with_several_users_is_named():
    result = _replay(_sample("cartpole_b_concat_vecdone"))
    concat = [d for d in result.decisions if d.producer.startswith("concatenate")
              and d.rule == "IF-GPU-CONCAT-NOT-DUPLICATED"]
    assert len(concat) == 2  # refused into both of its users (the done test and the reset)
    assert all(d.xla_reason.startswith("fusion pass cannot duplicate") for d in concat)
    merger = [d for d in result.decisions if d.pass_name == "fusion_merger" and d.rule == "FM-CONCAT-SLOWER-IF-FUSED"]
    assert merger, "the concatenate kernel is kept apart from its two users by the merger's cost model"


def test_relax_concat_fuses_the_concatenate_into_its_users():
    module = _sample("cartpole_b_concat_vecdone")
    base = _replay(module)
    relaxed = _replay(module, relax=("concat",))

    def concat_kernels(result):
        return [k for k in result.kernels if any(m.startswith("concatenate") for m in k.instructions)]

    # XLA (and the replay) write the concatenate once, from one kernel, read by the other
    assert len(concat_kernels(base)) == 1
    # relaxed, as in the paper's modified XLA, every kernel that reads the state computes the
    # concatenate itself: it is no kernel boundary any more
    assert len(concat_kernels(relaxed)) == 2
    assert all(k.root != "tuple" for k in concat_kernels(relaxed))
    relaxed_decisions = [d for d in relaxed.decisions if d.verdict == Verdict.RELAXED]
    assert any("FM-CONCAT-SLOWER-IF-FUSED" in d.relaxed for d in relaxed_decisions)
    assert relaxed.relaxed and all("CONCAT" in r or "concat" in r for r in relaxed.relaxed)
    # the simulation still needs two kernels: a row reduction (the done test) feeds the reset,
    # and no epilogue may follow a reduction's broadcast (a legality rule, not relaxable)
    assert len(relaxed.kernels) == len(base.kernels)


def test_relax_concat_removes_a_kernel_where_a_concatenate_alone_kept_two_apart():
    """cartpole_a_rng: a concatenate of the threefry key, read by two kernels, is the only
    thing between them; relaxed, it is duplicated and one kernel fewer runs per step."""
    module = _sample("cartpole_a_rng")
    base, relaxed = _replay(module), _replay(module, relax=("concat",))
    assert len(relaxed.kernels) < len(base.kernels)
    assert any(d.verdict == Verdict.RELAXED and d.producer.startswith("concatenate") for d in relaxed.decisions)


def test_relaxing_a_correctness_rule_is_refused():
    from hlofuse.errors import NotRelaxable

    with pytest.raises(NotRelaxable):
        _replay(SIMPLE, relax=("GF-OPERAND-BUDGET",))


def test_explain_boundary_names_the_rule_on_a_fused_graph():
    from hlofuse.graph import Program
    from hlofuse.pipeline import make_context

    text = """
HloModule m
ENTRY e {
  p0 = f32[2048]{0} parameter(0)
  r = f32[2048]{0} custom-call(p0), custom_call_target="cu_threefry2x32_ffi"
  a = f32[2048]{0} add(r, p0)
  ROOT n = f32[2048]{0} negate(a)
}
"""
    result = _replay(text)
    program = Program.from_module(result.module)
    ctx = make_context(LEGACY)
    ctx.pipeline = "legacy"
    explain = get_pipeline("gpu", "legacy").explain_boundary
    call = next(n for n in program.entry if n.opcode == "custom-call")
    user = call.users[0]
    assert user.opcode == "fusion"  # add and negate became one kernel
    found = explain(call, user, ctx)
    assert found is not None and found.rule == "GF-PRODUCER-NOT-LOOP-FUSIBLE"
    assert "custom call" in found.reason


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
@pytest.mark.parametrize("program", ["cartpole_a_rng", "cartpole_d_unroll10", "adam_update"])
def test_multi_output_fusion_reachability_stays_exact(program, monkeypatch):
    """MultiOutputFusion's Reachability raises levels only along new edges (Reachability.fused);
    after every merge of a real replay, every edge still goes up in level and its answers
    match a plain search through users."""
    from hlofuse.passes import multi_output_fusion as mof

    checked = []
    original = mof.Reachability.fused

    def fused_and_checked(self, fusion):
        original(self, fusion)
        nodes = self.graph.nodes()
        for node in nodes:
            for pred in self._preds(node):
                assert self._level(pred) < self._level(node), (pred.name, node.name)
        for a in nodes[:: max(1, len(nodes) // 12)]:
            reached = self.graph.reachable_from(a)
            for b in nodes[:: max(1, len(nodes) // 25)]:
                assert self(a, b) == (b.uid in reached), (a.name, b.name)
        checked.append(fusion.name)

    monkeypatch.setattr(mof.Reachability, "fused", fused_and_checked)
    _replay(_sample(program))
    assert checked, "no multi-output merge happened; pick a program where one does"


@pytest.mark.parametrize("program", ["cartpole_a_rng", "adam_update"])
def test_each_pass_runs_once(program, monkeypatch):
    """jax 0.4.35's fusion and horizontal-fusion lists run once each (their HloPassFix is
    sliced off): every pass of both lists runs exactly once, in XLA's order."""
    from dataclasses import replace

    from hlofuse.passes.pipelines import LEGACY_FUSION, LEGACY_HORIZONTAL

    runs = []

    def counted(name, fn):
        def run(prog, ctx):
            runs.append(name)
            return fn(prog, ctx)
        return run

    for group in (LEGACY_FUSION, LEGACY_HORIZONTAL):
        monkeypatch.setattr(group, "stages", [replace(s, run=counted(s.name, s.run)) for s in group.stages])
    _replay(_sample(program))
    assert runs == [s.name for group in (LEGACY_FUSION, LEGACY_HORIZONTAL) for s in group.stages]


@pytest.mark.parametrize("program", ["attention", "softmax"])
def test_a_merged_reduction_keeps_its_init_constant_outside(program):
    """FusionMerger wraps a bare reduction into a fusion with the reduction's operands, its
    init constant included, and nothing fuses that constant in afterwards: XLA's dump after
    its fusion list shows it as an operand.  A second run of the list (a fixed point) would
    fuse it into the fusion."""
    result = _replay(_sample(program))
    merged = [k for k in result.kernels if k.name == "fusion"]
    assert len(merged) == 1
    members = set(merged[0].instructions)
    assert any(m.startswith("reduce.") for m in members)
    assert not any(m.startswith("constant.") for m in members)
    after = _sample(program, "after_fusion")
    fusion = next(i for _, i in after.instructions() if i.name == "fusion")
    assert any(op.startswith("constant.") for op in fusion.operands)
