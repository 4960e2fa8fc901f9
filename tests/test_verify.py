"""hlofuse.verify: what XLA's HloVerifier rejects is rejected before a replay or an explanation,
as one HloVerifierError at the instruction; what XLA accepts (every sample dump, XLA's own
fusion tests) passes."""

from __future__ import annotations


import pytest

import hlofuse
from hlofuse.errors import HloSyntaxError, HlofuseError, HloVerifierError
from hlofuse.explain import explain
from hlofuse.pipeline import Options, replay
from hlofuse.verify import verify

from conftest import REPO, shared_dir

_ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"


def _module(entry: str, extra: str = "") -> hlofuse.Module:
    return hlofuse.loads("HloModule m\n\n" + _ADD + extra + "ENTRY e {\n" + entry + "\n}\n")


# Each case made a replay crash inside a pass (the fuzz tests found them): the instruction's
# line, and words of the message.
INVALID = [
    ("transpose dimensions not a permutation",
     "  p = f32[16,32] parameter(0)\n  ROOT t = f32[32,16] transpose(p), dimensions={1,5}", 3, "not a permutation"),
    ("transpose dimensions too large for an index",
     "  p = f32[16,32] parameter(0)\n  ROOT t = f32[32,16] transpose(p), dimensions={1,100000000000000000000}",
     3, "not a permutation"),
    ("reduce over a dimension the operand lacks",
     "  p = f32[8,4] parameter(0)\n  c = f32[] constant(0)\n"
     "  ROOT r = f32[8] reduce(p, c), dimensions={9}, to_apply=add", 4, "names dimension 9"),
    ("reduce result not the kept dimensions",
     "  p = f32[8,4] parameter(0)\n  c = f32[] constant(0)\n"
     "  ROOT r = f32[4] reduce(p, c), dimensions={1}, to_apply=add", 4, "should have shape f32[8]"),
    ("binary op of two shapes",
     "  p = f32[8] parameter(0)\n  q = f32[2] parameter(1)\n  ROOT a = f32[8] add(p, q)", 4, "different shapes"),
    ("elementwise result of another shape",
     "  p = f32[8] parameter(0)\n  ROOT n = f32[2] negate(p)", 3, "should have shape f32[8]"),
    ("broadcast dimension count",
     "  p = f32[8] parameter(0)\n  ROOT b = f32[8,4] broadcast(p), dimensions={}", 3, "0 dimensions= entries"),
    ("slice past the end",
     "  p = f32[8] parameter(0)\n  ROOT s = f32[4] slice(p), slice={[6:10]}", 3, "[6:10:1] of dimension 0"),
    ("concatenate of mismatched operands",
     "  p = f32[2,1] parameter(0)\n  q = f32[3,1] parameter(1)\n"
     "  ROOT c = f32[5,1] concatenate(p, q), dimensions={1}", 4, "differ outside dimension 1"),
    ("dynamic-update-slice with too few indices",
     "  p = f32[8] parameter(0)\n  u = f32[2] parameter(1)\n  ROOT d = f32[8] dynamic-update-slice(p, u)", 4,
     "needs 1 integer scalar start indices"),
    ("get-tuple-element past the tuple",
     "  p = (f32[2], f32[3]) parameter(0)\n  ROOT g = f32[3] get-tuple-element(p), index=2", 3, "element 2"),
    ("tuple of other shapes",
     "  p = f32[2] parameter(0)\n  ROOT t = (f32[2], f32[3]) tuple(p, p)", 3, "the tuple of its operands"),
    ("sort without operands",
     "  ROOT s = f32[10] sort(), dimensions={0}, to_apply=add", 2, "needs 1 operand"),
    ("dot result not batch, lhs and rhs dimensions in order",
     "  p = f32[2,8,4] parameter(0)\n  q = f32[2,4,3] parameter(1)\n"
     "  ROOT d = f32[2,3,8] dot(p, q), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2},"
     " rhs_contracting_dims={1}", 4, "should have shape f32[2,8,3]"),
    ("dot batch dimensions listed in another order",
     "  p = f32[2,5,8,4] parameter(0)\n  q = f32[5,2,4,3] parameter(1)\n"
     "  ROOT d = f32[2,5,8,3] dot(p, q), lhs_batch_dims={1,0}, rhs_batch_dims={0,1}, lhs_contracting_dims={3},"
     " rhs_contracting_dims={2}", 4, "should have shape f32[5,2,8,3]"),
]


@pytest.mark.parametrize("what, entry, line, words", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_instructions_are_rejected_at_their_line(what, entry, line, words):
    module = _module(entry)
    with pytest.raises(HloVerifierError) as err:
        verify(module)
    assert err.value.line == 8 + line, err.value  # the entry's first instruction is on line 9
    assert words in err.value.message, err.value.message
    assert isinstance(err.value, HloSyntaxError) and isinstance(err.value, HlofuseError)


FUSED = "fused {\n  p0 = f32[8] parameter(0)\n  p1 = f32[8] parameter(1)\n  ROOT m = f32[8] multiply(p0, p1)\n}\n\n"


@pytest.mark.parametrize("entry, words", [
    ("  x = f32[8] parameter(0)\n  ROOT f = f32[8] fusion(x), kind=kLoop, calls=fused",
     "has 2 parameter(s), but is passed 1"),
    ("  x = pred[8] parameter(0)\n  ROOT f = f32[8] fusion(x, x), kind=kLoop, calls=fused",
     "parameter 0 of fused is f32[8], but f passes pred[8]"),
    ("  x = f32[8] parameter(0)\n  ROOT f = f32[4] fusion(x, x), kind=kLoop, calls=fused",
     "the root of its computation fused is f32[8]"),
    ("  x = f32[8] parameter(0)\n  f = f32[8] fusion(x, x), kind=kLoop, calls=fused\n"
     "  ROOT g = f32[8] fusion(x, f), kind=kLoop, calls=fused",
     "already the body of fusion f"),
    ("  x = f32[8] parameter(0)\n  f = f32[8] fusion(x, x), kind=kLoop, calls=fused\n"
     "  ROOT c = f32[8] call(x, f), to_apply=fused",
     "the fused computation of f"),
])
def test_fusions_must_fit_their_computation(entry, words):
    with pytest.raises(HloVerifierError) as err:
        verify(_module(entry, FUSED))
    assert words in err.value.message, err.value.message


def test_fused_computations_have_no_dead_instructions_and_a_root_without_users():
    dead = ("fused {\n  p0 = f32[8] parameter(0)\n  n = f32[8] negate(p0)\n  ROOT e = f32[8] exponential(p0)\n}\n\n")
    with pytest.raises(HloVerifierError, match="n in fused computation fused has no users"):
        verify(_module("  x = f32[8] parameter(0)\n  ROOT f = f32[8] fusion(x), kind=kLoop, calls=fused", dead))


def test_fused_computations_use_every_parameter():
    # (a multi-output fusion pass indexed past the end of a body whose root had become a parameter)
    unused = "fused {\n  p0 = f32[8] parameter(0)\n  ROOT p1 = f32[8] parameter(1)\n}\n\n"
    with pytest.raises(HloVerifierError, match="p0 in fused computation fused has no users"):
        verify(_module("  x = f32[8] parameter(0)\n  ROOT f = f32[8] fusion(x, x), kind=kLoop, calls=fused", unused))


def test_array_sizes_fit_an_int64():
    with pytest.raises(HloVerifierError, match="size may overflow int64_t"):
        verify(_module("  p = f32[4294967296,4294967296] parameter(0)\n  ROOT n = f32[4294967296,4294967296] negate(p)"))
    verify(_module("  p = s8[4294967296,1073741824] parameter(0)\n  ROOT n = s8[4294967296,1073741824] negate(p)"))


def test_loops_and_calls_must_fit_their_computations():
    body = ("body {\n  s = (f32[2], s32[]) parameter(0)\n  ROOT t = (f32[2], s32[]) tuple(g0, g1)\n"
            "  g0 = f32[2] get-tuple-element(s), index=0\n  g1 = s32[] get-tuple-element(s), index=1\n}\n\n"
            "cond {\n  s = (f32[2], s32[]) parameter(0)\n  ROOT c = s32[] get-tuple-element(s), index=1\n}\n\n")
    entry = ("  a = f32[2] parameter(0)\n  i = s32[] constant(0)\n  t = (f32[2], s32[]) tuple(a, i)\n"
             "  ROOT w = (f32[2], s32[]) while(t), condition=cond, body=body")
    with pytest.raises(HloVerifierError, match="returns s32\\[\\], not pred\\[\\]"):
        verify(_module(entry, body))
    with pytest.raises(HloVerifierError, match="has 1 parameter\\(s\\), but is passed 2"):
        verify(_module("  a = f32[] parameter(0)\n  ROOT c = f32[] call(a, a), to_apply=neg",
                       "neg {\n  x = f32[] parameter(0)\n  ROOT n = f32[] negate(x)\n}\n\n"))


def test_parameters_are_numbered_without_gaps():
    with pytest.raises(HloVerifierError, match="no parameter number 1"):
        verify(_module("  a = f32[] parameter(0)\n  b = f32[] parameter(2)\n  ROOT s = f32[] add(a, b)"))


def test_replay_and_explain_raise_the_verifier_error():
    bad = _module("  p = f32[16,32] parameter(0)\n  ROOT t = f32[32,16] transpose(p), dimensions={1,5}")
    for backend, pipeline in (("gpu", "legacy"), ("gpu", "priority"), ("cpu", "cpu")):
        with pytest.raises(HloVerifierError):
            replay(bad, Options(backend=backend, pipeline=pipeline))
    fused = _module("  x = f32[8] parameter(0)\n  ROOT f = f32[8] fusion(x), kind=kLoop, calls=fused", FUSED)
    with pytest.raises(HloVerifierError):
        explain(fused, fused=True)


def test_the_cli_prints_one_line_with_the_place(tmp_path):
    from click.testing import CliRunner

    from hlofuse.cli import main

    path = tmp_path / "bad.hlo"
    path.write_text(hlofuse.dumps(_module("  p = f32[8] parameter(0)\n  ROOT n = f32[2] negate(p)")))
    result = CliRunner().invoke(main, ["fuse", str(path)])
    assert result.exit_code == 3, result.output
    assert f"{path}:" in result.output and "error: negate n should have shape f32[8]" in result.output
    assert "Traceback" not in result.output


def test_what_xla_accepts_passes():
    """Every module of the sample dumps and of XLA's own fusion tests verifies."""
    files = [p for p in sorted(REPO.glob("sample_dumps/*/*/*.txt")) if "fusion_dump" not in p.name]  # (XLA's logs)
    corpus = shared_dir() / "corpus" / "fusion"
    files += sorted(corpus.glob("*.hlo")) if corpus.is_dir() else []
    assert len(files) > 400
    for path in files:
        verify(hlofuse.load(path))


def test_leniencies_xla_allows():
    # mixed floating-point precision, a bitcast that changes the size (XLA's layout-insensitive
    # verifier, which its fusion tests use), a scalar reduce-window without a window, an
    # unbounded dynamic dimension
    verify(_module("  p = f32[8] parameter(0)\n  q = bf16[8] parameter(1)\n  a = f32[8] add(p, q)\n"
                   "  b = s32[2,4] bitcast(a)\n  ROOT r = bf16[8] convert(a)"))
    verify(_module("  c = f32[] constant(1)\n  ROOT w = f32[] reduce-window(c, c), to_apply=add"))
    verify(_module("  p = f32[?] parameter(0)\n  ROOT n = f32[?] negate(p)"))
