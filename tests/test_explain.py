"""`hlofuse explain` on real XLA dumps and on small hand-written modules.

* the cart-pole samples: every boundary names its line in sample_dumps/programs.py; the
  paper's three boundaries (the tuple at the loop's output, the RNG custom call, the
  concatenate with several users) are named where the dump has them;
* loops: trip counts (XLA's known_trip_count, or read from the condition) and launches, with
  the condition skipped exactly when XLA's runtime skips it;
* each boundary rule of hlofuse/rules/boundaries.py fires on its case and not on the others;
* a module before fusion is replayed first and explained with the replay's decisions;
* every sample dump and every fused module of the parser corpus explains without error.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import pytest

import hlofuse
from hlofuse.explain import UNKNOWN, dump_context, explain, trip_count
from hlofuse.kernels import count_kernels
from hlofuse.parse import parse_text

from conftest import REPO, shared_dir

SAMPLES = REPO / "sample_dumps"
PROGRAMS = "sample_dumps/programs.py"


def _dump_folders(pattern: str) -> list[Path]:
    return sorted(p for p in SAMPLES.glob(pattern) if p.is_dir())


@functools.lru_cache(maxsize=None)
def explained(folder: str):
    dump = dump_context(folder)
    module = parse_text(dump.chosen.path.read_text(encoding="utf-8"), str(dump.chosen.path))
    return explain(module, dump=dump)


CARTPOLE = [str(p.relative_to(REPO)) for p in _dump_folders("*/cartpole_*")]


# ------------------------------------------------------------------------------------------
# The cart-pole samples: source lines and the paper's three boundaries
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", CARTPOLE)
def test_every_cartpole_boundary_names_its_line_in_the_sample_program(folder):
    ex = explained(str(REPO / folder))
    assert ex.boundaries, "a cart-pole module with a loop has boundaries"
    program = (REPO / PROGRAMS).read_text().splitlines()
    for b in ex.boundaries:
        assert b.source is not None and b.source.file is not None, f"{b.producer} -> {b.consumer} has no source"
        assert b.source.file.endswith("programs.py"), b.source
        assert 1 <= b.source.line <= len(program), b.source
        assert b.reason and b.rule


@pytest.mark.parametrize("folder", CARTPOLE)
def test_the_tuple_at_the_loop_output_is_a_boundary(folder):
    """The paper's first boundary: what the body computes goes into the loop-state tuple."""
    ex = explained(str(REPO / folder))
    module = ex.fused_module
    bodies = {lp.body for lp in ex.loops}
    assert bodies, "every cart-pole variant runs a scan"
    at_root = [b for b in ex.boundaries if b.rule == "BND-TUPLE-CONSUMER" and b.consumer_computation in bodies
               and b.consumer == module[b.consumer_computation].root_name]
    assert at_root, "no boundary at the body's root tuple"
    for b in at_root:
        assert b.consumer_kernel is None and "tuple" in b.tags and b.relaxable is False
        assert "next iteration" in b.reason
    # and the next iteration reads the state back: a loop-carried boundary
    assert any(b.rule == "BND-LOOP-CARRIED" for b in ex.boundaries)


@pytest.mark.parametrize("folder", [f for f in CARTPOLE if f.endswith("cartpole_a_rng_customcall")])
def test_the_rng_custom_call_is_a_boundary_with_the_papers_fix(folder):
    """The paper's second boundary: the cu_threefry2x32 custom call, inside the loop."""
    ex = explained(str(REPO / folder))
    rng = [b for b in ex.boundaries if b.rule in ("BND-LIBRARY-PRODUCER", "BND-LIBRARY-CONSUMER")]
    assert rng
    for b in rng:
        assert "rng" in b.tags and "threefry" in b.reason and b.relaxable is False
        assert b.hint and "precompute" in b.hint
    # both sides: kernels feed the RNG call and read its output.  Where a fusion pass refused
    # the pair for another reason first (legacy instruction fusion: the call "can not be
    # duplicated"), that decision is primary and the library call follows in `then`.
    library = {b.rule for b in ex.boundaries} | {later.rule for b in ex.boundaries for later in b.then}
    assert {"BND-LIBRARY-PRODUCER", "BND-LIBRARY-CONSUMER"} <= library
    for b in ex.boundaries:
        if any(later.rule == "BND-LIBRARY-PRODUCER" for later in b.then):
            assert b.decided_in and "rng" in b.tags and b.hint and "precompute" in b.hint
    kernels = {k.name: k for k in ex.kernels}
    assert any(k.library and "RNG" in k.library for k in kernels.values())


@pytest.mark.parametrize("folder", [f for f in CARTPOLE if f.endswith("cartpole_b_concat_vecdone")])
def test_the_concatenate_with_several_users_is_a_boundary(folder):
    """The paper's third boundary: the packed state's concatenate has two users (the done test
    and the reset select); XLA keeps them in different kernels (or computes the concatenate in
    both).  The rule comes from the pipeline's own registry."""
    ex = explained(str(REPO / folder))
    opcodes = {}
    for k in ex.kernels:
        body = ex.fused_module.by_name.get(k.computation)
        instr = body[k.name] if body is not None and k.name in body else None
        comp = ex.fused_module.by_name.get(instr.fused_computation or "") if instr is not None else None
        opcodes[k.name] = {i.opcode for i in comp.instructions} if comp is not None else {instr.opcode}
    # the concatenate's value crosses, or both kernels compute it (XLA duplicated it)
    concat = [b for b in ex.boundaries if b.consumer_kernel is not None and not b.crossing
              and (b.producer.startswith("concatenate") or
                   "concatenate" in opcodes.get(b.producer_kernel, ()) & opcodes.get(b.consumer_kernel, ()))]
    assert concat, "no boundary where the concatenate crosses or is computed on both sides"
    for b in concat:
        assert b.hint and "separate arrays" in b.hint
    known = [b for b in concat if b.rule != UNKNOWN]
    assert known, f"the {ex.backend}/{ex.pipeline} pipeline left the concatenate unexplained: {ex.notes}"
    for b in known:
        assert b.explained_by in ("pipeline", "replay", "xla-log")


# ------------------------------------------------------------------------------------------
# Kernels, loops and launches
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", CARTPOLE)
def test_kernel_counts_agree_with_the_kernel_counter(folder):
    ex = explained(str(REPO / folder))
    counts = {k.computation: k.kernels for k in count_kernels(ex.fused_module)}
    for c in ex.computations:
        assert c.kernels == counts[c.name]
    assert len(ex.kernels) == sum(counts.values())


@pytest.mark.parametrize("folder", CARTPOLE)
def test_loop_launches_follow_the_trip_count(folder):
    ex = explained(str(REPO / folder))
    loops = {lp.name: lp for lp in ex.loops}
    for lp in ex.loops:
        assert lp.trip_count_from == "backend_config"  # jax scans carry known_trip_count
        # XLA's WhileThunk runs only the body when the trip count is known
        assert lp.condition_launched is False
        body = ex.fused_module[lp.body]
        nested = sum(loops[i.name].kernels_total for i in body.instructions if i.opcode == "while")
        assert lp.kernels_per_iteration == lp.body_kernels + nested
        assert lp.kernels_total == lp.trip_count * lp.kernels_per_iteration
    runs = {c.name: c.runs for c in ex.computations}
    expected = sum(c.kernels * runs[c.name] for c in ex.computations)
    assert ex.summary()["kernels_launched"] == expected


LOOP = """
HloModule loop

body {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  y = f32[8] exponential(x)
  ROOT t = (s32[], f32[8]) tuple(next, y)
}

cond {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  a = f32[8] parameter(0)
  b = f32[8] negate(a)
  zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, b)
  w = (s32[], f32[8]) while(init), condition=cond, body=body
  r = f32[8] get-tuple-element(w), index=1
  ROOT out = f32[8] sqrt(r)
}
"""


def test_trip_count_from_the_condition_when_xla_did_not_annotate_it():
    m = hlofuse.loads(LOOP)
    entry = m.entry
    assert trip_count(m, entry, entry["w"]) == (10, "condition")
    ex = explain(m, backend="cpu", fused=True)
    (lp,) = ex.loops
    # unannotated: the runtime evaluates the condition every iteration and once more at the end
    assert lp.condition_launched and lp.body_kernels == 2 and lp.condition_kernels == 1
    assert lp.kernels_per_iteration == 3 and lp.kernels_total == 10 * 3 + 1
    assert ex.summary()["kernels_launched"] == 2 + 31  # negate and sqrt in the entry


def test_annotated_trip_count_wins_and_skips_the_condition():
    text = LOOP.replace("condition=cond, body=body", 'condition=cond, body=body, '
                        'backend_config={"known_trip_count":{"n":"7"}}')
    m = hlofuse.loads(text)
    (lp,) = explain(m, backend="cpu", fused=True).loops
    assert (lp.trip_count, lp.trip_count_from, lp.condition_launched) == (7, "backend_config", False)
    assert lp.kernels_total == 7 * 2


def test_loop_boundaries_are_classified_by_direction():
    ex = explain(hlofuse.loads(LOOP), backend="cpu", fused=True)
    by = {(b.producer_kernel, b.consumer_kernel or b.consumer, b.rule) for b in ex.boundaries}
    assert ("b", "y", "BND-LOOP-INPUT") in by  # computed before the loop, read inside
    assert ("y", "y", "BND-LOOP-CARRIED") in by  # read by the next iteration
    assert ("next", "lt", "BND-LOOP-CARRIED") in by  # the condition reads the body's counter
    assert ("y", "out", "BND-LOOP-OUTPUT") in by  # read after the loop
    assert ("next", "t", "BND-TUPLE-CONSUMER") in by  # the state tuple
    assert ("b", "init", "BND-TUPLE-CONSUMER") in by  # the initial state
    # XLA:CPU asks ShouldFuse about the tuple too: an expensive producer and a consumer that
    # "reuses" its elements (a tuple is not elementwise) is refused first; the tuple follows
    (into_state,) = [b for b in ex.boundaries if (b.producer_kernel, b.consumer) == ("y", "t")]
    assert (into_state.rule, into_state.decided_in) == ("CPU-EXPENSIVE-REUSE", "fusion")
    assert [later.rule for later in into_state.then] == ["BND-TUPLE-CONSUMER"]
    assert all(b.rule != UNKNOWN for b in ex.boundaries)
    loop_edges = [b for b in ex.boundaries if b.rule.startswith("BND-LOOP")]
    assert all(b.crossing and "loop" in b.tags for b in loop_edges)
    assert all(b.bytes == 32 for b in ex.boundaries if b.producer_kernel in ("b", "y"))


# ------------------------------------------------------------------------------------------
# Boundary rules on small modules
# ------------------------------------------------------------------------------------------

LIBRARY = """
HloModule lib

ENTRY main {
  a = f32[16,16] parameter(0)
  w = f32[16,16] parameter(1)
  s = f32[16,16] negate(a)
  g = f32[16,16] custom-call(s, w), custom_call_target="__cublas$gemm"
  ROOT r = f32[16,16] abs(g)
}
"""

COPIES = """
HloModule copies

ENTRY main {
  a = f32[8] parameter(0)
  e = f32[8] exponential(a), metadata={op_name="jit(f)/exp" source_file="f.py" source_line=3}
  c = f32[8] copy(e)
  u = f32[8] copy(e), metadata={op_name="jit(f)/copy" source_file="f.py" source_line=4}
  ROOT t = (f32[8], f32[8]) tuple(c, u)
}
"""

BRANCHES = """
HloModule branches

yes {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}

no {
  p = f32[4] parameter(0)
  ROOT a = f32[4] abs(p)
}

ENTRY main {
  x = f32[4] parameter(0)
  k = pred[] parameter(1)
  e = f32[4] exponential(x)
  kk = pred[] not(k)
  ROOT c = f32[4] conditional(kk, e, e), true_computation=yes, false_computation=no
}
"""


def test_library_calls_on_either_side():
    ex = explain(hlofuse.loads(LIBRARY), backend="gpu", pipeline="priority", fused=True)
    rules = {(b.producer_kernel, b.consumer_kernel): b for b in ex.boundaries}
    into = rules[("s", "g")]
    out = rules[("g", "r")]
    assert into.rule == "BND-LIBRARY-CONSUMER" and "cuBLAS" in into.reason and "cublas" in into.tags
    assert out.rule == "BND-LIBRARY-PRODUCER" and "__cublas$gemm" in out.reason
    assert into.hint is None  # no RNG, no loop: nothing to advise
    assert {k.name: k.library for k in ex.kernels}["g"] == "cuBLAS GEMM"


def test_copies_added_after_fusion_are_told_apart_from_the_users_copies():
    ex = explain(hlofuse.loads(COPIES), backend="cpu", fused=True)
    by = {(b.producer_kernel, b.consumer_kernel or b.consumer): b for b in ex.boundaries}
    assert by[("e", "c")].rule == "BND-COPY-INSERTED"  # no metadata: copy insertion's
    assert by[("e", "u")].rule != "BND-COPY-INSERTED"  # the user's own copy
    assert by[("c", "t")].rule == "BND-TUPLE-CONSUMER"
    assert by[("c", "t")].source is not None and by[("c", "t")].source.line == 3  # through the copy


def test_conditional_branches_and_predicates():
    ex = explain(hlofuse.loads(BRANCHES), backend="cpu", fused=True)
    by = {(b.producer_kernel, b.consumer_kernel or b.consumer): b.rule for b in ex.boundaries}
    assert by[("e", "n")] == "BND-CALLED-COMPUTATION"
    assert by[("e", "a")] == "BND-CALLED-COMPUTATION"
    assert by[("kk", "c")] == "BND-CONTROL-FLOW-OPERAND"
    assert by[("e", "c")] == "BND-CONTROL-FLOW-OPERAND"


def test_every_candidate_edge_yields_exactly_one_boundary():
    """No silent edges: each (producer kernel, output, consumer, crossing) appears once."""
    ex = explained(str(SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_a_rng_customcall"))
    keys = [(b.producer_kernel, b.output, b.consumer_kernel, b.consumer, b.crossing) for b in ex.boundaries]
    assert len(keys) == len(set(keys))


# ------------------------------------------------------------------------------------------
# Before fusion: replay first
# ------------------------------------------------------------------------------------------


def test_a_module_before_fusion_is_replayed_and_explained():
    folder = SAMPLES / "cpu" / "cartpole_b_concat_vecdone"
    dump = dump_context(str(folder), stage="before_fusion")
    assert dump.stage_is_fused() is False
    module = parse_text(dump.chosen.path.read_text(encoding="utf-8"), str(dump.chosen.path))
    ex = explain(module, dump=dump)
    assert ex.stage == "replayed" and ex.backend == "cpu"
    kernel_edges = [b for b in ex.boundaries if b.consumer_kernel and not b.crossing
                    and not b.rule.startswith("BND-")]
    assert kernel_edges, "the replay leaves kernel-to-kernel boundaries in the body"
    assert all(b.explained_by in ("replay", "pipeline") for b in kernel_edges)
    assert any(b.explained_by == "replay" for b in kernel_edges)


# ------------------------------------------------------------------------------------------
# Coverage: every sample dump and every fused module of the parser corpus
# ------------------------------------------------------------------------------------------


ALL_SAMPLES = [str(p.relative_to(REPO)) for p in _dump_folders("*/*")]


@pytest.mark.parametrize("folder", ALL_SAMPLES)
def test_every_sample_dump_explains(folder):
    ex = explained(str(REPO / folder))
    for b in ex.boundaries:
        assert b.producer_kernel and b.consumer and b.rule
        assert b.bytes >= 0
        if b.crossing or b.consumer_kernel is None:
            assert b.rule != UNKNOWN, "loop, tuple and control-flow boundaries always have a rule"


def _corpus_modules() -> list[Path]:
    folder = shared_dir() / "corpus" / "parser"
    manifest = folder / "MANIFEST.tsv"
    if not manifest.exists():
        return []
    out = []
    with open(manifest, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["expect"] == "ok" and "fusion(" in (folder / row["file"]).read_text(errors="replace"):
                out.append(folder / row["file"])
    return out


def test_every_fused_module_of_the_parser_corpus_explains():
    modules = _corpus_modules()
    if not modules:
        pytest.skip("the shared parser corpus is not here")
    from hlofuse.errors import HloVerifierError

    explained_count = 0
    invalid = []
    for path in modules:
        module = hlofuse.loads(path.read_text(encoding="utf-8", errors="replace"), path=str(path))
        if not any(i.opcode == "fusion" for _, i in module.instructions()):
            continue
        try:
            ex = explain(module, fused=True)
        except HloVerifierError:
            invalid.append(path.name)
            continue
        explained_count += 1
        assert all(b.rule for b in ex.boundaries)
    assert explained_count >= 20
    # a parser test only: its while loop's shape is not its operand's, which XLA's verifier rejects
    assert invalid == ["xla_parser_CanonicalOpWithNested.hlo"]


# ------------------------------------------------------------------------------------------
# XLA's own log
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", [f for f in CARTPOLE if "gpu-current" in f and f.endswith("rng_customcall")])
def test_xla_log_reasons_are_shown_and_compared(folder):
    ex = explained(str(REPO / folder))
    assert ex.xla_log is not None and ex.xla_log.endswith("priority_fusion_dump.txt")
    logged = [b for b in ex.boundaries if b.xla_reason]
    assert logged, "XLA's log explains some producer of this dump"
    library = [b for b in logged if b.rule.startswith("BND-LIBRARY")]
    assert library
    for b in library:
        # PriorityFusion's verbatim strings for custom calls on either side
        assert b.xla_reason in ("the producer is not fusible", "the consumer is not fusible")
        assert b.agrees_with_xla is True
    assert ex.summary()["disagreements_with_xla"] == sum(1 for b in ex.boundaries if b.agrees_with_xla is False)


@pytest.mark.parametrize("folder,fused", [
    ("gpu-current-h100/cartpole_a_rng_customcall",
     {"before_optimizations": False, "0000": False, "0004": True, "0005": True, "after_optimizations": True}),
    ("gpu-legacy-rtx2080ti/cartpole_a_rng_customcall",
     {"0000": False, "0002": True, "0003": True, "0007": True}),
    ("cpu/mlp", {"0000": False, "0001": True, "after_optimizations": True}),
])
def test_which_dump_stages_hold_a_fused_module(folder, fused):
    """after_X.before_Y snapshots are fused once the main fusion pass (fusion, priority-fusion)
    ran: `after_dce.before_multi_output_fusion` is, `after_reshape-decomposer.before_fusion` is not."""
    for stage, expected in fused.items():
        ctx = dump_context(str(SAMPLES / folder), stage=str(int(stage)) if stage.isdigit() else stage)
        assert ctx.stage_is_fused() is expected, (stage, ctx.chosen.path.name)
