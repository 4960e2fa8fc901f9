"""Cycles are rejected when the text is read (hlofuse/cycles.py): an instruction that depends
on itself through operands or control predecessors, a computation that calls itself.  Names
used before their definition are not cycles and stay accepted; large and deep modules are
walked without recursion."""

from __future__ import annotations

import sys

import pytest

import hlofuse
from hlofuse import HloSyntaxError, ir
from hlofuse.cycles import call_cycle, find_cycle, instruction_cycle, require_acyclic

from conftest import CHILD_PYTHONPATH, REPO


def _module(*computations: str) -> str:
    return "HloModule m\n\n" + "\n\n".join(computations) + "\n"


ADD = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}"


def _reject(text: str) -> HloSyntaxError:
    with pytest.raises(HloSyntaxError) as info:
        hlofuse.loads(text, path="cyc.hlo")
    return info.value


# -- instructions ------------------------------------------------------------------------------

def test_an_instruction_that_is_its_own_operand():
    err = _reject(_module("ENTRY main {\n  p = f32[4] parameter(0)\n  exp = f32[4] exponential(exp)\n"
                          "  ROOT add = f32[4] add(p, exp)\n}"))
    assert "A cycle is detected while visiting instruction exp: exp → exp" in err.message
    assert (err.path, err.line, err.column) == ("cyc.hlo", 5, 3)
    assert err.context().startswith("  exp = f32[4] exponential(exp)")


def test_operands_that_form_a_loop():
    err = _reject(_module("ENTRY main {\n  p = f32[4] parameter(0)\n  a = f32[4] add(p, b)\n"
                          "  b = f32[4] negate(a)\n  ROOT r = f32[4] add(p, b)\n}"))
    assert "a → b → a" in err.message and "computation main" in err.message
    assert err.line == 5


def test_a_loop_through_control_predecessors():
    err = _reject(_module("ENTRY main {\n  p = f32[4] parameter(0)\n"
                          "  a = f32[4] negate(p), control-predecessors={b}\n"
                          "  b = f32[4] exponential(p), control-predecessors={a}\n"
                          "  ROOT r = f32[4] add(a, b)\n}"))
    assert "a → b → a" in err.message


def test_a_loop_of_an_operand_and_a_control_predecessor():
    err = _reject(_module("ENTRY main {\n  p = f32[4] parameter(0)\n  a = f32[4] negate(b)\n"
                          "  b = f32[4] exponential(p), control-predecessors={a}\n  ROOT r = f32[4] add(a, b)\n}"))
    assert "a → b → a" in err.message


def test_a_cycle_in_a_fused_computation():
    err = _reject(_module("fused {\n  x = f32[4] parameter(0)\n  n = f32[4] negate(m)\n"
                          "  ROOT m = f32[4] add(x, n)\n}",
                          "ENTRY main {\n  p = f32[4] parameter(0)\n  ROOT f = f32[4] fusion(p), kind=kLoop, calls=fused\n}"))
    assert "in computation fused" in err.message and ("n → m → n" in err.message or "m → n → m" in err.message)


def test_names_used_before_their_definition_are_not_cycles():
    module = hlofuse.loads(_module(
        "ENTRY main {\n  ROOT r = f32[4] add(a, b)\n  b = f32[4] negate(a), control-predecessors={c}\n"
        "  a = f32[4] exponential(p)\n  c = f32[4] copy(p)\n  p = f32[4] parameter(0)\n}"))
    assert [i.name for i in module.entry.post_order] == ["p", "a", "c", "b", "r"]


# -- computations ------------------------------------------------------------------------------

@pytest.mark.parametrize("call, where", [
    ("ROOT c = f32[4] call(x), to_apply=body", "to_apply"),
    ("ROOT f = f32[4] fusion(x), kind=kLoop, calls=body", "calls"),
    ("ROOT r = f32[4] map(x), dimensions={0}, to_apply=body", "map"),
])
def test_a_computation_that_calls_itself(call, where):
    err = _reject(_module(f"body {{\n  x = f32[4] parameter(0)\n  {call}\n}}",
                          "ENTRY main {\n  p = f32[4] parameter(0)\n  ROOT c = f32[4] call(p), to_apply=body\n}"))
    assert "computation body calls itself: body → body" in err.message, where
    assert (err.line, err.column) == (5, 3)


def test_a_while_body_that_runs_its_own_loop():
    cond = "cond {\n  s = (s32[]) parameter(0)\n  ROOT t = pred[] constant(false)\n}"
    body = ("body {\n  s = (s32[]) parameter(0)\n  ROOT w = (s32[]) while(s), condition=cond, body=body\n}")
    entry = "ENTRY main {\n  p = (s32[]) parameter(0)\n  ROOT w = (s32[]) while(p), condition=cond, body=body\n}"
    err = _reject(_module(cond, body, entry))
    assert "body → body" in err.message and "through w" in err.message


def test_calls_in_a_circle_through_conditional_branches():
    a = "a {\n  x = f32[] parameter(0)\n  ROOT c = f32[] call(x), to_apply=b\n}"
    b = ("b {\n  x = f32[] parameter(0)\n  i = s32[] constant(0)\n"
         "  ROOT k = f32[] conditional(i, x), branch_computations={a}\n}")
    entry = "ENTRY main {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=a\n}"
    err = _reject(_module(a, b, entry))
    assert "a → b → a" in err.message


def test_computations_defined_after_their_callers_are_not_cycles():
    module = hlofuse.loads(_module("ENTRY main {\n  p = f32[8] parameter(0)\n  c = f32[] constant(0)\n"
                                   "  ROOT r = f32[] reduce(p, c), dimensions={0}, to_apply=add\n}", ADD))
    assert module.entry_name == "main" and call_cycle(module) is None


# -- size and depth: no recursion, no slow path for the usual order ------------------------------

def test_a_long_chain_written_backwards_and_a_cycle_at_its_end():
    n = 20_000
    lines = [f"  ROOT v{n} = f32[2] negate(v{n - 1})"]
    lines += [f"  v{k} = f32[2] negate(v{k - 1})" for k in range(n - 1, 0, -1)]
    ok = _module("ENTRY main {\n" + "\n".join(lines) + "\n  v0 = f32[2] parameter(0)\n}")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # the walk must not recurse (the parser itself stays shallow)
    try:
        comp = hlofuse.loads(ok).entry
        assert instruction_cycle(comp.instructions, comp.by_name) is None
        looped = ok.replace("v0 = f32[2] parameter(0)", f"v0 = f32[2] negate(v{n})")
        looped = looped.replace("ROOT v", "p = f32[2] parameter(0)\n  ROOT v", 1)
        err = _reject(looped)
    finally:
        sys.setrecursionlimit(limit)
    assert err.message.startswith(f"A cycle is detected while visiting instruction v{n}: v{n} → ")
    assert "..." in err.message and len(err.message) < 300  # a long cycle is shortened


def test_a_thousand_deep_call_chain_written_backwards():
    comps = ["ENTRY main {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=c1\n}"]
    comps += [f"c{k} {{\n  x = f32[] parameter(0)\n  ROOT c = f32[] call(x), to_apply=c{k + 1}\n}}"
              for k in range(1, 1000)]
    comps.append("c1000 {\n  ROOT x = f32[] parameter(0)\n}")
    module = hlofuse.loads(_module(*comps))
    assert call_cycle(module) is None
    looped = _module(*comps[:-1], "c1000 {\n  x = f32[] parameter(0)\n  ROOT c = f32[] call(x), to_apply=c1\n}")
    err = _reject(looped)
    assert "calls itself" in err.message


def test_find_cycle_on_a_plain_graph():
    graph = {"a": ["b"], "b": ["c", "d"], "c": [], "d": ["b"]}
    assert find_cycle(graph, graph.__getitem__) == ("b", "d", "b")
    assert find_cycle({"a": ["b"], "b": []}, {"a": ["b"], "b": []}.__getitem__) is None


# -- modules built in memory: every stage that walks a graph checks first --------------------------

def _handmade_cycle() -> ir.Module:
    shape = ir.array_shape("f32", (4,))
    instrs = (ir.Instruction("p", "parameter", shape, literal="0"),
              ir.Instruction("a", "add", shape, ("p", "b")),
              ir.Instruction("b", "negate", shape, ("a",)))
    return ir.Module("m", (ir.Computation("main", instrs, "b", is_entry=True),), "main")


def test_stages_refuse_a_cyclic_module_built_in_memory():
    import numpy as np

    from hlofuse.execute.interp import evaluate
    from hlofuse.execute.lower import lower
    from hlofuse.explain import explain
    from hlofuse.pipeline import Options, replay

    module = _handmade_cycle()
    with pytest.raises(HloSyntaxError, match="a → b → a"):
        require_acyclic(module)
    with pytest.raises(HloSyntaxError, match="A cycle is detected"):
        replay(module, Options(backend="cpu"))
    with pytest.raises(HloSyntaxError, match="A cycle is detected"):
        explain(module, backend="cpu", fused=True)
    with pytest.raises(HloSyntaxError, match="A cycle is detected"):
        evaluate(module, [np.ones(4, np.float32)])
    with pytest.raises(HloSyntaxError, match="A cycle is detected"):
        lower(module)


# -- the command line: one line, exit code 3, no hang -------------------------------------------

@pytest.mark.parametrize("command", ["parse", "fuse", "explain"])
def test_commands_reject_a_cycle(tmp_path, command):
    import os
    import subprocess

    path = tmp_path / "cyc.hlo"
    path.write_text(_module("ENTRY main {\n  p = f32[4] parameter(0)\n  exp = f32[4] exponential(exp)\n"
                            "  ROOT add = f32[4] add(p, exp)\n}"))
    run = subprocess.run([sys.executable, "-m", "hlofuse", command, str(path)], capture_output=True, text=True,
                         cwd=REPO, env={"PYTHONPATH": CHILD_PYTHONPATH, "PATH": "/usr/bin:/bin",
                                        "HLOFUSE_CACHE": os.environ["HLOFUSE_CACHE"]}, timeout=120)
    assert run.returncode == 3, run.stderr
    errors = [line for line in run.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1
    assert errors[0].startswith(f"{path}:5:3: error: A cycle is detected while visiting instruction exp")
    assert "Traceback" not in run.stderr
