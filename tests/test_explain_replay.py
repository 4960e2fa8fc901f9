"""`explain` by replaying: every boundary of a fused module is answered by the decision that
first kept its two sides apart, in the pass that made it, with what later passes did in
`then`; cost-model refusals carry the model's terms; agreement with XLA's own log is data.

* the shipped samples with XLA's fusion log agree with it, and a disagreement is reported with
  our reason kept;
* a producer that multi_output_fusion turned into a multi-output fusion is explained by the
  priority-fusion decision, the multi-output fusion following in `then`;
* without a snapshot before fusion the replay starts from the module with its fusions
  inlined, and says so;
* copies copy insertion adds to XLA:CPU loops (swaps of the loop state) get a rule;
* `explain` only reads the module it is given.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
from pathlib import Path

import pytest

import hlofuse
from hlofuse.cost.terms import VERDICT_RULES
from hlofuse.explain import UNKNOWN, dump_context, explain
from hlofuse.explain.unfused import inline_fusions
from hlofuse.parse import parse_text
from hlofuse.render.csv import boundaries_frame
from hlofuse.render.json import explanation_dict

from conftest import REPO

SAMPLES = REPO / "sample_dumps"
CURRENT = sorted(str(p) for p in SAMPLES.glob("gpu-current-*/*") if p.is_dir())
GPU = sorted(str(p) for p in SAMPLES.glob("gpu-*/*") if p.is_dir())


@functools.lru_cache(maxsize=None)
def explained(folder: str):
    dump = dump_context(folder)
    module = parse_text(dump.chosen.path.read_text(encoding="utf-8"), str(dump.chosen.path))
    return explain(module, dump=dump)


# ------------------------------------------------------------------------------------------
# Agreement with XLA's own log
# ------------------------------------------------------------------------------------------


def test_the_samples_agree_with_xlas_fusion_log():
    """Every boundary XLA's log gives a reason for is compared; on the shipped samples our
    reason is XLA's for all of them (before replaying: 125 of 131)."""
    compared = agree = 0
    for folder in CURRENT:
        ex = explained(folder)
        for b in ex.boundaries:
            if b.xla_reason is None:
                continue
            compared += 1
            assert b.agrees_with_xla is not None, (folder, b.producer, b.consumer)
            agree += b.agrees_with_xla
        assert ex.summary()["agreements_with_xla"] == sum(1 for b in ex.boundaries if b.agrees_with_xla)
    assert compared >= 170
    assert agree == compared


def test_a_disagreement_is_reported_and_our_reason_kept(tmp_path):
    """XLA's text never replaces ours: with a log that says something else, the boundary keeps
    our rule and reason, shows XLA's, and counts as a disagreement."""
    folder = tmp_path / "dump"
    shutil.copytree(SAMPLES / "gpu-current-h100" / "cartpole_a_rng_customcall", folder)
    (log,) = folder.glob("*priority_fusion_dump.txt")
    log.write_text(log.read_text().replace("the consumer is not fusible", "a reason XLA never gave"))
    ex = explained(str(folder))
    changed = [b for b in ex.boundaries if b.xla_reason == "a reason XLA never gave"]
    assert changed
    for b in changed:
        assert b.agrees_with_xla is False
        assert b.rule in ("BND-LIBRARY-CONSUMER", "BND-TUPLE-CONSUMER") and "XLA never" not in b.reason
        assert b.rule_xla_reason == "the consumer is not fusible"
    assert ex.summary()["disagreements_with_xla"] == sum(1 for b in ex.boundaries if b.agrees_with_xla is False)


def test_library_boundaries_name_the_pass_that_refused_them():
    ex = explained(str(SAMPLES / "gpu-current-h100" / "cartpole_a_rng_customcall"))
    library = [b for b in ex.boundaries if b.rule == "BND-LIBRARY-CONSUMER"]
    assert library
    for b in library:
        # PriorityFusion asked and said "the consumer is not fusible"; the boundary rule says
        # which library call that is
        assert (b.decided_in, b.rule_xla_reason, b.explained_by) == \
            ("priority-fusion", "the consumer is not fusible", "replay")


# ------------------------------------------------------------------------------------------
# The decision first, what later passes did after it
# ------------------------------------------------------------------------------------------


def test_a_producer_made_multi_output_later_is_explained_by_the_earlier_decision():
    """In cart-pole (a), multi_output_fusion turned loop_add_slice_fusion into a multi-output
    fusion; priority-fusion had already kept it out of loop_maximum_fusion.  Explained on the
    final graph this read GF-PRODUCER-MULTI-OUTPUT; the replay names priority-fusion's
    decision first, the multi-output fusion after it."""
    ex = explained(str(SAMPLES / "gpu-current-h100" / "cartpole_a_rng"))
    pair = [b for b in ex.boundaries if (b.producer_kernel, b.consumer_kernel) ==
            ("loop_add_slice_fusion", "loop_maximum_fusion")]
    assert pair
    for b in pair:
        assert b.rule != "GF-PRODUCER-MULTI-OUTPUT" and b.rule.startswith("PF-")
        assert b.decided_in == "priority-fusion" and b.explained_by == "replay"
        later = [t for t in b.then if t.pass_name == "multi_output_fusion" and t.rule is None]
        assert later and "loop_add_slice_fusion became a multi-output fusion" in later[0].reason
    module = ex.fused_module
    body = module.by_name[module.entry["loop_add_slice_fusion"].fused_computation] \
        if "loop_add_slice_fusion" in module.entry else None
    if body is None:  # inside the loop body
        comp = next(c for c in module.computations if "loop_add_slice_fusion" in c)
        body = module.by_name[comp["loop_add_slice_fusion"].fused_computation]
    assert body.root.opcode == "tuple"


def test_replay_names_become_this_modules_kernel_names():
    """The replay's fusions are named as XLA's pass named them (fusion.70); the reason names
    the kernels of the explained module."""
    ex = explained(str(SAMPLES / "gpu-current-rtx2080ti" / "adam_update"))
    renamed = [b for b in ex.boundaries if b.facts.get("replay_names")]
    assert renamed
    for b in renamed:
        for old, new in b.facts["replay_names"].items():
            assert new in (b.producer_kernel, b.consumer_kernel, b.consumer)
            assert not re.search(rf"(?<![\w.]){re.escape(old)}(?![\w]|\.\d)", b.reason)
        assert b.producer_kernel in b.reason


# ------------------------------------------------------------------------------------------
# Cost-model refusals carry the model's numbers
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", GPU)
def test_every_cost_model_refusal_carries_the_models_numbers(folder):
    ex = explained(folder)
    for b in ex.boundaries:
        if b.rule not in VERDICT_RULES:
            continue
        f = b.facts
        assert f["fused_us"] > f["unfused_us"] > 0, (b.producer, b.consumer, f)
        for term in ("launch_us", "producer_us", "read_back_us", "recompute_us", "reread_us"):
            assert isinstance(f[term], float) and f[term] >= 0
        assert f["dominant"] in ("recompute", "reread")
        assert f["dominant"] == ("recompute" if f["recompute_us"] >= f["reread_us"] else "reread")
        assert "dominant term" in b.reason and f"{f['fused_us']:.3f}" in b.reason
        if b.xla_reason and "unprofitable" in b.xla_reason:
            assert f["xla_us_fused"] > f["xla_us_unfused"]
    d = explanation_dict(ex)
    for b in d["boundaries"]:
        if b["rule"] in VERDICT_RULES:
            assert json.loads(json.dumps(b["facts"]))["dominant"] in ("recompute", "reread")


def test_the_samples_have_cost_model_refusals():
    rules = {b.rule for folder in GPU for b in explained(folder).boundaries}
    assert "PF-UNPROFITABLE" in rules


def test_cost_terms_of_the_2024_model_are_its_formulas_terms():
    """The legacy model's sums are exactly its terms: unfused = launches + the producer + the
    users reading it back; fused = launches + each user with the producer recomputed."""
    from hlofuse.cost.legacy import shared_model
    from hlofuse.cost.terms import terms_legacy
    from hlofuse.gpu import gpu_config
    from hlofuse.graph import Program
    from hlofuse.pipeline import Options, make_context

    module = hlofuse.loads("""
HloModule m
ENTRY e {
  x = f32[4096] parameter(0)
  e = f32[4096] exponential(x)
  l = f32[4096] log(e)
  a = f32[4096] add(e, x)
  ROOT t = (f32[4096], f32[4096]) tuple(l, a)
}
""")
    ctx = make_context(Options(backend="gpu", pipeline="legacy", gpu="rtx2080ti"))
    model = shared_model(ctx, gpu_config(ctx))
    graph = Program.from_module(module).entry
    producer = graph.get("e")
    users = [graph.get("l"), graph.get("a")]
    terms = terms_legacy(model, producer, users)
    times = model.estimate_run_times(producer, users)
    assert terms.unfused_us == pytest.approx(times.unfused_us)
    assert terms.unfused_us == pytest.approx(3 * terms.launch_us + terms.producer_us + terms.read_back_us, abs=1e-3)
    assert terms.users == 2 and terms.recompute_us > 0


# ------------------------------------------------------------------------------------------
# Where the replay starts
# ------------------------------------------------------------------------------------------


def test_a_dump_with_a_snapshot_is_replayed_from_it():
    ex = explained(str(SAMPLES / "gpu-current-h100" / "softmax"))
    assert ex.replayed_from.startswith("snapshot before fusion") and "before_variadic-op-splitter" in ex.replayed_from


def test_without_a_snapshot_the_fusions_are_inlined_and_replayed():
    (path,) = (SAMPLES / "gpu-current-h100" / "cartpole_a_rng_customcall").glob("*after_optimizations.txt")
    module = parse_text(path.read_text(encoding="utf-8"), str(path))
    ex = explain(module)
    assert ex.replayed_from.startswith("this module with its fusions inlined")
    assert any("passes before fusion are not replayed" in note for note in ex.notes)
    assert any(b.explained_by == "replay" and b.decided_in == "priority-fusion" for b in ex.boundaries)
    assert ex.unknown == 0


INLINE = """
HloModule m

f1 {
  p = f32[8] parameter(0)
  n = f32[8] negate(p)
  e = f32[8] exponential(n)
  ROOT t = (f32[8], f32[8]) tuple(n, e)
}

f2 {
  q = f32[8] parameter(0)
  ROOT a = f32[8] abs(q)
}

ENTRY main {
  x = f32[8] parameter(0)
  mo = (f32[8], f32[8]) fusion(x), kind=kLoop, calls=f1
  g0 = f32[8] get-tuple-element(mo), index=0
  g1 = f32[8] get-tuple-element(mo), index=1
  r = f32[8] fusion(g1), kind=kLoop, calls=f2
  ROOT s = f32[8] add(g0, r)
}
"""


def test_inlining_puts_fused_instructions_back_in_their_caller():
    module = hlofuse.loads(INLINE)
    text = hlofuse.dumps(module)
    flat = inline_fusions(module)
    entry = flat.entry
    assert [i.opcode for i in entry.post_order] == ["parameter", "negate", "exponential", "abs", "add"]
    assert entry["a"].operands == ("e",) and entry["s"].operands == ("n", "a")
    assert "f1" not in flat.by_name and "f2" not in flat.by_name
    assert hlofuse.dumps(module) == text  # the fused module is left as it was
    hlofuse.loads(hlofuse.dumps(flat))  # and the result is valid HLO


def test_explain_only_reads_the_module_it_is_given():
    folder = SAMPLES / "gpu-current-h100" / "cartpole_a_rng"
    dump = dump_context(str(folder))
    module = parse_text(dump.chosen.path.read_text(encoding="utf-8"), str(dump.chosen.path))
    before = hlofuse.dumps(module)
    ex = explain(module, dump=dump)
    assert hlofuse.dumps(module) == before
    assert ex.fused_module is module


# ------------------------------------------------------------------------------------------
# XLA:CPU loops: the copies copy insertion adds
# ------------------------------------------------------------------------------------------


def test_copies_in_an_xla_cpu_loop_get_a_rule_without_a_dump():
    """cart-pole (a) on XLA:CPU, the after_optimizations file alone: the threefry loop swaps
    its state, so copy insertion copies the state elements and copies them again (in an order
    it imposes).  Each copy is BND-COPY-INSERTED, with why it was made."""
    (path,) = (SAMPLES / "cpu" / "cartpole_a_rng").glob("*after_optimizations.txt")
    module = parse_text(path.read_text(encoding="utf-8"), str(path))
    ex = explain(module)
    assert ex.unknown == 0
    swaps = [b for b in ex.boundaries if b.rule == "BND-COPY-INSERTED" and "swap or rotation" in b.reason]
    assert swaps
    copy_to_copy = [b for b in swaps if b.producer_kernel.startswith("copy") and (b.consumer_kernel or "").startswith("copy")]
    assert copy_to_copy
    assert all(b.decided_in == "copy-insertion" for b in swaps)


# ------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------


def test_json_csv_and_table_show_the_pass_and_what_followed():
    ex = explained(str(SAMPLES / "gpu-current-h100" / "cartpole_a_rng"))
    d = explanation_dict(ex)
    assert d["replayed_from"] == ex.replayed_from
    with_then = [b for b in d["boundaries"] if b["then"]]
    assert with_then and all(set(t) == {"pass", "rule", "reason"} for b in with_then for t in b["then"])
    assert {b["decided_in"] for b in d["boundaries"]} >= {"priority-fusion", None}
    frame = boundaries_frame(ex)
    assert "decided_in" in frame.columns and frame["then"].str.contains("multi_output_fusion").any()
    from io import StringIO

    from rich.console import Console

    from hlofuse.render.table import print_explanation

    out = StringIO()
    print_explanation(ex, Console(file=out, width=250, force_terminal=False), full=True)
    assert "then multi_output_fusion" in out.getvalue() and "priority-fusion:" in out.getvalue()


def test_inlining_merges_the_copies_fusion_made_and_keeps_whole_tuples():
    """Fusion clones a producer into each consumer it duplicates it into; inlined, the clones
    are one instruction again.  A multi-output fusion passed on whole becomes its tuple."""
    module = hlofuse.loads("""
HloModule m

f1 {
  p = f32[8] parameter(0)
  e = f32[8] exponential(p)
  ROOT n = f32[8] negate(e)
}

f2 {
  q = f32[8] parameter(0)
  e.clone = f32[8] exponential(q)
  ROOT a = f32[8] abs(e.clone)
}

f3 {
  r = f32[8] parameter(0)
  s = f32[8] sine(r)
  c = f32[8] cosine(r)
  ROOT t = (f32[8], f32[8]) tuple(s, c)
}

ENTRY main {
  x = f32[8] parameter(0)
  u = f32[8] fusion(x), kind=kLoop, calls=f1
  v = f32[8] fusion(x), kind=kLoop, calls=f2
  w = (f32[8], f32[8]) fusion(x), kind=kLoop, calls=f3
  ROOT out = (f32[8], f32[8], (f32[8], f32[8])) tuple(u, v, w)
}
""")
    entry = inline_fusions(module).entry
    assert sorted(i.opcode for i in entry.instructions).count("exponential") == 1
    assert entry["a"].operands == ("e",)
    assert entry["w"].opcode == "tuple" and entry["w"].operands == ("s", "c")
    assert entry[entry.root_name].operands == ("n", "a", "w")
