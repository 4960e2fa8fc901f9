"""Multi-output fusions write only what is read (XLA's HloDCE drops the other outputs:
RemoveMultiOutputFusionsUnusedOutputs), and `check` compares what a kernel writes as well as
what it computes (status `outputs`)."""

from __future__ import annotations

import pytest

import hlofuse
from hlofuse.check import compare
from hlofuse.graph import Program
from hlofuse.passes.cleanup import dce
from hlofuse.pipeline import Options, replay

from conftest import shared_dir

BEFORE = """HloModule m

ENTRY e {
  p = f32[1024] parameter(0)
  a = f32[1024] exponential(p)
  b = f32[1024] negate(a)
  c = f32[1024] sine(a)
  ROOT t = (f32[1024], f32[1024]) tuple(b, c)
}
"""


def _after(outputs: str, shape: str) -> str:
    """XLA's module after fusion: one kernel of a, b and c writing `outputs`."""
    return f"""HloModule m

fused {{
  q = f32[1024] parameter(0)
  a = f32[1024] exponential(q)
  b = f32[1024] negate(a)
  c = f32[1024] sine(a)
  ROOT o = {shape} tuple({outputs})
}}

ENTRY e {{
  p = f32[1024] parameter(0)
  f = {shape} fusion(p), kind=kLoop, calls=fused
  g0 = f32[1024] get-tuple-element(f), index=0
  g1 = f32[1024] get-tuple-element(f), index=1
  ROOT t = (f32[1024], f32[1024]) tuple(g0, g1)
}}
"""


@pytest.mark.parametrize("pipeline", ["legacy", "priority"])
def test_check_compares_the_values_a_kernel_writes(pipeline):
    result = replay(hlofuse.loads(BEFORE), Options(backend="gpu", pipeline=pipeline))
    same = compare(result, hlofuse.loads(_after("b, c", "(f32[1024], f32[1024])")))
    assert [m.status for m in same.matches] == ["exact"] and same.agreement == 1.0
    # XLA's kernel of the same instructions also writes `a`, which nothing reads
    three = "(f32[1024], f32[1024], f32[1024])"
    more = compare(result, hlofuse.loads(_after("b, c, a", three)))
    assert [m.status for m in more.matches] == ["outputs"] and more.reproduced == 0
    xla, ours = more.matches[0].outputs
    assert sorted(xla) == ["a", "b", "c"] and sorted(ours) == ["b", "c"]
    assert more.to_dict()["kernels"][0]["outputs"] == {"xla": list(xla), "ours": list(ours)}


UNREAD = """HloModule m

fused {
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  e = f32[64] exponential(x)
  n = f32[64] negate(y)
  s = f32[64] sine(x)
  ROOT o = (f32[64], f32[64], f32[64]) tuple(e, n, s)
}

ENTRY main {
  p = f32[64] parameter(0)
  q = f32[64] parameter(1)
  f = (f32[64], f32[64], f32[64]) fusion(p, q), kind=kLoop, calls=fused
  g0 = f32[64] get-tuple-element(f), index=0
  g2 = f32[64] get-tuple-element(f), index=2
  unread = f32[64] get-tuple-element(f), index=1
  ROOT r = (f32[64], f32[64]) tuple(g0, g2)
}
"""


def test_dce_drops_outputs_nobody_reads_and_what_only_they_needed():
    program = Program.from_module(hlofuse.loads(UNREAD))
    assert dce(program)
    module = program.to_module()
    entry, body = module.entry, module.by_name["fused"]
    assert entry["f"].shape.to_text(False) == "(f32[64], f32[64])"
    assert [i.opcode for i in body.instructions if i.opcode != "parameter"].count("negate") == 0
    assert len(body.parameters) == 1 and entry["f"].operands == ("p",)  # q only fed the dropped output
    assert {entry[g].attr("index") for g in ("g0", "g2")} == {"0", "1"}
    assert hlofuse.loads(hlofuse.dumps(module)) == module


def test_one_output_left_the_fusion_is_that_output():
    text = UNREAD.replace("  g2 = f32[64] get-tuple-element(f), index=2\n", "").replace("tuple(g0, g2)", "tuple(g0, g0)")
    program = Program.from_module(hlofuse.loads(text))
    dce(program)
    module = program.to_module()
    assert module.entry["f"].shape.to_text(False) == "f32[64]"
    assert module.by_name["fused"].root.opcode == "exponential"
    assert module.entry.root.operands == ("f", "f")


def _corpus_case(name: str) -> str:
    path = shared_dir() / "corpus" / "fusion" / name
    if not path.exists():
        pytest.skip("the shared corpus is not here")
    return path.read_text()


@pytest.mark.parametrize("pipeline", ["legacy", "priority"])
def test_replayed_multi_output_fusions_have_no_unread_output(pipeline):
    """XLA's test case where a loop fusion and a reduce fusion become one multi-output fusion:
    the replay left the loop fusion's value as an output nobody read."""
    module = hlofuse.loads(_corpus_case("multi_output_fusion__ProducerConsumerFusionLoopFusionAndReduceFusion.hlo"))
    fused = replay(module, Options(backend="gpu", pipeline=pipeline)).module
    for comp in fused.computations:
        for instr in comp.instructions:
            body = fused.by_name.get(instr.fused_computation or "")
            if instr.opcode != "fusion" or body is None or body.root.opcode != "tuple":
                continue
            read = {comp[u].attr("index") for u in comp.users[instr.name]}
            assert read == {str(i) for i in range(len(body.root.operands))}, (instr.name, read)


def test_the_check_command_names_the_outputs_that_differ(tmp_path):
    import json

    from click.testing import CliRunner

    from hlofuse.cli import main

    before, after = tmp_path / "before.hlo", tmp_path / "after.hlo"
    before.write_text(BEFORE)
    after.write_text(_after("b, c, a", "(f32[1024], f32[1024], f32[1024])"))
    table = CliRunner().invoke(main, ["check", str(before), str(after), "--pipeline", "priority"])
    assert table.exit_code == 0, table.output
    assert "outputs" in table.output and "writes" in table.output
    out = CliRunner().invoke(main, ["check", str(before), str(after), "--pipeline", "priority", "--json"])
    kernels = json.loads(out.output)["kernels"]
    assert [k["status"] for k in kernels] == ["outputs"]
    assert sorted(kernels[0]["outputs"]["xla"]) == ["a", "b", "c"]
