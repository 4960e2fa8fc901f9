"""Control dependencies through a replay: an edge whose instruction is fused, replaced or
deleted moves to what takes its place, so the fused module names only live instructions and
parses back (before, `'cp1' is not defined (control predecessor of cp4.1)`)."""

from __future__ import annotations

import pytest

import hlofuse
from hlofuse import ir
from hlofuse.graph import Program
from hlofuse.passes.cleanup import dce
from hlofuse.pipeline import Options, replay

from conftest import shared_dir

PIPELINES = [("gpu", "legacy"), ("gpu", "priority"), ("cpu", "cpu")]


def _controls(module: ir.Module) -> dict[str, tuple[str, ...]]:
    """Instruction → the kernels (its own computation's instructions) it waits for."""
    out = {}
    for comp in module.computations:
        for instr in comp.instructions:
            text = instr.attr("control-predecessors")
            if text:
                out[instr.name] = tuple(ir._names_in(text))
    return out


def _kernel_of(result, name: str) -> str:
    return next(k.name for k in result.kernels if name in k.instructions)


def _round_trip(result) -> ir.Module:
    text = hlofuse.dumps(result.module)
    again = hlofuse.loads(text)
    assert hlofuse.dumps(again) == text
    return again


@pytest.mark.parametrize("backend, pipeline", PIPELINES)
def test_xla_copy_insertion_case_prints_back(backend, pipeline):
    path = shared_dir() / "corpus" / "fusion" / "horizontal_loop_fusion__CopyInsertionFusionControlFlow.hlo"
    if not path.exists():
        pytest.skip("the shared corpus is not here")
    result = replay(hlofuse.load(path), Options(backend=backend, pipeline=pipeline))
    module = _round_trip(result)
    controls = _controls(module)
    # cp4 still waits for cp1, whatever kernels hold them now
    cp4, cp1 = _kernel_of(result, "cp4"), _kernel_of(result, "cp1")
    assert controls.get(cp4) == (cp1,), controls
    for comp in module.computations:
        if comp.name in module.fusion_computations:
            assert not any(i.attr("control-predecessors") for i in comp.instructions)


FUSED_PRODUCER = """HloModule m

ENTRY e {
  p = f32[8] parameter(0)
  a = f32[8] negate(p)
  b = f32[8] exponential(p), control-predecessors={a}
  s = f32[8] sine(p), control-predecessors={b}
  d = f32[8] cosine(p), control-predecessors={b}
  c = f32[8] add(b, s)
  ROOT t = (f32[8], f32[8], f32[8]) tuple(a, c, d)
}
"""


def test_a_fused_producer_hands_its_edges_to_the_fusion():
    # XLA:CPU keeps a, d and the b+s+c kernel apart: the kernel computing b waits for a's
    # kernel, and d's kernel waits for the kernel computing b (and for a, which b waited for)
    result = replay(hlofuse.loads(FUSED_PRODUCER), Options(backend="cpu"))
    module = _round_trip(result)
    a, bc, d = (_kernel_of(result, n) for n in ("a", "c", "d"))
    assert _kernel_of(result, "b") == bc != a
    controls = _controls(module)
    assert controls[bc] == (a,)
    assert set(controls[d]) == {a, bc}


@pytest.mark.parametrize("backend, pipeline", PIPELINES)
def test_every_pipeline_prints_back_modules_with_control_edges(backend, pipeline):
    _round_trip(replay(hlofuse.loads(FUSED_PRODUCER), Options(backend=backend, pipeline=pipeline)))


def test_dce_keeps_dead_instructions_with_control_edges():
    """XLA's HloDCE removes only what IsSafelyRemovable: no control predecessors or successors."""
    module = hlofuse.loads("""HloModule m

ENTRY e {
  p = f32[8] parameter(0)
  dead = f32[8] negate(p)
  gone = f32[8] sine(p)
  ROOT r = f32[8] exponential(p), control-predecessors={dead}
}
""")
    program = Program.from_module(module)
    dce(program)
    names = {n.name for n in program.entry}
    assert "dead" in names and "gone" not in names
