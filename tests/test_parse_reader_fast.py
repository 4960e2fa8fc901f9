"""The reader's fast path builds instructions by writing their slots (reader._instruction_maker)
and counts lines once per instruction: the same instructions and the same line:column as the
dataclass constructors and a count from the start of the text."""

from __future__ import annotations

import dataclasses

import pytest

from hlofuse import ir
from hlofuse.parse import parse_text, reader

from conftest import REPO, read_text

SAMPLE = next((REPO / "sample_dumps" / "cpu" / "cartpole_d_unroll10").glob("*after_optimizations.txt"))


def _rebuilt(instr: ir.Instruction) -> ir.Instruction:
    values = {f.name: getattr(instr, f.name) for f in dataclasses.fields(ir.Instruction)}
    values["span"] = ir.Span(instr.span.line, instr.span.column)
    return ir.Instruction(**values)


def test_instructions_of_the_fast_path_equal_those_of_the_constructor():
    module = parse_text(read_text(SAMPLE), str(SAMPLE))
    count = 0
    for comp in module.computations:
        for instr in comp.instructions:
            copy = _rebuilt(instr)
            assert instr == copy and hash(instr) == hash(copy) and repr(instr) == repr(copy)
            assert instr.span == copy.span and type(instr.span) is ir.Span
            count += 1
    assert count > 100


def test_the_constructors_are_used_when_the_fields_change(monkeypatch):
    monkeypatch.setattr(reader, "_INSTRUCTION_FIELDS", ("name", "opcode"))
    make = reader._instruction_maker()
    made = make("a", "fusion", ir.Shape("f32"), ("x", "y"), (("calls", "f"),), None, ("f",), 3, 4)
    assert made == ir.Instruction("a", "fusion", ir.Shape("f32"), ("x", "y"), (("calls", "f"),), None, ("f",),
                                  ir.Span(3, 4))
    monkeypatch.undo()
    fast = reader._instruction_maker()("a", "fusion", ir.Shape("f32"), ("x", "y"), (("calls", "f"),), None, ("f",),
                                       3, 4)
    assert fast == made and fast.span == ir.Span(3, 4)


TEXT = """HloModule m

add {
  x = f32[] parameter(0)


  y = f32[] parameter(1)
  ROOT s = f32[] add(x,
      y), metadata={op_name="a"
 source_file="f.py"}
}

ENTRY e {
  a = f32[4]{0} parameter(0)
      b = f32[4]{0} negate(a)
  c = f32[] constant(0)
  ROOT r = f32[] reduce(b, c), dimensions={0}, to_apply=add
}
"""


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_lines_and_columns_are_where_the_names_are(newline):
    text = TEXT.replace("\n", newline)
    module = parse_text(text, "m.hlo")
    lines = text.split(newline)
    for comp in module.computations:
        for instr in comp.instructions:
            line = lines[instr.span.line - 1]
            column = instr.span.column - 1
            shown = line[column:]
            assert shown.startswith(("ROOT " + instr.name, instr.name + " ")), (instr.name, instr.span)


_RUN_OF_COMPUTATIONS = """HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

/* a comment between computations */
%neg (x: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  ROOT %n = f32[] negate(%x)
}, execution_thread="side"
%mul (p: f32[], q: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  %q = f32[] parameter(1)
  ROOT %m = f32[] multiply(%p, %q)
}
ENTRY %main (y: f32[]) -> f32[] {
  %y = f32[] parameter(0)
  ROOT %r = f32[] call(%y), to_apply=%neg
}
"""


def _expected_spans(text: str) -> dict[str, tuple[int, int]]:
    spans = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if " = " in stripped and not stripped.startswith("HloModule"):
            name = stripped.removeprefix("ROOT ").split(" = ")[0].lstrip("%")
            spans[name] = (number, len(line) - len(stripped) + 1)
    return spans


@pytest.mark.parametrize("text", [_RUN_OF_COMPUTATIONS, _RUN_OF_COMPUTATIONS.replace("HloModule m\n", "")])
def test_computations_read_one_after_another(text):
    """The lexer reads computations that follow each other (comments between them skipped) as
    one token: each keeps its own instructions, lines and columns, and attributes after a
    computation's `}` stay that computation's (the run stops there and goes on after them)."""
    module = parse_text(text)
    assert [c.name for c in module.computations] == ["add", "neg", "mul", "main"]
    assert module["neg"].attrs == (("execution_thread", '"side"'),)
    assert all(module[name].attrs == () for name in ("add", "mul", "main"))
    expected = _expected_spans(text)
    got = {i.name: (i.span.line, i.span.column) for c in module.computations for i in c.instructions}
    assert got == expected
    assert module["mul"].span.line == text.splitlines().index("%mul (p: f32[], q: f32[]) -> f32[] {") + 1


CALLS = """HloModule m

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

%fused (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}

ENTRY %e (a: f32[4]) -> f32[] {
  %a = f32[4]{0} parameter(0)
  %f = f32[4]{0} fusion(%a), kind=kLoop, calls=%fused
  %g = f32[4]{0} fusion(%f), kind=kLoop, calls=fused, control-predecessors={%f}
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%g, %z), dimensions={0}, to_apply=%add
}
"""


def test_computations_called_by_name_are_resolved_by_the_reader():
    """`calls=%fused`, `to_apply=%add`: the reader drops the `%` and fills `called` itself (an
    ir.Instruction, nothing left to assembly); control predecessors still go to assembly.  The
    module is the one the token-by-token path (a comment stops the reader) makes."""
    read = reader.READERS["COMPUTATION"]
    at = CALLS.index("ENTRY")
    raw, _ = read(CALLS, at, len(CALLS), CALLS.count("\n", 0, at) + 1, at)
    kinds = {item.name: type(item).__name__ for item in raw.instrs}
    assert kinds == {"a": "Instruction", "f": "Instruction", "g": "RawInstr", "z": "Instruction",
                     "r": "Instruction"}
    f, r = raw.instrs[1], raw.instrs[4]
    assert f.called == ("fused",) and f.attr("calls") == "fused"
    assert r.called == ("add",) and r.attr("to_apply") == "add"
    module = parse_text(CALLS)
    by_tokens = parse_text(CALLS.replace("  ROOT %r", "  // read token by token\n  ROOT %r"))
    assert [i for c in module.computations for i in c] == [i for c in by_tokens.computations for i in c]
    assert [i.called for i in module.entry] == [(), ("fused",), ("fused",), (), ("add",)]
